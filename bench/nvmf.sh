#!/usr/bin/env bash
# NVMe/TCP: blkstackd's nvmf target (`threads = 2`) driven by libnvmf's
# nvmf-fio (vendored in ../shared/peers, built into $BUILD/peers with the
# patch tests/integration/nvmf_clients.sh uses), beside fio's nbd engine
# against blkstackd's NBD export and nbdkit serving the same file: the
# same workloads, one queue/connection at depth 32. nvmf-fio prints IOPS
# only, so the nvmf rows have no latency columns. Rows are short: this is
# a comparison, not a soak.
#
# Knobs: NVMF_IMG_GIB, NVMF_WORKLOADS, JOB_SECONDS, BENCH_QUICK.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

for t in fio jq nbdkit make cc patch; do
	if ! command -v "$t" >/dev/null; then
		echo "### NVMe/TCP: skipped ($t is not installed; scripts/deps.sh)"
		exit 0
	fi
done
PEERS=
for p in "$BENCH_ROOT/../shared/peers" "$BENCH_ROOT/../../shared/peers"; do
	[ -d "$p/libnvmf" ] && PEERS=$p && break
done
if [ -z "$PEERS" ]; then
	echo "### NVMe/TCP: skipped (no libnvmf in ../shared/peers)"
	exit 0
fi
bench_dir

IMG_GIB=${NVMF_IMG_GIB:-$(pick 1 2)}
WANT=${NVMF_WORKLOADS:-$(pick "rand-read-4k rand-write-4k" "rand-read-4k rand-write-4k rand-read-1m rand-write-1m")}
NQN=nqn.2026-12.org.blkstack:bench

# libnvmf, patched (its bug, see docs/nvmf.md), once per build tree
PATCH=$BENCH_ROOT/tests/integration/peers/libnvmf-c2h-partial.patch
LIBNVMF=$BUILD/peers/libnvmf
if [ ! -x "$LIBNVMF/examples/nvmf-fio" ] || ! cmp -s "$PATCH" "$LIBNVMF/.blkstack-patch"; then
	rm -rf "$LIBNVMF"
	mkdir -p "$BUILD/peers"
	cp -r "$PEERS/libnvmf" "$BUILD/peers/"
	patch -s -d "$LIBNVMF" -p1 <"$PATCH" && cp "$PATCH" "$LIBNVMF/.blkstack-patch"
	make -C "$LIBNVMF/lib" >/dev/null 2>&1
	make -C "$LIBNVMF/examples" fio >/dev/null 2>&1
fi
NVMF_FIO=$LIBNVMF/examples/nvmf-fio

start_blkstackd_nvmf() {	# IMG PORT
	mkdir -p "$BENCH_DIR/state"
	cat >"$BENCH_DIR/bdn.$2.ini" <<CONF
[daemon]
state_dir = $BENCH_DIR/state
threads = 2
[device vol0]
type = file
path = $1
[export vol0]
type = nvmf
device = vol0
listen = 127.0.0.1:$2
nqn = $NQN
CONF
	start_server blkstackd "$2" "$BLKSTACKD" -f -c "$BENCH_DIR/bdn.$2.ini"
}

IMG=$BENCH_DIR/img
truncate -s "${IMG_GIB}G" "$IMG"
# written once, so reads read data
dd if=/dev/urandom of="$IMG" bs=1M count=$((IMG_GIB * 1024)) conv=notrunc status=none

args_of() {	# WORKLOAD -> "NVMF_FIO_ARGS|FIO_ARGS"
	case $1 in
	rand-read-4k) echo "--randread --bs=4096|--rw=randread --bs=4k" ;;
	rand-write-4k) echo "--randwrite --bs=4096|--rw=randwrite --bs=4k" ;;
	rand-read-1m) echo "--randread --bs=1048576|--rw=randread --bs=1m" ;;
	rand-write-1m) echo "--randwrite --bs=1048576|--rw=randwrite --bs=1m" ;;
	esac
}

echo "### NVMe/TCP: nvmf-fio on blkstackd's nvmf target vs fio nbd engine"
echo
echo "One queue (nvmf) / one connection (NBD), depth 32, ${JOB_SECONDS} s per row, ${IMG_GIB} GiB file image; blkstackd threads = 2."
echo
echo "| workload | blkstackd nvmf IOPS | blkstackd NBD IOPS | nbdkit NBD IOPS | nvmf / best NBD |"
echo "|---|---|---|---|---|"
for w in $WANT; do
	a=$(args_of "$w")
	na=${a%%|*} fa=${a#*|}
	sync; sleep 1
	port=$(free_port)
	nv=FAILED
	if start_blkstackd_nvmf "$IMG" "$port"; then
		# shellcheck disable=SC2086
		if bounded "$NVMF_FIO" --filename="nvmf-tcp://127.0.0.1:$port/$NQN/1" \
			$na --iodepth=32 --ioqueues=1 --runtime="$JOB_SECONDS" \
			>"$BENCH_DIR/nvmf.$w.out" 2>&1; then
			# one line a second: the mean of the seconds
			nv=$(grep -o 'IOPS [0-9]*' "$BENCH_DIR/nvmf.$w.out" |
				awk '{s += $2; n++} END {if (n) printf "%.0f", s / n}')
			[ -n "$nv" ] || nv=FAILED
		fi
	fi
	stop_server >/dev/null
	declare -A nb=()
	for s in blkstackd nbdkit; do
		sync; sleep 1
		port=$(free_port)
		nb[$s]=FAILED
		if { [ $s = blkstackd ] && BD_THREADS=2 start_blkstackd "$IMG" "$port"; } ||
			{ [ $s = nbdkit ] && start_nbdkit "$IMG" "$port"; }; then
			# shellcheck disable=SC2086
			if fio_nbd "$port" "$BENCH_DIR/nbd.$w.$s.json" $fa --iodepth=32; then
				nb[$s]=$(fio_summary "$BENCH_DIR/nbd.$w.$s.json" | awk '{print $1}')
			fi
		fi
		stop_server >/dev/null
	done
	best=$(printf '%s\n' "${nb[blkstackd]}" "${nb[nbdkit]}" | grep -E '^[0-9]+$' | sort -n | tail -1)
	echo "| $w | $nv | ${nb[blkstackd]} | ${nb[nbdkit]} | $(ratio "$nv" "${best:-}") |"
	unset nb
done
