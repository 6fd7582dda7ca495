#!/usr/bin/env bash
# The ThreadSanitizer stage (`make tsan`; `make check` runs it after the
# ASan run): the unit tests and integration scripts that run more than one
# thread, against the build in $TSAN_BUILD (build/tsan, -fsanitize=thread).
# TSan stops a process at its first report (halt_on_error=1, exit 66), and
# the integration helpers fail on any "Sanitizer" line in the daemon's log
# or the CLI's stderr. tests/tsan.supp holds suppressions for third-party
# libraries only. Output as scripts/run-tests.sh: one line per test, then
# "N passed, N failed, N skipped"; exit 1 if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."

UNIT_TIMEOUT=${UNIT_TIMEOUT:-600}
INTEG_TIMEOUT=${INTEG_TIMEOUT:-600}
TSAN_BUILD=${TSAN_BUILD:-build/tsan}

# Unit tests with threads of their own or of the library (the control
# thread, the worker pool, synchronous waiters off the loop thread);
# test_threads* and test_mt*: the multi-threaded data path's (I/O
# threads), whatever their number.
UNITS=(test_threads test_sync test_workers test_control test_budget test_nfs_deleg test_nfs_parallel
	test_nfs_budget test_nfs_dir_fdcache test_loop_ring test_net_direct
	test_fdpump test_hostbdev test_nvmf_host_ns test_nfsclient test_nfs_state)
# Integration scripts whose daemon runs several threads (control commands
# on the control thread, many NBD connections: the I/O threads once
# `threads = N` exists); mt_*.sh: any later multi-thread test. Left out:
# nbd_budget, which bounds the daemon's RSS (TSan's shadow and allocator
# add hundreds of MiB); nvmf_clients and nvmf_budget (libnvmf and pynvmeof at depth 32 up
# to 1 MiB: too slow under TSan; nvmf_admin, nvmf_host, nvmf_multipath
# nvmf_ana and nvmf_ana_groups run the NVMe/TCP target's queues on
# several I/O threads instead; nvmf_ana(_groups): ANA states, per port
# and group, set on the main loop, read by I/O).
SCRIPTS=(mt_verify ctl_longzero ctl_nofreeze ctl_stream claims nbd_fio
	nbd_mirror nbd_clients nbd_resilience hostbdev_loop sd_tgt
	iscsi_clients nvmf_admin nvmf_host nvmf_multipath nvmf_ana
	nvmf_ana_groups)
# The nvmf host driver's bounded reconnect: requests handed from the I/O
# threads fail back to them while the device is down (about 15 s under
# TSan; it found a request read after its context went back home).
SCRIPTS+=(nvmf_down)
# NVMe Compare on the target's queues on two I/O threads: the per-queue
# scratch and each chunk read marked in the device for the budget's
# watchdog on the main loop (about 2 s)
SCRIPTS+=(nvmf_compare)
# event_loop = io_uring (connections on the I/O loops' rings) and epoll
SCRIPTS+=(daemon_event_loop)
# Remote leaves: the nbd driver (libnbd's connections and the reconnect
# timer against the I/O threads) and the multipath mapper over nbd paths
# (path state under its lock, flushes fanned out, the queue sent home
# across loops): about 150 s more under TSan on 2 shared cores (57 + 15 +
# about 80). mpath_sd passed under TSan too (86 s) and is left out to
# keep the stage short (sd_tgt covers the iscsi driver's hand-over).
SCRIPTS+=(nbd_driver nbd_driver_reconnect mpath_nbd)
# The rbd driver: librbd completes requests on its own threads (fio at
# depth 16 through an NBD export, and discard): about 55 s under TSan,
# most of it the test cluster's start (tests/tsan.supp: libceph-common).
SCRIPTS+=(rbd_io)
# NFS COMPOUNDs answered on the I/O threads beside the worker pool's
# (the server's lock tried from the loops, runs stopped there and gone
# on with on a worker)
SCRIPTS+=(nfs_inline)
# The in-flight budget's wake and eviction handed from the loop that
# gives bytes back to the NFS connection's own (two I/O threads, twelve
# libnfs clients; about 15 s)
SCRIPTS+=(nfs_budget)

# One test at a time unless TSAN_JOBS says more: TSan's tests are
# CPU-bound (its instrumentation costs every thread many times over), so
# two at a time on 2 cores were not shown to be faster; the ASan stage's
# CHECK_JOBS does not apply here.
CHECK_JOBS=${TSAN_JOBS:-1}
source scripts/lib/runner.bash

export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
# 4 GiB of mem would take 8 GiB more of TSan shadow: a quarter of it
# here (the p99 limit stays the same)
export LONGZERO_SIZE=${LONGZERO_SIZE:-1G}
# ctl_nofreeze: a zeroout that outlasts a few NBD clients (TSan's memset
# is slow enough at a third of the plain run's 1.5 GiB)
export NOFREEZE_SIZE=${NOFREEZE_SIZE:-512M}

if [[ ! -x $TSAN_BUILD/blkstackd ]]; then
	skip "tsan" "$TSAN_BUILD not built (make tsan)"
	summary
	exit
fi

shopt -s nullglob
declare -A seen=()
for t in "${UNITS[@]}" "$TSAN_BUILD"/tests/test_threads* \
	"$TSAN_BUILD"/tests/test_mt*; do
	t=${t##*/}
	[[ -n ${seen[$t]:-} ]] && continue
	seen[$t]=1
	if [[ -x $TSAN_BUILD/tests/$t ]]; then
		run "tsan/unit/$t" "$UNIT_TIMEOUT" "$TSAN_BUILD/tests/$t"
	else
		skip "tsan/unit/$t" "not in this tree"
	fi
done
for s in "${SCRIPTS[@]}" tests/integration/mt_*.sh; do
	s=$(basename "$s" .sh)
	[[ -n ${seen[$s]:-} ]] && continue
	seen[$s]=1
	if [[ -f tests/integration/$s.sh ]]; then
		alone=()
		is_alone "tests/integration/$s.sh" && alone=(--alone)
		run "${alone[@]}" "tsan/integration/$s" "$INTEG_TIMEOUT" \
			env BUILD="$TSAN_BUILD" bash "tests/integration/$s.sh"
	else
		skip "tsan/integration/$s" "not in this tree"
	fi
done

summary
