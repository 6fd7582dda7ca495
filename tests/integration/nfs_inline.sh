#!/usr/bin/env bash
# COMPOUNDs answered on the connection's I/O thread (docs/nfs.md
# "Threads"): bench/tools/nfsio (libnfs's async API, NFS 4.0) writes and
# reads 4 KiB blocks at random, one request in flight, then 16, each block
# checked against its offset's pattern, on a directory export with
# `inline` at its default and on one with `inline = 0`. Pass: every run
# verified, nfs-cat reads the host file's bytes, and at the stop the
# daemon counts calls answered on the I/O threads for the first export
# (the reads of cached data at least) and none for the second. Two I/O
# threads, so the workers, the loops and the lock meet (in the TSan stage
# too).
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
source "$(dirname "$0")/lib/nfs.bash"
need nfs-cat
[[ $EUID == 0 ]] || skip "the directory backend needs CAP_DAC_READ_SEARCH (run as root)"
daemon_setup
daemon_threads 2
nfsio_build || skip "nfsio not built ($(nfsio_why))"
PORT2=$(free_port)
mkdir -p "$T/on/d" "$T/off/d"
nfs_dir_export "$T/d.ini" on "$T/on" "$PORT"
nfs_dir_export "$T/d.ini" off "$T/off" "$PORT2" "inline = 0"
start_daemon "$T/d.ini"
grep -q "export on .*, inline$" "$T/d.log" || fail "export on: not inline"
grep -q "export off .*grace 0 s$" "$T/d.log" || fail "export off: inline"

for e in on off; do
	p=$PORT
	[[ $e == off ]] && p=$PORT2
	N="nfs://127.0.0.1/d/io?version=4&nfsport=$p"
	run_nfsio() {
		timeout 120 "$NFSIO" "$@" "$N" >>"$T/nfsio.$e" 2>&1 ||
			{ cat "$T/nfsio.$e" >&2; fail "$e: nfsio $*"; }
	}
	run_nfsio -m seq -o write -b 1M -q 4 -s 4M -C -V
	run_nfsio -m rand -o write -b 4k -q 1 -s 4M -n 400 -S 7 -V
	run_nfsio -m rand -o read -b 4k -q 1 -s 4M -n 400 -S 7 -V
	run_nfsio -m rand -o write -b 4k -q 16 -s 4M -n 400 -S 8 -V
	run_nfsio -m rand -o read -b 4k -q 16 -s 4M -n 400 -S 8 -V
	grep -c ' errors=0 verified=yes' "$T/nfsio.$e" | grep -qx 5 ||
		{ cat "$T/nfsio.$e" >&2; fail "$e: a run was not verified"; }
	timeout 60 nfs-cat "$N" >"$T/back.$e" 2>/dev/null || fail "$e: nfs-cat"
	cmp "$T/$e/d/io" "$T/back.$e" || fail "$e: nfs-cat: bytes differ"
done
note "nfsio: 4 KiB random writes and reads at qd 1 and 16, verified, on both exports"

stop_daemon
line() {
	grep "nfs: export $1: .* calls answered on the I/O threads" "$T/d.log" ||
		{ tail -20 "$T/d.log" >&2; fail "no call counts for $1"; }
}
read -r inl wrk < <(line on | sed -E 's/.*: ([0-9]+) calls answered on the I\/O threads, ([0-9]+) on workers/\1 \2/')
read -r inl0 wrk0 < <(line off | sed -E 's/.*: ([0-9]+) calls answered on the I\/O threads, ([0-9]+) on workers/\1 \2/')
note "inline on: $inl calls on the I/O threads, $wrk on workers; inline = 0: $inl0, $wrk0"
((inl >= 400)) || fail "inline on: only $inl calls on the I/O threads (the 800 reads of cached data should be)"
((inl0 == 0 && wrk0 > 0)) || fail "inline = 0: $inl0 calls on the I/O threads"
echo "PASS: nfs_inline"
