#!/usr/bin/env bash
# NVMe/TCP (issue 14): two tables from one run, the same file served by
# blkstackd's nvmf target and over NBD.
#
# I/O rows: for 4 KiB random read and write and 1 MiB sequential read and
# write, the same workload three ways: libnvmf's nvmf-fio (vendored in
# ../shared/peers, built into $BUILD/peers with
# tests/integration/peers/libnvmf.patch, which adds its sequential mode,
# a ramp and a summary line) on blkstackd's nvmf target (`threads = 2`);
# fio's nbd engine on blkstackd's NBD export (`threads = 2`); fio's nbd
# engine on nbdkit serving the same file. One queue / connection at
# depth 32, a 1 s ramp, then JOB_SECONDS. Each row: IOPS, MiB/s, p50 and
# p99 latency (submission to completion: fio's lat_percentiles, the
# patched nvmf-fio's histogram), the server's CPU seconds (time -v, a
# server start per row, as bench/lib.sh's run_row) per GiB moved and
# its peak RSS.
#
# Zeroing: NVMF_ZERO_GIB of a file full of data, served by blkstackd's
# nvmf target, made zero by Write Zeroes with DEAC, by Write Zeroes
# without DEAC, and by writing zero buffers; hosts: blkstack's own nvmf
# driver (`blkstack zeroout nvmf:URL`), a second blkstackd with an nvmf
# device exported over NBD (fio, qemu-io), and pynvmeof (a peer,
# bench/nvmf_wz.py). Seconds, GiB/s and the blocks allocated after.
#
# Knobs: NVMF_TABLES ("io zero"; "iops" is the old name of "io"),
# NVMF_IMG_GIB, NVMF_WORKLOADS, NVMF_ZERO_GIB, JOB_SECONDS, BENCH_QUICK.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

TABLES=${NVMF_TABLES:-io zero}
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
${BD_EVENT_LOOP:+event_loop = $BD_EVENT_LOOP}
[device vol0]
type = file
path = $1
[export vol0]
type = nvmf
device = vol0
listen = 127.0.0.1:$2
nqn = $NQN
${BD_SEND_BUFFER:+send_buffer = $BD_SEND_BUFFER}
CONF
	start_server blkstackd "$2" "$BLKSTACKD" -f -c "$BENCH_DIR/bdn.$2.ini"
}

# ---- I/O rows: nvmf-fio on the target vs fio's nbd engine ------------------

# libnvmf with the project's patch (its read bug, and nvmf-fio's
# sequential mode and summary line), once per build tree and patch: the
# same copy tests/integration/lib/nvmf_peers.bash builds. Sets NVMF_FIO.
nvmf_fio_build() {
	local patch=$BENCH_ROOT/tests/integration/peers/libnvmf.patch
	local lib=$BUILD/peers/libnvmf
	NVMF_FIO=$lib/examples/nvmf-fio
	[ -x "$NVMF_FIO" ] && cmp -s "$patch" "$lib/.blkstack-patch" && return 0
	rm -rf "$lib"
	mkdir -p "$BUILD/peers"
	cp -r "$PEERS/libnvmf" "$BUILD/peers/" &&
		patch -s -d "$lib" -p1 <"$patch" &&
		cp "$patch" "$lib/.blkstack-patch" &&
		make -C "$lib/lib" >/dev/null 2>&1 &&
		make -C "$lib/examples" fio >/dev/null 2>&1
}

# One nvmf-fio run against a fresh blkstackd nvmf target on IMG. Fills
# NV_IOPS NV_MIBS NV_P50 NV_P99 NV_CPG NV_RSS (FAILED / - on failure:
# an error, a failed command, or no summary line).
nvmf_fio_row() {	# IMG OUT NVMF_FIO_ARGS...
	local img=$1 out=$2 port line="" cpu rss
	shift 2
	NV_IOPS=FAILED NV_MIBS=- NV_P50=- NV_P99=- NV_CPG=- NV_RSS=-
	sync
	sleep 1
	port=$(free_port)
	if start_blkstackd_nvmf "$img" "$port" &&
		bounded "$NVMF_FIO" --filename="nvmf-tcp://127.0.0.1:$port/$NQN/1" "$@" \
			--iodepth=32 --ioqueues=1 --ramp_time=1 \
			--runtime="$JOB_SECONDS" >"$out" 2>&1; then
		line=$(grep -E '^summary: ios=[1-9][0-9]* .* errors=0$' "$out" || true)
	fi
	read -r cpu rss <<<"$(stop_server)"
	if [ -z "$line" ]; then
		tail -3 "$out" >&2 || true
		return 0
	fi
	kv() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$line"; }
	NV_IOPS=$(kv iops) NV_MIBS=$(kv mibs) NV_RSS=$rss
	# whole µs, as fio_summary prints fio's
	NV_P50=$(awk -v v="$(kv p50_us)" 'BEGIN { printf "%.0f", v }')
	NV_P99=$(awk -v v="$(kv p99_us)" 'BEGIN { printf "%.0f", v }')
	NV_CPG=$(awk -v c="$cpu" -v b="$(kv bytes)" \
		'BEGIN { if (b > 0) printf "%.2f", c / (b / 1073741824); else print "-" }')
}

io_args_of() {	# WORKLOAD -> "NVMF_FIO_ARGS|FIO_ARGS"
	case $1 in
	rand-read-4k) echo "--randread --bs=4096|--rw=randread --bs=4k" ;;
	rand-write-4k) echo "--randwrite --bs=4096|--rw=randwrite --bs=4k" ;;
	seq-read-1m) echo "--seqread --bs=1048576|--rw=read --bs=1m" ;;
	seq-write-1m) echo "--seqwrite --bs=1048576|--rw=write --bs=1m" ;;
	rand-read-1m) echo "--randread --bs=1048576|--rw=randread --bs=1m" ;;
	rand-write-1m) echo "--randwrite --bs=1048576|--rw=randwrite --bs=1m" ;;
	*) return 1 ;;
	esac
}

io_table() {
	local IMG_GIB WANT IMG w a na fa s row=0 best cpu_best
	local -a SERVERS=(blkstackd-t2 nbdkit)
	if [ -z "$PEERS" ]; then
		echo "### NVMe/TCP: I/O rows skipped (no libnvmf in ../shared/peers)"
		return 0
	fi
	if ! nvmf_fio_build; then
		echo "### NVMe/TCP: I/O rows skipped (libnvmf did not build with its patch)"
		return 0
	fi
	IMG_GIB=${NVMF_IMG_GIB:-$(pick 1 2)}
	WANT=${NVMF_WORKLOADS:-rand-read-4k rand-write-4k seq-read-1m seq-write-1m}

	IMG=$BENCH_DIR/img
	truncate -s "${IMG_GIB}G" "$IMG"
	# written once, so reads read data
	dd if=/dev/urandom of="$IMG" bs=1M count=$((IMG_GIB * 1024)) conv=notrunc status=none

	echo "### NVMe/TCP: nvmf-fio on blkstackd's nvmf target vs fio's nbd engine"
	echo
	echo "One queue (nvmf) / one connection (NBD), depth 32, 1 s ramp then ${JOB_SECONDS} s per row, ${IMG_GIB} GiB file image; blkstackd threads = 2 (nvmf and NBD); a server start per row. Latency from submission to completion. CPU: the server's user + system seconds (start to exit) per GiB moved."
	echo
	echo "| workload | server (client) | IOPS | MiB/s | p50 µs | p99 µs | CPU s/GiB | peak RSS MiB | IOPS vs best NBD | CPU vs best NBD |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
	for w in $WANT; do
		if ! a=$(io_args_of "$w"); then
			echo "bench/nvmf.sh: unknown workload $w" >&2
			continue
		fi
		na=${a%%|*} fa=${a#*|}
		# shellcheck disable=SC2086
		nvmf_fio_row "$IMG" "$BENCH_DIR/nvmf.$w.out" $na
		# shellcheck disable=SC2086
		run_row "$row" "$IMG" $fa --iodepth=32
		row=$((row + 1))
		# the best NBD row: the higher IOPS, the lower CPU per GiB
		best=$(printf '%s\n' "${R_IOPS[blkstackd-t2]}" "${R_IOPS[nbdkit]}" |
			grep -E '^[0-9.]+$' | sort -g | tail -1) || true
		cpu_best=$(printf '%s\n' "${R_CPG[blkstackd-t2]}" "${R_CPG[nbdkit]}" |
			grep -E '^[0-9.]+$' | sort -g | head -1) || true
		echo "| $w | blkstackd nvmf (nvmf-fio) | $NV_IOPS | $NV_MIBS | $NV_P50 | $NV_P99 | $NV_CPG | $(mib "$NV_RSS") | $(ratio "$NV_IOPS" "${best:-}") | $(ratio "$NV_CPG" "${cpu_best:-}") |"
		for s in "${SERVERS[@]}"; do
			echo "| $w | $([ "$s" = nbdkit ] && echo "nbdkit NBD" || echo "blkstackd NBD") (fio nbd) | ${R_IOPS[$s]} | ${R_MIBS[$s]} | ${R_P50[$s]} | ${R_P99[$s]} | ${R_CPG[$s]} | $(mib "${R_RSS[$s]}") | | |"
		done
	done
	rm -f "$IMG"
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
${BD_EVENT_LOOP:+event_loop = $BD_EVENT_LOOP}
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

# Both tables of one run share this context (the machine is shared:
# the load average says how quiet it was).
echo "NVMe/TCP run $(date -u '+%Y-%m-%d %H:%M UTC'), blkstack $(git -C "$BENCH_ROOT" rev-parse --short HEAD 2>/dev/null), load average at start $(cut -d' ' -f1-3 /proc/loadavg)$([ "$BENCH_QUICK" = 1 ] && echo "; BENCH_QUICK: a trial, not results")."
echo
for tb in $TABLES; do
	case $tb in
	io | iops) io_table ;;
	zero) zero_table ;;
	*) echo "bench/nvmf.sh: unknown table $tb" >&2; exit 1 ;;
	esac
	echo
done
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
