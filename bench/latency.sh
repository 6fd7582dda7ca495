#!/usr/bin/env bash
# Latency: 4 KiB random reads and writes at queue depth 1 over one
# connection (fio nbd engine), p50 and p99 of the total latency, against
# nbdkit and qemu-nbd on the same file. Each request waits for the one
# before, so this is the per-request cost of the server, not its
# parallelism.
#
# Knobs: LAT_IMG_GIB (image size), BENCH_SERVERS, JOB_SECONDS, BENCH_QUICK.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_dir

IMG_GIB=${LAT_IMG_GIB:-$(pick 1 2)}
read -ra SERVERS <<<"$(bench_servers)"

img=$BENCH_DIR/lat.img
dd if=/dev/zero bs=4M count=$((IMG_GIB * 256)) status=none | tr '\0' 'l' |
	dd of="$img" bs=4M iflag=fullblock oflag=direct status=none
sync "$img"
# written with O_DIRECT, so not in the page cache: read it once, or the
# first server of every row pays for the disk and the later ones do not
# (the 2026-12-06 run's qd1-read rows went up in server order)
cat "$img" >/dev/null

echo "### Latency over NBD: 4 KiB, queue depth 1, 1 connection (${JOB_SECONDS} s per row)"
echo
echo "| workload | server | IOPS | p50 µs | p99 µs | CPU s/GiB | peak RSS MiB | x best peer | CPU vs best peer | RSS vs nbdkit |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
row=0
for w in "qd1-read randread" "qd1-write randwrite"; do
	read -r name rw <<<"$w"
	run_row "$row" "$img" --rw="$rw" --bs=4k --iodepth=1 --numjobs=1 \
		--size="${IMG_GIB}G"
	row=$((row + 1))
	for s in "${SERVERS[@]}"; do
		echo "| $name | $(server_label "$s") | ${R_IOPS[$s]} | ${R_P50[$s]} | ${R_P99[$s]} | ${R_CPG[$s]} | $(mib "${R_RSS[$s]}") |$(ratio_cells "$s" "$name, 1 conn")"
	done
done
echo
echo "At queue depth 1, IOPS is the inverse of the mean latency: 'x best peer'"
echo "above 1.0 means blkstackd answers each request sooner on average."
own_targets_summary
