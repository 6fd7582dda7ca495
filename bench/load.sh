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
# The table is made once per filesystem under the device's file: "host",
# the scratch directory's own (this VM's root is ext4 mounted with online
# `discard`: the journal commit after a punch of data sends the freed
# blocks' discards to the virtual disk and waits for them), and
# "nodiscard", a fresh ext4 without online discard on a loop device (root
# only; else a SKIP line), so the cost of the host's discards and the cost
# of blkstack's zeroing are told apart; and "zram", the device itself
# rather than a file: /dev/zram0 served by the hostbdev driver (root only,
# zram0 unused), a block device that zeroes by deallocating as the seed's
# NVMe and SCSI devices do (zram frees the pages on Write Zeroes and
# discard), filled with random data so the pages it frees are real ones.
#
# Knobs: LOAD_FG_GIB, LOAD_DATA_GIB, LOAD_ZERO_GIB (sizes), LOAD_PACE_MS, JOB_SECONDS,
# LOAD_FS ("host nodiscard zram"), LOAD_ROUNDS (3), BENCH_QUICK.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_dir

FG_GIB=${LOAD_FG_GIB:-$(pick 1 4)}	# what fio overwrites
DATA_GIB=${LOAD_DATA_GIB:-$(pick 1 4)}	# data that zeroing frees
ZERO_GIB=${LOAD_ZERO_GIB:-$(pick 2 10)}	# sparse range zeroed in a loop
STEP_MIB=256
PACE_MS=${LOAD_PACE_MS:-1000}	# paced: one sparse zeroout started this often
ROUNDS=${LOAD_ROUNDS:-$(pick 1 3)}	# each row this many times, interleaved
DATA_OFF=$FG_GIB
SPARSE_OFF=$((FG_GIB + DATA_GIB))
IMG_GIB=$((FG_GIB + DATA_GIB + ZERO_GIB))

fill() {	# OFFSET_GIB GIB CHAR: written, synced, not timed
	if [ "$FILL_RANDOM" = 1 ]; then	# zram keeps a repeated byte as no page
		head -c $(($2 << 30)) /dev/urandom
	else
		dd if=/dev/zero bs=4M count=$(($2 * 256)) status=none | tr '\0' "$3"
	fi | dd of="$img" bs=4M seek=$(($1 * 256)) iflag=fullblock oflag=direct \
		conv=notrunc status=none
	sync "$img"
}
FILL_RANDOM=0

NBDZERO=$BUILD/bench/nbdzero
"$BENCH_ROOT/bench/tools/build-nbdzero.sh" "$NBDZERO"

# "nodiscard": an ext4 of its own, no online discard, on a loop device in
# direct I/O mode over a sparse file of the scratch directory.
LOOP_DEV= LOOP_MNT=
loop_fs() {	# sets LOOP_DEV LOOP_MNT; fails with a reason on stderr
	local back=$BENCH_DIR/nodiscard.ext4
	[ "$(id -u)" = 0 ] || { echo "needs root (losetup, mount)" >&2; return 1; }
	truncate -s $((IMG_GIB + 1))G "$back"
	mkfs.ext4 -q -F -E nodiscard "$back" >&2 || return 1
	LOOP_DEV=$(losetup --direct-io=on -f --show "$back") || return 1
	LOOP_MNT=$BENCH_DIR/nodiscard
	mkdir -p "$LOOP_MNT"
	mount -o nodiscard "$LOOP_DEV" "$LOOP_MNT" || { LOOP_MNT=; return 1; }
}
loop_fs_drop() {
	if [ -n "$LOOP_MNT" ]; then umount "$LOOP_MNT" || true; fi
	if [ -n "$LOOP_DEV" ]; then losetup -d "$LOOP_DEV" || true; fi
	LOOP_DEV= LOOP_MNT=
}

# "zram": /dev/zram0 sized for the table, lz4; reset (emptied) afterwards.
ZRAM=
ZRAM_SYS=/sys/block/zram0
zram_dev() {	# sets ZRAM; fails with a reason on stderr
	local avail
	[ "$(id -u)" = 0 ] || { echo "needs root (zram's sysfs)" >&2; return 1; }
	[ -w $ZRAM_SYS/disksize ] && [ -b /dev/zram0 ] ||
		{ echo "no /dev/zram0 (zram module not loaded)" >&2; return 1; }
	[ "$(cat $ZRAM_SYS/disksize)" = 0 ] ||
		{ echo "/dev/zram0 is in use (disksize $(cat $ZRAM_SYS/disksize))" >&2; return 1; }
	avail=$(awk '/^MemAvailable:/ { print int($2 / 1048576) }' /proc/meminfo)
	((avail >= FG_GIB + DATA_GIB + 4)) ||
		{ echo "$avail GiB of memory available, $((FG_GIB + DATA_GIB + 4)) needed" >&2; return 1; }
	echo lz4 >$ZRAM_SYS/comp_algorithm 2>/dev/null || true
	echo $((IMG_GIB << 30)) >$ZRAM_SYS/disksize || return 1
	ZRAM=/dev/zram0
}
zram_drop() {
	if [ -n "$ZRAM" ]; then echo 1 >$ZRAM_SYS/reset || true; fi
	ZRAM=
}
trap 'bench_cleanup_servers; loop_fs_drop; zram_drop; bench_cleanup' EXIT

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

median() {	# NUMBER... ("-" ignored) -> the median, or "-"
	printf '%s\n' "$@" | awk '$1 != "-" && $1 != ""' | sort -g |
		awk '{ a[n++] = $1 + 0 }
		END { if (!n) { print "-"; exit }
		      m = n % 2 ? a[(n - 1) / 2] : (a[n / 2 - 1] + a[n / 2]) / 2
		      printf "%.1f\n", m }'
}

join_slash() {	# WORD... -> "a / b / c"
	local IFS=/
	local s="$*"
	echo "${s//\// / }"
}

# The alone runs' spread over the rounds: largest / smallest - 1.
spread_of() {	# NUMBER...
	printf '%s\n' "$@" | awk '$1 != "-" && $1 > 0 {
		if (!n++ || $1 < lo) lo = $1; if ($1 > hi) hi = $1 }
		END { if (n < 2) print "-"; else printf "%.1f%%\n", (hi / lo - 1) * 100 }'
}

cost() {	# BASE NOW HIGHER_IS_WORSE(0/1) -> % cost
	awk -v a="$1" -v b="$2" -v w="$3" 'BEGIN {
		if (a == "-" || b == "-" || a == 0) { print "-"; exit }
		c = w ? (b - a) * 100 / a : (a - b) * 100 / a
		printf "%.1f%%", c }'
}

# One table: the device's file in directory DIR, or the block device DEV
# (served by the hostbdev driver).
table() {	# DIR | DEV
	local what q
	if [ -b "$1" ]; then
		img=$1
		q=/sys/block/${img##*/}/queue
		BD_DEV_TYPE=hostbdev
		what="The device is $img ($(sed 's/.*\[\(.*\)\].*/\1/' $ZRAM_SYS/comp_algorithm) zram), served by the hostbdev driver; zram
frees a range's pages on Write Zeroes (write_zeroes_max_bytes
$(cat $q/write_zeroes_max_bytes)) and on discard, but the kernel does not flag that as
unmap zeroing (write_zeroes_unmap_max_bytes
$(cat $q/write_zeroes_unmap_max_bytes 2>/dev/null || echo absent)), so blkstack zeroes it with BLKZEROOUT.
The data written is random (incompressible)."
	else
		img=$1/load.img
		BD_DEV_TYPE=file
		truncate -s ${IMG_GIB}G "$img"
		what="The device's file is on $(findmnt -n -o FSTYPE -T "$img") mounted
\`$(findmnt -n -o OPTIONS -T "$img")\`."
	fi
	fill 0 "$FG_GIB" f
	port=$(free_port)
	BD_DEV_TYPE=$BD_DEV_TYPE start_blkstackd "$img" "$port" "direct = 1"
	sock=$BENCH_DIR/state/blkstackd.sock
	echo "### Zeroing under load (blkstackd over NBD, ${JOB_SECONDS} s per job), $FS_LABEL"
	echo
	echo "Foreground: $FG_GIB GiB overwritten by fio; background: zeroing of a"
	echo "disjoint range: a $ZERO_GIB GiB never-written range again and again by a"
	echo "second NBD client (bench/tools/nbdzero, 1 GiB requests, one connection),"
	echo "or once every ${PACE_MS} ms by \`blkstack -s SOCK zeroout\`; or $DATA_GIB GiB that"
	echo "holds data by \`blkstack zeroout\`, ${STEP_MIB} MiB a step. The numbers are"
	echo "over the window while the zeroing ran (the alone run: from 1 s on)."
	echo "$what"
	echo
	echo "$ROUNDS rounds, each row once per round in this order (bw: none, never-"
	echo "written in a loop, paced, data; then the same for lat); a row's cost is"
	echo "against the same round's alone run, and the cost shown is the median of"
	echo "the rounds. The alone run's spread over the rounds (largest over"
	echo "smallest, minus one) is this machine's noise floor for the row."
	echo
	echo "| job | background | window s | zeroed GiB | MiB/s per round | p99 µs per round | bandwidth cost per round | p99 cost per round | bandwidth cost (median) | p99 cost (median) |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
	declare -A BW=() P99=() SECS=() GIB=() BW_COST=() P99_COST=()
	local r job bg tag secs bw avg p99 label bws p99s bwc p99c
	for ((r = 1; r <= ROUNDS; r++)); do
		for job in bw lat; do
			for bg in none sparse paced data; do
				[ $bg = data ] && fill "$DATA_OFF" "$DATA_GIB" z
				tag=$job.$bg.$r
				fg_start $job "$tag"
				zero_while_fg $bg
				wait "$FG_PID" 2>/dev/null || true
				read -r secs bw avg p99 <<<"$(window_stats "$tag" "$T0" "$T1")"
				BW[$tag]=$bw P99[$tag]=$p99 SECS[$tag]=$secs GIB[$tag]=$ZEROED
				rm -f "$BENCH_DIR/$tag"_lat.*.log
			done
		done
	done
	for job in bw lat; do
		for bg in none sparse paced data; do
			bws= p99s= bwc= p99c=
			local costs_b=() costs_p=() secs_all=()
			for ((r = 1; r <= ROUNDS; r++)); do
				tag=$job.$bg.$r
				bws+="${bws:+ / }${BW[$tag]}"
				p99s+="${p99s:+ / }${P99[$tag]}"
				secs_all+=("${SECS[$tag]}")
				[ $bg = none ] && continue
				costs_b+=("$(cost "${BW[$job.none.$r]}" "${BW[$tag]}" 0)")
				costs_p+=("$(cost "${P99[$job.none.$r]}" "${P99[$tag]}" 1)")
			done
			case $bg in
			none)
				echo "| $job | none | $(median "${secs_all[@]}") | - | $bws | $p99s | spread $(spread_of $(for ((r = 1; r <= ROUNDS; r++)); do echo "${BW[$job.none.$r]}"; done)) | spread $(spread_of $(for ((r = 1; r <= ROUNDS; r++)); do echo "${P99[$job.none.$r]}"; done)) | | |"
				continue
				;;
			sparse) label="$ZERO_GIB GiB never-written range, NBD client in a loop" ;;
			paced) label="$ZERO_GIB GiB never-written range, CLI every ${PACE_MS} ms" ;;
			data) label="$DATA_GIB GiB holding data, once" ;;
			esac
			BW_COST[$job.$bg]=$(median "${costs_b[@]%\%}")%
			P99_COST[$job.$bg]=$(median "${costs_p[@]%\%}")%
			echo "| $job | $label | $(median "${secs_all[@]}") | ${GIB[$job.$bg.1]} | $bws | $p99s | $(join_slash "${costs_b[@]}") | $(join_slash "${costs_p[@]}") | ${BW_COST[$job.$bg]} | ${P99_COST[$job.$bg]} |"
		done
	done
	read -r _ rss <<<"$(stop_server)"
	echo
	echo "One blkstackd served every row: its peak RSS over all of them was"
	echo "$(mib "$rss") MiB (the rows share it; not measured per row)."
	echo
	echo "Cost of unmap zeroing beside the foreground job (medians): overwrite bandwidth"
	echo "${BW_COST[bw.data]} zeroing data, ${BW_COST[bw.sparse]} zeroing a sparse range in a loop"
	echo "(${BW_COST[bw.paced]} paced); 4 KiB queue-depth-1 write p99 ${P99_COST[lat.data]} zeroing"
	echo "data, ${P99_COST[lat.sparse]} sparse in a loop (${P99_COST[lat.paced]} paced)"
	echo "(the seed: about 0 %; target: bandwidth cost < 2 %, p99 cost < 10 %)."
	echo "A negative cost is noise."
	for k in bw.data bw.sparse bw.paced; do
		awk -v c="${BW_COST[$k]%\%}" 'BEGIN { exit !(c != "-" && c + 0 >= 2) }' &&
			target_miss "zeroing under load, $FS ($k): overwrite bandwidth cost ${BW_COST[$k]} (median of $ROUNDS; target < 2 %)"
	done
	for k in lat.data lat.sparse lat.paced; do
		awk -v c="${P99_COST[$k]%\%}" 'BEGIN { exit !(c != "-" && c + 0 >= 10) }' &&
			target_miss "zeroing under load, $FS ($k): 4 KiB write p99 cost ${P99_COST[$k]} (median of $ROUNDS; target < 10 %)"
	done
	[ -b "$img" ] || rm -f "$img"
}

for FS in ${LOAD_FS:-host nodiscard zram}; do
	case $FS in
	host)
		FS_LABEL="file on the scratch directory's filesystem"
		table "$BENCH_DIR"
		;;
	nodiscard)
		FS_LABEL="file on an ext4 without online discard (loop device)"
		if ! loop_fs 2>"$BENCH_DIR/loop_fs.err" >/dev/null; then
			why=$(tail -1 "$BENCH_DIR/loop_fs.err")
			echo "### Zeroing under load, $FS_LABEL"
			echo
			echo "SKIP: no nodiscard filesystem: ${why:-losetup or mount failed}"
			echo
			loop_fs_drop
			continue
		fi
		table "$LOOP_MNT"
		loop_fs_drop
		;;
	zram)
		FS_LABEL="/dev/zram0, a device that zeroes by deallocating (hostbdev driver)"
		if ! zram_dev 2>"$BENCH_DIR/zram.err" >/dev/null; then
			why=$(tail -1 "$BENCH_DIR/zram.err")
			echo "### Zeroing under load, $FS_LABEL"
			echo
			echo "SKIP: no zram device: ${why:-zram setup failed}"
			echo
			zram_drop
			continue
		fi
		FILL_RANDOM=1 table "$ZRAM"
		zram_drop
		;;
	*) echo "bench: LOAD_FS: unknown filesystem \"$FS\"" >&2; exit 2 ;;
	esac
	echo
done
own_targets_summary
