#!/usr/bin/env bash
# Data path: fio's nbd engine against blkstackd, nbdkit (file plugin) and
# qemu-nbd, serving the same file on the same filesystem, over 1, 4 and 16
# connections. blkstackd runs with `threads = 1` and `threads = 2` side by
# side (bench_servers in lib.sh).
#
# Knobs: DATA_IMG_GIB (image size), DATA_WORKLOADS (names below),
# DATA_CONNS (connection counts), BENCH_SERVERS, JOB_SECONDS, BENCH_QUICK.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_dir

IMG_GIB=${DATA_IMG_GIB:-$(pick 1 4)}
CONNS=${DATA_CONNS:-$(pick "1 16" "1 4 16")}
# name rw bs iodepth (per connection)
ALL_WORKLOADS=(
	"seq-write write 1M 16"
	"seq-read read 1M 16"
	"rand-read randread 4k 32"
	"rand-write randwrite 4k 32"
)
WANT=${DATA_WORKLOADS:-$(pick "seq-write rand-read" "seq-write seq-read rand-read rand-write")}
read -ra SERVERS <<<"$(bench_servers)"

img=$BENCH_DIR/data.img
dd if=/dev/zero bs=4M count=$((IMG_GIB * 256)) status=none | tr '\0' 'd' |
	dd of="$img" bs=4M iflag=fullblock oflag=direct status=none
sync "$img"

echo "### Data path over NBD (fio nbd engine, ${JOB_SECONDS} s per row, ${IMG_GIB} GiB image)"
echo
echo "| workload | conns | server | IOPS | MiB/s | p99 µs | CPU s/GiB | peak RSS MiB | x best peer | CPU vs best peer | RSS vs nbdkit |"
echo "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
row=0
for w in "${ALL_WORKLOADS[@]}"; do
	read -r name rw bs qd <<<"$w"
	case " $WANT " in *" $name "*) ;; *) continue ;; esac
	for jobs in $CONNS; do
		# each connection its own slice of the image
		per=$((IMG_GIB * 1024 / jobs))
		run_row "$row" "$img" --rw="$rw" --bs="$bs" --iodepth="$qd" \
			--numjobs="$jobs" --size="${per}M" --offset_increment="${per}M"
		row=$((row + 1))
		for s in "${SERVERS[@]}"; do
			echo "| $name | $jobs | $(server_label "$s") | ${R_IOPS[$s]} | ${R_MIBS[$s]} | ${R_P99[$s]} | ${R_CPG[$s]} | $(mib "${R_RSS[$s]}") |$(ratio_cells "$s" "$name, $jobs conn")"
		done
	done
done
echo
echo "Ratios are blkstackd's: IOPS against the best of nbdkit and qemu-nbd,"
echo "CPU s/GiB against the lower of theirs, peak RSS against nbdkit's."
echo "Targets: >= 1.0x the best peer (aiming at 1.2x), CPU <= 1.0x, RSS <= 1.5x."
own_targets_summary
