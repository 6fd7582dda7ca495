#!/usr/bin/env bash
# Data path: fio's nbd engine against blkstackd, nbdkit (file plugin) and
# qemu-nbd, serving the same file on the same filesystem. One server start
# per row so that its CPU time and peak RSS belong to that row alone.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_dir

IMG_GIB=${DATA_IMG_GIB:-4}
img=$BENCH_DIR/data.img
dd if=/dev/zero bs=4M count=$((IMG_GIB * 256)) status=none | tr '\0' 'd' |
	dd of="$img" bs=4M iflag=fullblock oflag=direct status=none
sync "$img"
# Into the page cache before the first row: written with O_DIRECT, the
# image has no cached pages, and whoever runs first (blkstackd in the
# first row) would pay for allocating and first-touching every page-cache
# page of it (on this VM 77 % of that server's CPU went into that copy,
# 2-3 s of CPU per GiB); every later server finds them cached.
[ "${DATA_WARM:-1}" = 1 ] && cat "$img" >/dev/null

# name rw bs iodepth
WORKLOADS=(
	"seq-write write 1M 16"
	"seq-read read 1M 16"
	"rand-read randread 4k 32"
	"rand-write randwrite 4k 32"
)
SERVERS=(blkstackd nbdkit qemu-nbd)
# Subsets for profiling runs (all by default): DATA_ROWS a regex of
# workload names, DATA_CONNS the connection counts, DATA_SERVERS the
# servers (blkstackd always runs: the ratio is its).
ROWS_RE=${DATA_ROWS:-.}
read -r -a CONNS <<<"${DATA_CONNS:-1 4}"
if [ -n "${DATA_SERVERS:-}" ]; then
	read -r -a SERVERS <<<"blkstackd ${DATA_SERVERS//blkstackd/}"
fi

run_fio() {	# PORT RW BS QD JOBS OUT
	local per=$((IMG_GIB * 1024 / $5))
	fio --output-format=json --output="$6" --name=bench --ioengine=nbd \
		--uri="nbd://127.0.0.1:$1/vol0" --rw="$2" --bs="$3" --iodepth="$4" \
		--numjobs="$5" --size="${per}M" --offset_increment="${per}M" \
		--time_based --runtime="$JOB_SECONDS" --ramp_time=1 \
		--group_reporting >/dev/null 2>"$6.err"
}

# Prints: iops mibs p99_us gib_moved
fio_summary() {
	python3 - "$1" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
iops = bw = moved = 0.0
p99 = 0.0
for d in ("read", "write"):
    x = j[d]
    if x["io_bytes"] == 0:
        continue
    iops += x["iops"]; bw += x["bw_bytes"]; moved += x["io_bytes"]
    pct = x.get("clat_ns", {}).get("percentile", {})
    p99 = max(p99, pct.get("99.000000", 0) / 1000.0)
print(f"{iops:.0f} {bw / 2**20:.1f} {p99:.0f} {moved / 2**30:.3f}")
PY
}

echo "### Data path over NBD (fio nbd engine, ${JOB_SECONDS} s per row)"
echo
echo "| workload | conns | server | IOPS | MiB/s | p99 µs | CPU s/GiB | peak RSS MiB | blkstackd / best peer |"
echo "|---|---:|---|---:|---:|---:|---:|---:|---:|"
row=0
for w in "${WORKLOADS[@]}"; do
	read -r name rw bs qd <<<"$w"
	[[ $name =~ $ROWS_RE ]] || continue
	for jobs in "${CONNS[@]}"; do
		declare -A IOPS=() LINE=()
		# a different server goes first each row, and dirty data of the
		# previous run is written back before the next starts: the
		# host's writeback must not favour whoever runs first
		order=()
		for ((k = 0; k < ${#SERVERS[@]}; k++)); do
			order+=("${SERVERS[$(((k + row) % ${#SERVERS[@]}))]}")
		done
		row=$((row + 1))
		for s in "${order[@]}"; do
			sync
			sleep 1
			port=$(free_port)
			case $s in
			blkstackd) start_blkstackd "$img" "$port" ;;
			nbdkit) start_nbdkit "$img" "$port" ;;
			qemu-nbd) start_qemu_nbd "$img" "$port" ;;
			esac
			out=$BENCH_DIR/$name.$jobs.$s.json
			if run_fio "$port" "$rw" "$bs" "$qd" "$jobs" "$out"; then
				read -r iops mibs p99 moved <<<"$(fio_summary "$out")"
			else
				iops=FAILED mibs=- p99=- moved=0
			fi
			read -r cpu rss <<<"$(stop_server)"
			cpg=$(awk -v c="$cpu" -v g="$moved" 'BEGIN { if (g > 0) printf "%.2f", c / g; else print "-" }')
			IOPS[$s]=$iops
			LINE[$s]="| $name | $jobs | $s | $iops | $mibs | $p99 | $cpg | $((rss / 1024)) |"
		done
		best=$(for s in "${SERVERS[@]}"; do [ "$s" = blkstackd ] || echo "${IOPS[$s]}"; done | grep -v FAILED | sort -n | tail -1)
		for s in "${SERVERS[@]}"; do
			if [ "$s" = blkstackd ]; then
				echo "${LINE[$s]} $(ratio "${IOPS[$s]}" "$best") |"
			else
				echo "${LINE[$s]} |"
			fi
		done
	done
done
echo
echo "Target: blkstackd >= 1.0x the best peer in every row (aiming at 1.2x),"
echo "and CPU per GiB no worse than the best peer."
