#!/usr/bin/env bash
# iSCSI: blkstackd's target (`threads = 2`) against Debian's tgtd serving
# the same file on the same filesystem. fio has no libiscsi engine in
# Debian, so the clients are libiscsi's iscsi-perf (reads only, random
# LBAs with -r) and qemu-img bench over iscsi:// (reads and writes); each
# session is one client process with its own initiator name. Then the
# zeroing table: WRITE SAME(16) with UNMAP against WRITE SAME(16) without
# it and against writing zeroes, over a never-written and a written range.
#
# Knobs: ISCSI_IMG_GIB, ISCSI_WORKLOADS, ISCSI_SESSIONS, ISCSI_BD_THREADS,
# ISCSI_ZERO_GIB, ISCSI_TABLES, JOB_SECONDS, BENCH_QUICK (docs/bench.md).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

for t in tgtd tgtadm iscsi-perf qemu-img qemu-io unshare; do
	if ! command -v "$t" >/dev/null; then
		echo "### iSCSI: skipped ($t is not installed; scripts/deps.sh)"
		exit 0
	fi
done
if [ "$(id -u)" != 0 ]; then
	echo "### iSCSI: skipped (tgtd's private mount namespace needs root)"
	exit 0
fi
bench_dir

IMG_GIB=${ISCSI_IMG_GIB:-$(pick 1 4)}
SESSIONS=${ISCSI_SESSIONS:-1 4}
WANT=${ISCSI_WORKLOADS:-$(pick "seq-write rand-read" "seq-read seq-write rand-read rand-write")}
ZERO_GIB=${ISCSI_ZERO_GIB:-$(pick 1 10)}
TABLES=${ISCSI_TABLES:-data zeroing census}
BD_T=${ISCSI_BD_THREADS:-2}
SERVERS=(blkstackd tgtd)

start_iscsi() {	# SERVER IMG PORT
	case $1 in
	blkstackd) BD_THREADS=$BD_T start_blkstackd_iscsi "$2" "$3" ;;
	tgtd) start_tgtd "$2" "$3" ;;
	esac
}

stop_iscsi() {	# SERVER; prints "CPU_SECONDS PEAK_RSS_KB"
	if [ "$1" = tgtd ]; then STOP_SIGNAL=KILL stop_server; else stop_server; fi
}

lun_of() {	# SERVER: tgt's LUN 0 is its controller
	if [ "$1" = tgtd ]; then echo 1; else echo 0; fi
}

# qemu's iscsi driver, as JSON so that every session has an initiator name
# of its own (qemu's default name is the same for every process)
qemu_json() {	# SERVER PORT SESSION
	printf 'json:{"driver":"raw","file":{"driver":"iscsi","transport":"tcp","portal":"127.0.0.1:%s","target":"%s","lun":%s,"initiator-name":"iqn.2026-12.org.blkstack:bench-init-%s"}}' \
		"$2" "$BENCH_IQN" "$(lun_of "$1")" "$3"
}

iscsi_url() {	# SERVER PORT
	echo "iscsi://127.0.0.1:$2/$BENCH_IQN/$(lun_of "$1")"
}

# iscsi-perf: N sessions (processes) of QD reads each, for JOB_SECONDS;
# prints "iops gib_moved". It runs until SIGINT and prints a running
# average each second: the last one is the run's. The bytes moved are
# estimated from that average (it ran JOB_SECONDS + about 1 s).
run_perf() {	# SERVER PORT MODE(seq|rand) BS QD N OUTBASE
	local s=$1 port=$2 mode=$3 bs=$4 qd=$5 n=$6 out=$7 i blocks pids=() r=()
	blocks=$(($(numfmt --from=iec "$bs") / 512))
	[ "$mode" = rand ] && r=(-r)
	for ((i = 0; i < n; i++)); do
		timeout -s INT -k 10 $((JOB_SECONDS + 1)) iscsi-perf \
			-i "iqn.2026-12.org.blkstack:bench-perf-$i" -m "$qd" -b "$blocks" \
			"${r[@]}" "$(iscsi_url "$s" "$port")" >"$out.$i" 2>&1 &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i" || true; done
	for ((i = 0; i < n; i++)); do
		tr '\r' '\n' <"$out.$i" | grep -o 'iops average [0-9]*' | tail -1 |
			awk '{print $3}'
	done | awk -v n="$n" -v b="$blocks" -v t="$JOB_SECONDS" '
		{ sum += $1; got++ }
		END { if (got < n || sum == 0) { print "FAILED 0"; exit }
		      printf "%.0f %.3f\n", sum, sum * (t + 1) * b * 512 / 1073741824 }'
}

# qemu-img bench: N sessions of QD requests each, one process per
# session. qemu-img bench counts requests instead of seconds, so a probe
# of one session first measures the rate, and each session then gets
# rate * JOB_SECONDS / N requests. Sequential: step = BS from the
# session's own slice; "random": a step of about 0.382 of the image (an
# odd number of 4 KiB blocks below 2 GiB, qemu-img's limit, so it visits
# every block before repeating),
# which scatters the offsets the target sees. IOPS = all requests / the
# slowest session's time. Prints "iops gib_moved".
run_qbench() {	# SERVER PORT MODE(seq|rand) BS QD N OUTBASE WRITE(0|1)
	local s=$1 port=$2 mode=$3 bs=$4 qd=$5 n=$6 out=$7 w=$8 bsb step
	local probe t count i pids=() wr=()
	bsb=$(numfmt --from=iec "$bs")
	if [ "$mode" = rand ]; then
		# qemu-img takes a step below 2 GiB only: 0.382 of the image
		# (the golden section again), else 2^19 - 1 blocks
		step=$(((IMG_GIB * 262144 * 382 / 1000) | 1))
		((step < 524288)) || step=524287
		step=$((step * 4096))
	else
		step=$bsb
	fi
	[ "$w" = 1 ] && wr=(-w)
	probe=$((bsb >= 1048576 ? 300 : 20000))
	bounded qemu-img bench -c "$probe" -d "$qd" -s "$bsb" -S "$step" "${wr[@]}" \
		"$(qemu_json "$s" "$port" p)" >"$out.probe" 2>&1 || { echo "FAILED 0"; return; }
	t=$(awk '/Run completed in/ {print $4}' "$out.probe")
	count=$(awk -v c="$probe" -v t="$t" -v j="$JOB_SECONDS" -v n="$n" \
		'BEGIN { x = int(c / t * j / n); if (x < 100) x = 100; print x }')
	for ((i = 0; i < n; i++)); do
		bounded qemu-img bench -c "$count" -d "$qd" -s "$bsb" -S "$step" \
			-o $((IMG_GIB * 1073741824 / n * i)) "${wr[@]}" \
			"$(qemu_json "$s" "$port" "$i")" >"$out.$i" 2>&1 &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i" || true; done
	for ((i = 0; i < n; i++)); do
		awk '/Run completed in/ {print $4}' "$out.$i"
	done | awk -v n="$n" -v c="$count" -v p="$probe" -v b="$bsb" '
		{ if ($1 > max) max = $1; got++ }
		END { if (got < n || max == 0) { print "FAILED 0"; exit }
		      printf "%.0f %.3f\n", n * c / max, (n * c + p) * b / 1073741824 }'
}

# One row group: the same client job against both servers, a fresh server
# start per run (its CPU time and peak RSS belong to that run alone), the
# first server rotating, dirty data synced in between. Fills R_IOPS
# R_MIBS R_CPG R_RSS by server.
declare -A R_IOPS=() R_MIBS=() R_CPG=() R_RSS=()
iscsi_row() {	# ROW IMG CLIENT(perf|qbench) MODE BS QD N WRITE
	local row=$1 img=$2 client=$3 mode=$4 bs=$5 qd=$6 n=$7 w=$8 k s port
	local iops moved cpu rss out
	R_IOPS=() R_MIBS=() R_CPG=() R_RSS=()
	for ((k = 0; k < ${#SERVERS[@]}; k++)); do
		s=${SERVERS[$(((k + row) % ${#SERVERS[@]}))]}
		sync
		sleep 1
		port=$(free_port)
		out=$BENCH_DIR/run.$row.$s
		if start_iscsi "$s" "$img" "$port"; then
			if [ "$client" = perf ]; then
				read -r iops moved <<<"$(run_perf "$s" "$port" "$mode" "$bs" "$qd" "$n" "$out")"
			else
				read -r iops moved <<<"$(run_qbench "$s" "$port" "$mode" "$bs" "$qd" "$n" "$out" "$w")"
			fi
		else
			iops=FAILED moved=0
		fi
		read -r cpu rss <<<"$(stop_iscsi "$s")"
		R_IOPS[$s]=$iops R_RSS[$s]=$rss
		R_MIBS[$s]=$(awk -v i="$iops" -v b="$(numfmt --from=iec "$bs")" \
			'BEGIN { if (i == "FAILED") print "-"; else printf "%.1f", i * b / 1048576 }')
		R_CPG[$s]=$(awk -v c="$cpu" -v g="$moved" 'BEGIN { if (g > 0) printf "%.2f", c / g; else print "-" }')
	done
}

# blkstackd's ratio cells against tgtd: IOPS (target: 1.2x, the issue's
# aim), CPU s/GiB (<= 1.0x), peak RSS (<= 1.5x). A miss goes into the
# Targets summary.
iscsi_ratio_cells() {	# SERVER DESC
	local s=$1 rt rc rr joined miss=()
	if [ "$s" != blkstackd ]; then
		echo " | | |"
		return
	fi
	rt=$(ratio "${R_IOPS[blkstackd]}" "${R_IOPS[tgtd]}")
	rc=$(ratio "${R_CPG[blkstackd]}" "${R_CPG[tgtd]}")
	rr=$(ratio "${R_RSS[blkstackd]}" "${R_RSS[tgtd]}")
	if [ "${R_IOPS[blkstackd]}" = FAILED ]; then
		miss+=("failed")
		rc=- rr=-
	fi
	awk -v r="$rt" 'BEGIN { exit !(r != "-" && r < 1.2) }' && miss+=("${rt}x tgtd's throughput (target 1.2x)")
	awk -v r="$rc" 'BEGIN { exit !(r != "-" && r > 1.0) }' && miss+=("CPU ${R_CPG[blkstackd]} s/GiB vs tgtd's ${R_CPG[tgtd]} (${rc}x)")
	awk -v r="$rr" 'BEGIN { exit !(r != "-" && r > 1.5) }' && miss+=("peak RSS $(mib "${R_RSS[blkstackd]}") MiB = ${rr}x tgtd's")
	if [ ${#miss[@]} -gt 0 ]; then
		joined=$(printf '%s; ' "${miss[@]}")
		target_miss "iSCSI $2, blkstackd: ${joined%; }"
	fi
	echo " $rt | $rc | $rr |"
}

data_table() {
	local img=$BENCH_DIR/data.img row=0 wl name client mode bs qd w n s lat
	dd if=/dev/zero bs=4M count=$((IMG_GIB * 256)) status=none | tr '\0' 'i' |
		dd of="$img" bs=4M iflag=fullblock oflag=direct status=none
	sync "$img"
	# into the page cache before the first row (see datapath.sh)
	cat "$img" >/dev/null

	echo "### Data path over iSCSI: blkstackd (threads = $BD_T) vs tgtd (${JOB_SECONDS} s per row, ${IMG_GIB} GiB image)"
	echo
	echo "| workload | sessions | client | server | IOPS | MiB/s | mean µs | CPU s/GiB | peak RSS MiB | x tgt | CPU vs tgt | RSS vs tgt |"
	echo "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
	# name client mode bs qd(per session) write
	for wl in "seq-read perf seq 1M 16 0" "seq-read qbench seq 1M 16 0" \
		"seq-write qbench seq 1M 16 1" \
		"rand-read perf rand 4K 32 0" "rand-read qbench rand 4K 32 0" \
		"rand-write qbench rand 4K 32 1"; do
		read -r name client mode bs qd w <<<"$wl"
		case " $WANT " in *" $name "*) ;; *) continue ;; esac
		for n in $SESSIONS; do
			iscsi_row "$row" "$img" "$client" "$mode" "$bs" "$qd" "$n" "$w"
			row=$((row + 1))
			for s in "${SERVERS[@]}"; do
				# Little's law: requests in flight / IOPS
				lat=$(awk -v i="${R_IOPS[$s]}" -v q=$((qd * n)) \
					'BEGIN { if (i + 0 > 0) printf "%.0f", q * 1e6 / i; else print "-" }')
				echo "| $name | $n | $([ "$client" = perf ] && echo iscsi-perf || echo qemu-img bench) | $s | ${R_IOPS[$s]} | ${R_MIBS[$s]} | $lat | ${R_CPG[$s]} | $(mib "${R_RSS[$s]}") |$(iscsi_ratio_cells "$s" "$name $bs qd$qd, $n session$([ "$n" = 1 ] || echo s), $client")"
			done
		done
	done
	echo
	echo "Queue depth per session: 16 for 1 MiB, 32 for 4 KiB; \"mean µs\" is"
	echo "requests in flight / IOPS (the clients report no percentiles)."
	echo "Ratios are blkstackd's against tgtd's: IOPS (target >= 1.2x), CPU s/GiB"
	echo "(<= 1.0x), peak RSS (<= 1.5x)."
	echo
	rm -f "$img"
}

# ---- zeroing ---------------------------------------------------------------

# The zeroing image is a sparse 3 TiB file: qemu's iscsi driver uses the
# 16-byte CDBs (WRITE SAME(16), WRITE(16)) only on a LUN of more than
# 2^32 blocks, and WRITE SAME(10) below that. The range zeroed is its
# first ZERO_GIB GiB.
zero_case() {	# SERVER RANGE(sparse|data) METHOD(ws-unmap|ws|write)
	local s=$1 range=$2 method=$3 img=$BENCH_DIR/zero.img port cmds=() o step
	local gib_b=$((ZERO_GIB * 1073741824)) t0 t1 secs alloc zero rss cpu
	rm -f "$img"
	truncate -s 3T "$img"
	if [ "$range" = data ]; then
		dd if=/dev/zero bs=4M count=$((ZERO_GIB * 256)) status=none | tr '\0' 'z' |
			dd of="$img" bs=4M iflag=fullblock conv=notrunc status=none
	fi
	sync
	sleep 1
	case $method in
	ws-unmap) step=1073741824 ;;
	ws) step=1073741824 ;;
	write) step=$((256 << 20)) ;;
	esac
	for ((o = 0; o < gib_b; o += step)); do
		case $method in
		ws-unmap) cmds+=(-c "write -z -u $o $step") ;;
		ws) cmds+=(-c "write -z $o $step") ;;
		write) cmds+=(-c "write -P 0 $o $step") ;;
		esac
	done
	cmds+=(-c flush)
	port=$(free_port)
	secs=FAILED
	if start_iscsi "$s" "$img" "$port"; then
		t0=$(date +%s.%N)
		if bounded qemu-io "$(qemu_json "$s" "$port" z)" "${cmds[@]}" \
			>"$BENCH_DIR/zero.$s.log" 2>&1 &&
			! grep -qiE 'error|fail' "$BENCH_DIR/zero.$s.log"; then
			t1=$(date +%s.%N)
			secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')
		else
			tail -2 "$BENCH_DIR/zero.$s.log" >&2
		fi
	fi
	read -r cpu rss <<<"$(stop_iscsi "$s")"
	alloc=$(($(stat -c '%b * %B' "$img") / 1048576))
	zero=$(is_zero_file "$img" 0 "$gib_b")
	echo "$secs $alloc $zero $cpu"
}

zeroing_table() {
	local range method s label secs alloc zero cpu x
	echo "### Zeroing over iSCSI: ${ZERO_GIB} GiB (qemu-io over iscsi://, then a flush)"
	echo
	echo "| range | method | server | seconds | GiB/s | CPU s | allocated after MiB | reads back zero | x tgt (time) |"
	echo "|---|---|---|---:|---:|---:|---:|---|---:|"
	for range in sparse data; do
		for method in ws-unmap ws write; do
			case $method in
			ws-unmap) label='`write -z -u`: WRITE SAME(16) UNMAP' ;;
			ws) label='`write -z`: WRITE SAME(16), no UNMAP' ;;
			write) label='`write -P 0`: WRITE(16) of zeroes' ;;
			esac
			declare -A ZR=()
			for s in "${SERVERS[@]}"; do
				ZR[$s]=$(zero_case "$s" "$range" "$method")
			done
			for s in "${SERVERS[@]}"; do
				read -r secs alloc zero cpu <<<"${ZR[$s]}"
				x=
				if [ "$s" = blkstackd ]; then
					x=$(ratio "$(echo "${ZR[tgtd]}" | awk '{print $1}')" "$secs")
				fi
				echo "| $([ "$range" = sparse ] && echo never written || echo holds data) | $label | $s | $secs | $(awk -v s="$secs" -v g="$ZERO_GIB" 'BEGIN { if (s + 0 > 0) printf "%.2f", g / s; else print "-" }') | $cpu | $alloc | $zero | $x |"
				[ "$s" = blkstackd ] || continue
				if [ "$secs" = FAILED ] || [ "$zero" != yes ]; then
					target_miss "iSCSI zeroing ($range, $method), blkstackd: $([ "$secs" = FAILED ] && echo failed || echo "does not read back zero")"
				elif [ "$method" = ws-unmap ]; then
					awk -v r="$x" 'BEGIN { exit !(r != "-" && r < 1.0) }' &&
						target_miss "iSCSI zeroing ($range, WRITE SAME UNMAP), blkstackd: ${x}x tgtd's speed"
				fi
			done
		done
	done
	echo
	echo "\"x tgt\" is tgtd's seconds / blkstackd's: above 1.0 blkstackd zeroed"
	echo "sooner. \"allocated after\" is the whole image file's."
	echo
	rm -f "$BENCH_DIR/zero.img"
}

# What qemu-io really sends for each zeroing method: tshark on lo during a
# 64 MiB run of each, the SCSI commands counted with their UNMAP bit.
# (A capture of the full-size runs would hold every byte written.)
census() {	# PCAP PORT: "N x COMMAND" for every command, the UNMAP bits
	local v ops bits
	v=$(tshark -r "$1" -d "tcp.port==$2,iscsi" -Y scsi -O scsi,scsi_sbc -V 2>/dev/null)
	ops=$(grep -E '^ +Opcode: (Write|Synchronize|Unmap)' <<<"$v" |
		sed -E 's/^ +Opcode: //; s/ \(0x.*//' | sort | uniq -c |
		awk '{ n = $1; $1 = ""; printf "%s%d x%s", sep, n, $0; sep = "; " }')
	bits=$(grep -oE 'UNMAP: (True|False)' <<<"$v" | sort | uniq -c |
		awk '{ printf "%s%d with UNMAP=%s", sep, $1, ($3 == "True" ? 1 : 0); sep = ", " }')
	echo "${ops:-none}${bits:+ ($bits)}"
}

census_table() {
	local img=$BENCH_DIR/census.img s m port tp i cap
	if ! command -v tshark >/dev/null; then
		echo "(no tshark: the census of commands is skipped)"
		echo
		return
	fi
	truncate -s 3T "$img"
	echo "#### The commands on the wire (tshark, 64 MiB per method, 3 TiB LUN)"
	echo
	echo "| method | server | SCSI commands seen |"
	echo "|---|---|---|"
	for s in "${SERVERS[@]}"; do
		port=$(free_port)
		start_iscsi "$s" "$img" "$port" || continue
		for m in "-z -u" "-z" "-P 0"; do
			cap=$BENCH_DIR/census.pcap
			rm -f "$cap"
			timeout 60 tshark -i lo -f "tcp port $port" -a duration:10 \
				-w "$cap" >"$BENCH_DIR/tshark.err" 2>&1 &
			tp=$!
			for ((i = 0; i < 100; i++)); do
				grep -q Capturing "$BENCH_DIR/tshark.err" && break
				sleep 0.1
			done
			sleep 1
			bounded qemu-io "$(qemu_json "$s" "$port" c)" -c "write $m 0 64M" \
				-c flush >/dev/null 2>&1 || true
			wait "$tp" || true
			echo "| \`write $m\` | $s | $(census "$cap" "$port") |"
		done
		stop_iscsi "$s" >/dev/null
	done
	rm -f "$img" "$BENCH_DIR/census.pcap"
	echo
}

case " $TABLES " in *" data "*) data_table ;; esac
case " $TABLES " in *" zeroing "*) zeroing_table ;; esac
case " $TABLES " in *" census "*) census_table ;; esac
own_targets_summary
