#!/usr/bin/env bash
# NVMe/TCP, two tables.
#
# IOPS: blkstackd's nvmf target (`threads = 2`) driven by libnvmf's
# nvmf-fio (vendored in ../shared/peers, built into $BUILD/peers with the
# patch tests/integration/nvmf_clients.sh uses), beside fio's nbd engine
# against blkstackd's NBD export and nbdkit serving the same file: the
# same workloads, one queue/connection at depth 32. nvmf-fio prints IOPS
# only, so the nvmf rows have no latency columns. Rows are short: this is
# a comparison, not a soak.
#
# Zeroing (issue 14): NVMF_ZERO_GIB of a file full of data, served by
# blkstackd's nvmf target, made zero by Write Zeroes with DEAC, by Write
# Zeroes without DEAC, and by writing zero buffers; hosts: blkstack's own
# nvmf driver (`blkstack zeroout nvmf:URL`), a second blkstackd with an
# nvmf device exported over NBD (fio, qemu-io), and pynvmeof (a peer,
# bench/nvmf_wz.py). Seconds, GiB/s and the blocks allocated after.
#
# Knobs: NVMF_TABLES ("iops zero"), NVMF_IMG_GIB, NVMF_WORKLOADS,
# NVMF_ZERO_GIB, JOB_SECONDS, BENCH_QUICK.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

TABLES=${NVMF_TABLES:-iops zero}
for t in fio jq nbdkit make cc patch qemu-io; do
	if ! command -v "$t" >/dev/null; then
		echo "### NVMe/TCP: skipped ($t is not installed; scripts/deps.sh)"
		exit 0
	fi
done
PEERS=
for p in "$BENCH_ROOT/../shared/peers" "$BENCH_ROOT/../../shared/peers"; do
	[ -d "$p/libnvmf" ] && PEERS=$p && break
done
bench_dir

NQN=nqn.2026-12.org.blkstack:bench

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

# ---- IOPS: nvmf-fio on the target vs fio's nbd engine ----------------------

iops_table() {
	local IMG_GIB WANT PATCH LIBNVMF NVMF_FIO IMG w a na fa port nv s best
	if [ -z "$PEERS" ]; then
		echo "### NVMe/TCP: IOPS table skipped (no libnvmf in ../shared/peers)"
		return 0
	fi
	IMG_GIB=${NVMF_IMG_GIB:-$(pick 1 2)}
	WANT=${NVMF_WORKLOADS:-$(pick "rand-read-4k rand-write-4k" "rand-read-4k rand-write-4k rand-read-1m rand-write-1m")}

	# libnvmf, patched (its bug, see docs/nvmf.md), once per build tree
	PATCH=$BENCH_ROOT/tests/integration/peers/libnvmf.patch
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

	IMG=$BENCH_DIR/img
	truncate -s "${IMG_GIB}G" "$IMG"
	# written once, so reads read data
	dd if=/dev/urandom of="$IMG" bs=1M count=$((IMG_GIB * 1024)) conv=notrunc status=none

	echo "### NVMe/TCP: nvmf-fio on blkstackd's nvmf target vs fio nbd engine"
	echo
	echo "One queue (nvmf) / one connection (NBD), depth 32, ${JOB_SECONDS} s per row, ${IMG_GIB} GiB file image; blkstackd threads = 2."
	echo
	echo "| workload | blkstackd nvmf IOPS | blkstackd NBD IOPS | nbdkit NBD IOPS | nvmf / best NBD |"
	echo "|---|---|---|---|---|"
	for w in $WANT; do
		a=$(iops_args_of "$w")
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
	rm -f "$IMG"
}

iops_args_of() {	# WORKLOAD -> "NVMF_FIO_ARGS|FIO_ARGS"
	case $1 in
	rand-read-4k) echo "--randread --bs=4096|--rw=randread --bs=4k" ;;
	rand-write-4k) echo "--randwrite --bs=4096|--rw=randwrite --bs=4k" ;;
	rand-read-1m) echo "--randread --bs=1048576|--rw=randread --bs=1m" ;;
	rand-write-1m) echo "--randwrite --bs=1048576|--rw=randwrite --bs=1m" ;;
	esac
}

# ---- Zeroing: Write Zeroes with DEAC vs without vs writing zeroes ----------

# A second blkstackd: an nvmf device on URL (blkstack's host driver),
# exported over NBD on 127.0.0.1:PORT.
start_blkstackd_nvmf_host() {	# URL PORT
	mkdir -p "$BENCH_DIR/state-host"
	cat >"$BENCH_DIR/bdh.$2.ini" <<CONF
[daemon]
state_dir = $BENCH_DIR/state-host
threads = 2
[device vol0]
type = nvmf
url = $1
[export vol0]
type = nbd
device = vol0
listen = 127.0.0.1:$2
CONF
	start_server blkstackd-host "$2" "$BLKSTACKD" -f -c "$BENCH_DIR/bdh.$2.ini"
}

# GIB of non-zero data, written and synced (not timed): zeroing must
# change something (bench/zeroing.sh's "data" case)
zero_prefill() {	# FILE GIB
	rm -f "$1"
	dd if=/dev/zero bs=2M count=$(($2 * 512)) status=none | tr '\0' 'x' |
		dd of="$1" bs=2M iflag=fullblock oflag=direct status=none
	sync "$1"
}

# Every row ends when the target's file is durable: the client, then an
# fsync of the image (the same for every row; the rows that write zero
# buffers leave dirty pages at the target otherwise).
zero_durable() {	# IMG CMD...
	local img=$1
	shift
	"$@" && sync "$img"
}

qemu_io_zero_unmap() {	# URI GIB
	local args=() i
	for ((i = 0; i < $2; i++)); do
		args+=(-c "write -z -u ${i}G 1G")
	done
	bounded qemu-io -f raw "${args[@]}" "$1"
}

zero_table() {
	local G bytes img pyn rows r n label cmd port hport url t alloc z a_pid a_time
	local base_t="" gibs
	G=${NVMF_ZERO_GIB:-$(pick 1 10)}
	bytes=$((G << 30))
	img=$BENCH_DIR/z.img
	# the baseline (writing zeroes) first: the other rows are ratios to it
	rows="nbd-write cli-deac cli-nounmap nbd-deac"
	pyn=
	if [ -n "$PEERS" ] && [ -d "$PEERS/pynvmeof/src" ] && command -v python3 >/dev/null; then
		# a copy in the build tree: Python may write its caches there
		pyn=$BUILD/peers/pynvmeof
		if ! diff -rq "$PEERS/pynvmeof/src" "$pyn/src" >/dev/null 2>&1; then
			rm -rf "$pyn"
			mkdir -p "$BUILD/peers"
			cp -r "$PEERS/pynvmeof" "$BUILD/peers/"
		fi
		rows="$rows py-deac"
	fi

	echo "### NVMe/TCP: ${G} GiB of Write Zeroes with DEAC vs without vs writing zeroes"
	echo
	echo "blkstackd's nvmf target (threads = 2) serves a ${G} GiB file full of data (written and synced before each row, not timed). Each row ends with an fsync of that file. Allocation is \`du\` of the file after the row."
	echo
	echo "| # | host → target | on the wire | seconds | GiB/s | speed-up vs writing zeroes | allocated after | allocated / size | reads back zero |"
	echo "|---|---|---|---:|---:|---:|---:|---:|:---:|"
	n=0
	for r in $rows; do
		n=$((n + 1))
		zero_prefill "$img" "$G"
		sync; sleep 1
		port=$(free_port)
		url="nvme+tcp://127.0.0.1:$port/$NQN/1"
		t=FAILED
		if ! start_blkstackd_nvmf "$img" "$port"; then
			stop_server >/dev/null
			echo "| $n | $r | | FAILED | | | | | |"
			continue
		fi
		a_pid=$SERVER_PID a_time=$SERVER_TIME
		case $r in
		cli-deac)
			label="blkstack zeroout (blkstack's nvmf host driver)"
			cmd="Write Zeroes, DEAC"
			t=$(time_cmd zero_durable "$img" bounded "$BLKSTACK" zeroout -l "${G}G" "nvmf:$url") || true
			;;
		cli-nounmap)
			label="blkstack zeroout --no-unmap (blkstack's nvmf host driver)"
			cmd="Write Zeroes, no DEAC"
			t=$(time_cmd zero_durable "$img" bounded "$BLKSTACK" zeroout --no-unmap -l "${G}G" "nvmf:$url") || true
			;;
		nbd-write)
			label="fio 1 MiB writes of zero buffers, depth 32 → NBD → blkstackd nvmf device"
			cmd="Write (1 MiB of zeroes each)"
			hport=$(free_port)
			if start_blkstackd_nvmf_host "$url" "$hport"; then
				t=$(time_cmd zero_durable "$img" timeout -k 5 "$CLIENT_TIMEOUT" \
					fio --name=zero --ioengine=nbd --uri="nbd://127.0.0.1:$hport/vol0" \
					--rw=write --bs=1m --iodepth=32 --zero_buffers --size="${G}g" \
					--end_fsync=1) || true
			fi
			stop_server >/dev/null
			;;
		nbd-deac)
			label="qemu-io write -z -u, 1 GiB each → NBD → blkstackd nvmf device"
			cmd="Write Zeroes, DEAC"
			hport=$(free_port)
			if start_blkstackd_nvmf_host "$url" "$hport"; then
				t=$(time_cmd zero_durable "$img" qemu_io_zero_unmap "nbd://127.0.0.1:$hport/vol0" "$G") || true
			fi
			stop_server >/dev/null
			;;
		py-deac)
			label="pynvmeof (peer), 8 in flight, one I/O queue"
			cmd="Write Zeroes, DEAC"
			t=$(time_cmd zero_durable "$img" timeout -k 5 "$CLIENT_TIMEOUT" \
				env PYTHONDONTWRITEBYTECODE=1 PYNVMEOF="$pyn" \
				python3 "$BENCH_ROOT/bench/nvmf_wz.py" "$port" "$NQN" "$bytes" deac 8) || true
			;;
		esac
		SERVER_PID=$a_pid SERVER_TIME=$a_time
		stop_server >/dev/null
		alloc=$(du -B1 "$img" | cut -f1)
		z=$(is_zero_file "$img" 0 "$bytes")
		[ "$r" = nbd-write ] && [ "$t" != FAILED ] && base_t=$t
		gibs=$(awk -v g="$G" -v t="$t" 'BEGIN { if (t == "FAILED" || t <= 0) print "-"; else printf "%.2f", g / t }')
		echo "| $n | $label | $cmd | $t | $gibs | $(ratio "$base_t" "$t") | $(awk -v b="$alloc" 'BEGIN {printf "%.2f GiB", b / 1073741824}') | $(ratio "$alloc" "$bytes") | $z |"
	done
	echo
	echo "How the target's file device zeroes: \`$("$BLKSTACK" explain "file:$img" 2>/dev/null | head -1 || echo "-")\`"
	rm -f "$img"
}

for tb in $TABLES; do
	case $tb in
	iops) iops_table ;;
	zero) zero_table ;;
	*) echo "bench/nvmf.sh: unknown table $tb" >&2; exit 1 ;;
	esac
	echo
done
