#!/usr/bin/env bash
# Table 2 of the cover letter over NBD: does unmap zeroing of another range
# of the same device disturb foreground I/O?
#   bandwidth: fio sequential overwrite, 2 MiB, 4 jobs, queue depth 10
#   latency:   fio 4 KiB writes, queue depth 1 (as the seed: no fsync; the
#              device is opened O_DIRECT, so each write reaches the file;
#              fio's nbd engine fails --fdatasync with EINVAL)
# each four times: alone; while a second NBD client (bench/tools/nbdzero,
# one connection) zeroes a never-written (sparse) range again and again;
# while `blkstack -s SOCK zeroout` zeroes that range once a second (the
# admin's path); and while the CLI zeroes, in 256 MiB steps, a range that
# HOLDS DATA (written just before, so every step really frees blocks).
# The script itself starts no process while a row runs (no date, no
# sleep: bash's EPOCHREALTIME and a read timeout): on 2 cores the pacing
# loop's own process starts cost the foreground job more than the
# zeroing did. The foreground numbers are taken from fio's per-request log over
# the time the zeroing ran (the window), against the same job alone.
#
# Knobs: LOAD_FG_GIB, LOAD_DATA_GIB, LOAD_ZERO_GIB (sizes), LOAD_PACE_MS, JOB_SECONDS,
# BENCH_QUICK.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_dir

FG_GIB=${LOAD_FG_GIB:-$(pick 1 4)}	# what fio overwrites
DATA_GIB=${LOAD_DATA_GIB:-$(pick 1 4)}	# data that zeroing frees
ZERO_GIB=${LOAD_ZERO_GIB:-$(pick 2 10)}	# sparse range zeroed in a loop
STEP_MIB=256
PACE_MS=${LOAD_PACE_MS:-1000}	# paced: one sparse zeroout started this often
DATA_OFF=$FG_GIB
SPARSE_OFF=$((FG_GIB + DATA_GIB))
img=$BENCH_DIR/load.img
truncate -s $((FG_GIB + DATA_GIB + ZERO_GIB))G "$img"

fill() {	# OFFSET_GIB GIB CHAR: written, synced, not timed
	dd if=/dev/zero bs=4M count=$(($2 * 256)) status=none | tr '\0' "$3" |
		dd of="$img" bs=4M seek=$(($1 * 256)) iflag=fullblock oflag=direct \
			conv=notrunc status=none
	sync "$img"
}
fill 0 "$FG_GIB" f

NBDZERO=$BUILD/bench/nbdzero
"$BENCH_ROOT/bench/tools/build-nbdzero.sh" "$NBDZERO"

port=$(free_port)
start_blkstackd "$img" "$port" "direct = 1"
sock=$BENCH_DIR/state/blkstackd.sock

now_ms() { NOW=$((${EPOCHREALTIME/[.,]/} / 1000)); }	# sets NOW, no fork
mkfifo "$BENCH_DIR/tick"
exec {TICK}<>"$BENCH_DIR/tick"	# never written: reads on it time out
nap_ms() { # MS: sleep without starting a process
	local s
	printf -v s '%d.%03d' $(($1 / 1000)) $(($1 % 1000))
	read -r -t "$s" -u "$TICK" _ || true
}

fg_start() {	# JOB TAG: fio in the background, FG_PID; per-request log
	local args
	case $1 in
	bw) args=(--rw=write --bs=2M --iodepth=10 --numjobs=4
		--size=$((FG_GIB * 1024 / 4))M --offset_increment=$((FG_GIB * 1024 / 4))M) ;;
	lat) args=(--rw=write --bs=4k --iodepth=1 --numjobs=1
		--size="${FG_GIB}G") ;;
	esac
	timeout -k 5 $((JOB_SECONDS + CLIENT_TIMEOUT)) \
		fio --output-format=json --output="$BENCH_DIR/$2.json" --name="$2" \
		--ioengine=nbd --uri="nbd://127.0.0.1:$port/vol0" "${args[@]}" \
		--time_based --runtime="$JOB_SECONDS" \
		--write_lat_log="$BENCH_DIR/$2" --log_avg_msec=0 --log_unix_epoch=1 \
		>/dev/null 2>"$BENCH_DIR/$2.err" &
	FG_PID=$!
	BENCH_PIDS+=("$FG_PID")
}

# Background zeroing while fio runs; sets T0 T1 (ms) and ZEROED (GiB).
# sparse: nbdzero (one NBD connection) zeroes the whole sparse range again
# and again, as fast as the server answers, until fio ends; paced: one
# `blkstack -s SOCK zeroout` of that range every PACE_MS (the CLI through
# the control socket); data: the data range once, with the CLI, a step at
# a time. All stop when fio ends (and are bounded in count); a step under
# way is finished. Not in a subshell: it waits for fio, its child.
zero_while_fg() {	# none|sparse|paced|data
	local i n=0 steps=$((DATA_GIB * 1024 / STEP_MIB)) zpid out next
	nap_ms 1000	# fio connected and writing
	now_ms
	T0=$NOW
	case $1 in
	none)
		wait "$FG_PID" 2>/dev/null || true
		;;
	sparse)
		timeout -k 5 $((JOB_SECONDS + CLIENT_TIMEOUT)) \
			"$NBDZERO" -t $((JOB_SECONDS + 5)) "nbd://127.0.0.1:$port/vol0" \
			"${SPARSE_OFF}G" "${ZERO_GIB}G" >"$BENCH_DIR/nbdzero.out" \
			2>"$BENCH_DIR/nbdzero.err" &
		zpid=$!
		BENCH_PIDS+=("$zpid")
		wait "$FG_PID" 2>/dev/null || true
		kill -TERM "$zpid" 2>/dev/null || true
		if wait "$zpid"; then
			out=$(<"$BENCH_DIR/nbdzero.out")
			out=${out##*bytes=}
			n=$((${out%% *} / 1048576))
		else
			echo "bench: nbdzero of the sparse range failed:" \
				"$(tail -1 "$BENCH_DIR/nbdzero.err")" >&2
		fi
		;;
	paced)
		next=$T0
		for ((i = 0; i < 1000; i++)); do
			next=$((next + PACE_MS))
			now_ms
			while ((NOW < next)) && kill -0 "$FG_PID" 2>/dev/null; do
				nap_ms $((next - NOW < 100 ? next - NOW : 100))
				now_ms
			done
			kill -0 "$FG_PID" 2>/dev/null || break
			bounded "$BLKSTACK" -s "$sock" zeroout --force -o ${SPARSE_OFF}G -l ${ZERO_GIB}G vol0 >/dev/null ||
				{ echo "bench: zeroout of the sparse range failed" >&2; break; }
			n=$((n + ZERO_GIB * 1024))
		done
		;;
	data)
		for ((i = 0; i < steps; i++)); do
			kill -0 "$FG_PID" 2>/dev/null || break
			bounded "$BLKSTACK" -s "$sock" zeroout --force \
				-o $((DATA_OFF * 1024 + i * STEP_MIB))M -l ${STEP_MIB}M vol0 >/dev/null ||
				{ echo "bench: zeroout of the data range failed" >&2; break; }
			n=$((n + STEP_MIB))
		done
		;;
	esac
	now_ms
	T1=$NOW
	ZEROED=$(awk -v m=$n 'BEGIN { printf "%.2f", m / 1024 }')
}

# fio's per-request log between T0 and T1 (clipped to the log's end):
# prints "WINDOW_S MiB/s avg_us p99_us"
window_stats() {	# TAG T0_MS T1_MS
	python3 - "$BENCH_DIR/$1" "$2" "$3" <<'PY'
import glob, sys
prefix, t0, t1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = []
for f in glob.glob(prefix + "_lat.*.log"):
    for line in open(f):
        p = line.split(",")
        if len(p) >= 4 and int(p[2]) == 1:	# writes only
            rows.append((int(p[0]), int(p[1]), int(p[3])))
if not rows:
    print("- - - -"); sys.exit()
t1 = min(t1, max(r[0] for r in rows))
win = [r for r in rows if t0 <= r[0] <= t1]
secs = (t1 - t0) / 1000.0
if not win or secs <= 0:
    print("- - - -"); sys.exit()
lat = sorted(r[1] for r in win)
p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
bw = sum(r[2] for r in win) / secs / 2**20
print(f"{secs:.1f} {bw:.1f} {sum(lat) / len(lat) / 1000:.1f} {p99 / 1000:.1f}")
PY
}

cost() {	# BASE NOW HIGHER_IS_WORSE(0/1) -> % cost
	awk -v a="$1" -v b="$2" -v w="$3" 'BEGIN {
		if (a == "-" || b == "-" || a == 0) { print "-"; exit }
		c = w ? (b - a) * 100 / a : (a - b) * 100 / a
		printf "%.1f%%", c }'
}

echo "### Zeroing under load (blkstackd over NBD, ${JOB_SECONDS} s per job)"
echo
echo "Foreground: $FG_GIB GiB overwritten by fio; background: zeroing of a"
echo "disjoint range: a $ZERO_GIB GiB never-written range again and again by a"
echo "second NBD client (bench/tools/nbdzero, 1 GiB requests, one connection),"
echo "or once every ${PACE_MS} ms by \`blkstack -s SOCK zeroout\`; or $DATA_GIB GiB that"
echo "holds data by \`blkstack zeroout\`, ${STEP_MIB} MiB a step. The numbers are"
echo "over the window while the zeroing ran (the alone run: from 1 s on)."
echo
echo "| job | background | window s | zeroed GiB | MiB/s | avg µs | p99 µs | bandwidth cost | p99 cost |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
declare -A BW_COST=() P99_COST=()
for job in bw lat; do
	for bg in none sparse paced data; do
		[ $bg = data ] && fill "$DATA_OFF" "$DATA_GIB" z
		tag=$job.$bg
		fg_start $job "$tag"
		zero_while_fg $bg
		wait "$FG_PID" 2>/dev/null || true
		gib=$ZEROED
		read -r secs bw avg p99 <<<"$(window_stats "$tag" "$T0" "$T1")"
		case $bg in
		none)
			b0=$bw p0=$p99
			label="none"
			echo "| $job | $label | $secs | - | $bw | $avg | $p99 | | |"
			continue
			;;
		sparse) label="$ZERO_GIB GiB never-written range, NBD client in a loop" ;;
		paced) label="$ZERO_GIB GiB never-written range, CLI every ${PACE_MS} ms" ;;
		data) label="$DATA_GIB GiB holding data, once" ;;
		esac
		BW_COST[$job.$bg]=$(cost "$b0" "$bw" 0)
		P99_COST[$job.$bg]=$(cost "$p0" "$p99" 1)
		echo "| $job | $label | $secs | $gib | $bw | $avg | $p99 | ${BW_COST[$job.$bg]} | ${P99_COST[$job.$bg]} |"
	done
done
read -r _ rss <<<"$(stop_server)"
echo
echo "One blkstackd served every row: its peak RSS over all of them was"
echo "$(mib "$rss") MiB (the rows share it; not measured per row)."
echo
echo "Cost of unmap zeroing beside the foreground job: overwrite bandwidth"
echo "${BW_COST[bw.data]} zeroing data, ${BW_COST[bw.sparse]} zeroing a sparse range in a loop"
echo "(${BW_COST[bw.paced]} paced); 4 KiB queue-depth-1 write p99 ${P99_COST[lat.data]} zeroing"
echo "data, ${P99_COST[lat.sparse]} sparse in a loop (${P99_COST[lat.paced]} paced)"
echo "(the seed: about 0 %; target: bandwidth cost < 2 %, p99 cost < 10 %)."
echo "A negative cost is noise."
for k in bw.data bw.sparse bw.paced; do
	awk -v c="${BW_COST[$k]%\%}" 'BEGIN { exit !(c != "-" && c + 0 >= 2) }' &&
		target_miss "zeroing under load ($k): overwrite bandwidth cost ${BW_COST[$k]} (target < 2 %)"
done
for k in lat.data lat.sparse lat.paced; do
	awk -v c="${P99_COST[$k]%\%}" 'BEGIN { exit !(c != "-" && c + 0 >= 10) }' &&
		target_miss "zeroing under load ($k): 4 KiB write p99 cost ${P99_COST[$k]} (target < 10 %)"
done
own_targets_summary
