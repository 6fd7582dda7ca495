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
# Into the page cache before the first row: written with O_DIRECT, the
# image has no cached pages, and whoever runs first would pay for
# allocating and first-touching every page-cache page of it (on this VM
# 77 % of that server's CPU went into that copy); every later server
# finds them cached. DATA_WARM=0 turns it off.
[ "${DATA_WARM:-1}" = 1 ] && cat "$img" >/dev/null

echo "### Data path over NBD (fio nbd engine, ${JOB_SECONDS} s per row, ${IMG_GIB} GiB image)"
echo
echo "| workload | conns | server | IOPS | MiB/s | p99 µs | CPU s/GiB | peak RSS MiB | x best peer | CPU vs best peer | RSS vs nbdkit |"
echo "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
row=0
declare -A SCALE=()	# "workload|server|conns" -> IOPS, for the scaling table
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
			SCALE[$name|$s|$jobs]=${R_IOPS[$s]}
			echo "| $name | $jobs | $(server_label "$s") | ${R_IOPS[$s]} | ${R_MIBS[$s]} | ${R_P99[$s]} | ${R_CPG[$s]} | $(mib "${R_RSS[$s]}") |$(ratio_cells "$s" "$name, $jobs conn")"
		done
	done
done
echo
echo "Ratios are blkstackd's: IOPS against the best of nbdkit and qemu-nbd,"
echo "CPU s/GiB against the lower of theirs, peak RSS against nbdkit's."
echo "Targets: >= 1.0x the best peer (aiming at 1.2x), CPU <= 1.0x, RSS <= 1.5x."
echo

# The same IOPS, one line per server: how each scales with connections,
# and what the second I/O thread gives blkstackd (t2 / t1).
hdr="| workload | server |" sep="|---|---|"
for jobs in $CONNS; do
	if [ "$jobs" = 1 ]; then hdr+=" 1 conn |"; else hdr+=" $jobs conns |"; fi
	sep+="---:|"
done
echo "#### Scaling over connections and threads (IOPS)"
echo
echo "$hdr"
echo "$sep"
for w in "${ALL_WORKLOADS[@]}"; do
	read -r name _ <<<"$w"
	case " $WANT " in *" $name "*) ;; *) continue ;; esac
	for s in "${SERVERS[@]}"; do
		line="| $name | $(server_label "$s") |"
		for jobs in $CONNS; do
			line+=" ${SCALE[$name|$s|$jobs]:--} |"
		done
		echo "$line"
	done
	if [ -n "${SCALE[$name|blkstackd-t1|${CONNS%% *}]:-}" ] &&
		[ -n "${SCALE[$name|blkstackd-t2|${CONNS%% *}]:-}" ]; then
		line="| $name | blkstackd t2 / t1 |"
		for jobs in $CONNS; do
			r=$(ratio "${SCALE[$name|blkstackd-t2|$jobs]}" "${SCALE[$name|blkstackd-t1|$jobs]}")
			[ "$r" = - ] || r+=x
			line+=" $r |"
		done
		echo "$line"
	fi
done
own_targets_summary
