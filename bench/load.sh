#!/usr/bin/env bash
# Table 2 of the cover letter over NBD: does a concurrent 10 GiB unmap
# zeroout on another range of the same device disturb foreground I/O?
#   bandwidth: fio sequential overwrite, 2 MiB, 4 jobs (the device O_DIRECT)
#   latency:   fio 4 KiB sync writes (qd 1)
# each with and without `blkstack -s SOCK zeroout` of a disjoint 10 GiB range.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_dir

ZERO_GIB=${LOAD_ZERO_GIB:-10}
FG_GIB=4
img=$BENCH_DIR/load.img
truncate -s $((FG_GIB + ZERO_GIB))G "$img"
dd if=/dev/zero bs=4M count=$((FG_GIB * 256)) status=none | tr '\0' 'f' |
	dd of="$img" bs=4M iflag=fullblock oflag=direct conv=notrunc status=none
port=$(free_port)
start_blkstackd "$img" "$port" "direct = 1"
sock=$BENCH_DIR/state/blkstackd.sock

fg_job() {	# NAME -> "MiB/s avg_us p99_us"
	local out=$BENCH_DIR/$1.json
	case $1 in
	bw) fio --output-format=json --output="$out" --name=bw --ioengine=nbd \
		--uri="nbd://127.0.0.1:$port/vol0" --rw=write --bs=2M --iodepth=10 \
		--numjobs=4 --size=1G --offset_increment=1G --time_based \
		--runtime="$JOB_SECONDS" --group_reporting >/dev/null ;;
	lat) fio --output-format=json --output="$out" --name=lat --ioengine=nbd \
		--uri="nbd://127.0.0.1:$port/vol0" --rw=write --bs=4k --iodepth=1 \
		--numjobs=1 --size=${FG_GIB}G --time_based --runtime="$JOB_SECONDS" \
		--fdatasync=1 >/dev/null ;;
	esac
	python3 - "$out" <<'PY'
import json, sys
w = json.load(open(sys.argv[1]))["jobs"][0]["write"]
c = w["clat_ns"]
print(f'{w["bw_bytes"] / 2**20:.1f} {c["mean"] / 1000:.1f} {c["percentile"]["99.000000"] / 1000:.1f}')
PY
}

# Keeps unmap zeroouts of the second range going until the foreground
# job ends (bounded by the job's run time and a count).
background_zero() {
	local i
	for ((i = 0; i < 1000; i++)); do
		# --force: vol0 is served; the range is one fio never touches
		"$BLKSTACK" -s "$sock" zeroout --force -o ${FG_GIB}G -l ${ZERO_GIB}G vol0 >/dev/null 2>&1 || true
		"$BLKSTACK" -s "$sock" attr vol0 size >/dev/null 2>&1 || break
	done
}

echo "### Zeroing under load (blkstackd over NBD, ${JOB_SECONDS} s per job)"
echo
echo "| job | background | MiB/s | avg µs | p99 µs |"
echo "|---|---|---:|---:|---:|"
for job in bw lat; do
	read -r b0 a0 p0 <<<"$(fg_job $job)"
	echo "| $job | none | $b0 | $a0 | $p0 |"
	background_zero &
	bg=$!
	BENCH_PIDS+=("$bg")
	read -r b1 a1 p1 <<<"$(fg_job $job)"
	kill "$bg" 2>/dev/null || true
	wait "$bg" 2>/dev/null || true
	echo "| $job | 10 GiB unmap zeroout loop | $b1 | $a1 | $p1 |"
	if [ $job = bw ]; then
		BW_COST=$(awk -v a="$b0" -v b="$b1" 'BEGIN { printf "%.1f", (a - b) * 100 / a }')
	else
		LAT_COST=$(awk -v a="$p0" -v b="$p1" 'BEGIN { printf "%.1f", (b - a) * 100 / a }')
	fi
done
stop_server >/dev/null
echo
echo "Cost of concurrent unmap zeroing: ${BW_COST}% of overwrite bandwidth"
echo "(target < 2%), ${LAT_COST}% of p99 sync-write latency (target < 10%)."
