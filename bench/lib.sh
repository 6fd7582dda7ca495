# shellcheck shell=bash
# Shared helpers for the benchmarks: servers started here are stopped here,
# by PID; everything listens on 127.0.0.1; every job is bounded in time.

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$BENCH_ROOT/build}
BLKSTACK=$BUILD/blkstack
BLKSTACKD=$BUILD/blkstackd
# BENCH_QUICK=1: fewer rows, 3 s jobs and small images, to try the
# scripts out; the numbers of a quick run are not results.
BENCH_QUICK=${BENCH_QUICK:-0}
if [ "$BENCH_QUICK" = 1 ]; then
	JOB_SECONDS=${JOB_SECONDS:-3}
fi
JOB_SECONDS=${JOB_SECONDS:-10}	# each fio job; the issue caps it at 30 s
[ "$JOB_SECONDS" -le 30 ] || JOB_SECONDS=30

# A client (qemu-io, blkstack, fio) that a hung server never answers is
# stopped after this many seconds (fio: its run time plus this), so that
# one hang fails a row instead of the whole run.
CLIENT_TIMEOUT=${BENCH_CLIENT_TIMEOUT:-300}
bounded() {	# CMD...: the command, under CLIENT_TIMEOUT
	timeout -k 5 "$CLIENT_TIMEOUT" "$@"
}

pick() {	# QUICK FULL: the value for this run
	if [ "$BENCH_QUICK" = 1 ]; then echo "$1"; else echo "$2"; fi
}

declare -a BENCH_PIDS=()

bench_cleanup_servers() {
	local pid
	# a server runs under time -v, which forwards no signal: stop the
	# server itself (the child), then time (a script that stopped on an
	# error left its servers running)
	for pid in "${BENCH_PIDS[@]}"; do
		pkill -P "$pid" 2>/dev/null || true
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${BENCH_PIDS[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	BENCH_PIDS=()
}

bench_cleanup() {
	bench_cleanup_servers
	[ -n "${BENCH_DIR:-}" ] && rm -rf "$BENCH_DIR"
}

# A scratch directory on the real filesystem (not tmpfs): the point is the
# host filesystem's behaviour.
bench_dir() {
	BENCH_DIR=$(mktemp -d "${BENCH_TMP:-/var/tmp}/blkstack-bench.XXXXXX")
	trap bench_cleanup EXIT
}

# A port nothing listens on, below the kernel's ephemeral range (so no
# outgoing connection holds it). In bash: on the loaded 2-core machine a
# python start took 1-2 s, twice per row.
free_port() {
	local i p
	for ((i = 0; i < 100; i++)); do
		p=$((20000 + RANDOM % 12000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	echo "bench: no free port" >&2
	return 1
}

# Polls with bash's /dev/tcp (no process per try: on a loaded machine a
# python start per try took longer than the server). Gives up at once when
# PID, the server, has exited.
wait_port() {	# PORT [TIMEOUT_S] [PID]
	local i
	for ((i = 0; i < ${2:-10} * 10; i++)); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
			return 0
		fi
		if [ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null; then
			echo "bench: the server for port $1 exited" >&2
			return 1
		fi
		sleep 0.1
	done
	echo "bench: port $1 did not open" >&2
	return 1
}

# Start a server in the background under /usr/bin/time -v (for CPU and RSS).
# Sets SERVER_PID and SERVER_TIME (the file time -v writes at exit).
start_server() {	# NAME PORT CMD...
	local name=$1 port=$2
	shift 2
	SERVER_TIME=$BENCH_DIR/$name.$port.time
	/usr/bin/time -v -o "$SERVER_TIME" "$@" >"$BENCH_DIR/$name.$port.log" 2>&1 &
	SERVER_PID=$!
	BENCH_PIDS+=("$SERVER_PID")
	if ! wait_port "$port" 15 "$SERVER_PID"; then
		tail -3 "$BENCH_DIR/$name.$port.log" >&2
		return 1
	fi
}

# Stop the server started last; prints "CPU_SECONDS PEAK_RSS_KB".
stop_server() {
	local child i
	# time(1) forwards nothing: signal its child, the server itself
	child=$(pgrep -P "$SERVER_PID" | head -1)
	# STOP_SIGNAL=KILL for a server that ignores SIGTERM (tgtd with
	# targets defined): time -v still reports its CPU and peak RSS
	[ -n "$child" ] && kill -"${STOP_SIGNAL:-TERM}" "$child" 2>/dev/null
	# often called as $(stop_server): a subshell cannot wait(1) for it
	for ((i = 0; i < ${STOP_SECONDS:-40} * 20; i++)); do
		kill -0 "$SERVER_PID" 2>/dev/null || break
		sleep 0.05
	done
	# a server that does not stop (blkstackd gives requests in flight
	# 30 s) is killed: the run goes on, its row's CPU and RSS stay
	if kill -0 "$SERVER_PID" 2>/dev/null && [ -n "$child" ]; then
		echo "bench: the server (pid $child) did not stop; killed" >&2
		kill -KILL "$child" 2>/dev/null
	fi
	wait "$SERVER_PID" 2>/dev/null || true
	awk -F': ' '/User time/ {u=$2} /System time/ {s=$2}
		/Maximum resident set size/ {r=$2}
		END {printf "%.2f %d\n", u+s, r}' "$SERVER_TIME"
}

# BD_DEV_OPTS="key = value" adds device lines (an A/B of driver options).
# BD_DEV_TYPE=hostbdev serves IMG (then a block device) with the hostbdev
# driver instead of the file driver.
# BD_THREADS=N in the environment adds `threads = N` to [daemon],
# BD_POLL_US=US `poll_us = US`, BD_EVENT_LOOP=epoll `event_loop = epoll`;
# BD_SEND_BUFFER=SIZE `send_buffer = SIZE`
# in the iSCSI, NVMe/TCP and NFS (nfs_rw.sh) exports.
blkstackd_conf() {	# FILE IMG PORT [extra device lines]
	cat >"$1" <<CONF
[daemon]
state_dir = $BENCH_DIR/state
${BD_THREADS:+threads = $BD_THREADS}
${BD_POLL_US:+poll_us = $BD_POLL_US}
${BD_EVENT_LOOP:+event_loop = $BD_EVENT_LOOP}
[device vol0]
type = ${BD_DEV_TYPE:-file}
path = $2
${4:-}
${BD_DEV_OPTS:-}
[export vol0]
type = nbd
device = vol0
listen = 127.0.0.1:$3
CONF
}

start_blkstackd() {	# IMG PORT [extra device lines]
	mkdir -p "$BENCH_DIR/state"
	blkstackd_conf "$BENCH_DIR/bd.$2.ini" "$1" "$2" "${3:-}"
	start_server blkstackd "$2" "$BLKSTACKD" -f -c "$BENCH_DIR/bd.$2.ini"
}

start_nbdkit() {	# IMG PORT
	start_server nbdkit "$2" nbdkit -f -i 127.0.0.1 -p "$2" -e vol0 file "file=$1"
}

start_qemu_nbd() {	# IMG PORT
	start_server qemu-nbd "$2" qemu-nbd -f raw -x vol0 -b 127.0.0.1 -p "$2" -e 32 -t --aio=io_uring "$1"
}

# ---- iSCSI targets (bench/iscsi.sh) ---------------------------------------

BENCH_IQN=iqn.2026-12.org.blkstack:bench

# blkstackd serving IMG as LUN 0 of an iSCSI target on 127.0.0.1:PORT
# (BD_THREADS and BD_EVENT_LOOP as above).
start_blkstackd_iscsi() {	# IMG PORT
	mkdir -p "$BENCH_DIR/state"
	cat >"$BENCH_DIR/bdi.$2.ini" <<CONF
[daemon]
state_dir = $BENCH_DIR/state
${BD_THREADS:+threads = $BD_THREADS}
${BD_EVENT_LOOP:+event_loop = $BD_EVENT_LOOP}
[device vol0]
type = file
path = $1
${BD_DEV_OPTS:-}
[export vol0]
type = iscsi
device = vol0
listen = 127.0.0.1:$2
iqn = $BENCH_IQN
${BD_SEND_BUFFER:+send_buffer = $BD_SEND_BUFFER}
CONF
	start_server blkstackd "$2" "$BLKSTACKD" -f -c "$BENCH_DIR/bdi.$2.ini"
}

# tgtd and tgtadm in a mount namespace of their own where /run is a
# directory of the bench, so the control socket is private (no clash with
# a system tgtd or a test running at the same time): the approach of
# tests/integration/sd_tgt.sh. unshare, sh and tgtd are one process (exec),
# so time -v's child is tgtd itself. Needs root.
tgt_ns() {	# CMD...
	unshare -m --propagation private sh -c \
		'mount --bind "$0" /run && exec "$@"' "$BENCH_DIR/tgt-run" "$@"
}

tgt_adm() {	# TGTADM_ARGS...
	tgt_ns tgtadm -C "$TGT_CPORT" --lld iscsi "$@" >>"$BENCH_DIR/tgtadm.log" 2>&1 || {
		tail -3 "$BENCH_DIR/tgtadm.log" >&2
		return 1
	}
}

# tgtd serving IMG as LUN 1 (LUN 0 is tgt's controller) of BENCH_IQN on
# 127.0.0.1:PORT, thin provisioned (WRITE SAME UNMAP and UNMAP punch
# holes), open to every initiator. tgtd ignores SIGTERM while it has
# targets: stop it with STOP_SIGNAL=KILL.
# TGT_BSOFLAGS=direct opens the backing file O_DIRECT (tgtadm --bsoflags).
start_tgtd() {	# IMG PORT
	local i
	mkdir -p "$BENCH_DIR/tgt-run"
	# the "control port" only names the socket under our private /run
	TGT_CPORT=$((1000 + $2 % 30000))
	start_server tgtd "$2" unshare -m --propagation private sh -c \
		'mount --bind "$0" /run && exec "$@"' "$BENCH_DIR/tgt-run" \
		tgtd -f -C "$TGT_CPORT" --iscsi portal=127.0.0.1:"$2" || return 1
	for ((i = 0; i < 100; i++)); do
		tgt_ns tgtadm -C "$TGT_CPORT" --lld iscsi --op show --mode target \
			>/dev/null 2>&1 && break
		sleep 0.1
	done
	tgt_adm --op new --mode target --tid 1 -T "$BENCH_IQN" &&
		tgt_adm --op new --mode logicalunit --tid 1 --lun 1 -b "$1" \
			${TGT_BSOFLAGS:+--bsoflags "$TGT_BSOFLAGS"} &&
		tgt_adm --op update --mode logicalunit --tid 1 --lun 1 \
			--params thin_provisioning=1 &&
		tgt_adm --op bind --mode target --tid 1 -I ALL
}

# Seconds (float) that a command takes.
time_cmd() {
	local s e
	s=$(date +%s.%N)
	"$@" >/dev/null 2>&1 || { echo "FAILED"; return 1; }
	e=$(date +%s.%N)
	awk -v s="$s" -v e="$e" 'BEGIN {printf "%.3f", e - s}'
}

ratio() {	# A B -> A/B with two decimals, "-" when unknown
	awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || a == "-" || b == "-" || b == 0 || a == "FAILED" || b == "FAILED") print "-"; else printf "%.2f", a / b }'
}

# Reads back as zeroes? ("yes"/"NO")
is_zero_file() {	# FILE OFFSET LEN
	if cmp -s -n "$3" <(tail -c +"$(($2 + 1))" "$1") /dev/zero; then echo yes; else echo NO; fi
}

machine_info() {
	echo "- machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB RAM, $(uname -srm)"
	echo "- filesystem under test: $(df -T "${BENCH_TMP:-/var/tmp}" | awk 'NR==2 {print $2 " on " $1}')"
	echo "- blkstack: $(git -C "$BENCH_ROOT" rev-parse --short HEAD 2>/dev/null)"
	echo "- servers in the data-path and latency rows: $(bench_servers); ${JOB_SECONDS} s per fio job$([ "$BENCH_QUICK" = 1 ] && echo ", BENCH_QUICK (a trial, not results)")"
	echo "- peers: $(nbdkit --version 2>/dev/null | head -1); $(qemu-nbd --version | head -1); $(fio --version); $(qemu-io --version | head -1)$(command -v tgtd >/dev/null && echo "; tgtd $(tgtd --version 2>/dev/null); libiscsi-bin $(dpkg-query -W -f '${Version}' libiscsi-bin 2>/dev/null)")"
}

# ---- rows that compare blkstackd with its peers ----------------------------

# blkstackd runs twice per row, with `threads = 1` and `threads = 2`
# (the [daemon] key, docs/daemon.md), so that the gain of a second I/O
# thread is shown on this 2-core machine. BENCH_SERVERS overrides the list,
# e.g. "blkstackd nbdkit qemu-nbd" for blkstackd with its defaults;
# blkstackd-tN-pUS also sets `poll_us = US` (e.g. blkstackd-t2-p0);
# blkstackd-tN-epoll sets `event_loop = epoll` (the I/O threads wait in
# epoll_wait instead of io_uring).
bench_servers() {
	echo "${BENCH_SERVERS:-blkstackd-t1 blkstackd-t2 nbdkit qemu-nbd}"
}

server_label() {	# SERVER -> the name a table shows
	case $1 in
	blkstackd-t*-epoll) local t=${1#blkstackd-t}
		echo "blkstackd t${t%%-*} epoll" ;;
	blkstackd-t*-p*) local t=${1#blkstackd-t}
		echo "blkstackd t${t%%-*} poll ${t#*-p}" ;;
	blkstackd-t*) echo "blkstackd t${1#blkstackd-t}" ;;
	*) echo "$1" ;;
	esac
}

start_named() {	# SERVER IMG PORT
	case $1 in
	blkstackd) start_blkstackd "$2" "$3" ;;
	blkstackd-t*-epoll) local t=${1#blkstackd-t}
		BD_THREADS=${t%%-*} BD_EVENT_LOOP=epoll start_blkstackd "$2" "$3" ;;
	blkstackd-t*-p*) local t=${1#blkstackd-t}
		BD_THREADS=${t%%-*} BD_POLL_US=${t#*-p} start_blkstackd "$2" "$3" ;;
	blkstackd-t*) BD_THREADS=${1#blkstackd-t} start_blkstackd "$2" "$3" ;;
	nbdkit) start_nbdkit "$2" "$3" ;;
	qemu-nbd) start_qemu_nbd "$2" "$3" ;;
	*) echo "bench: unknown server $1" >&2; return 1 ;;
	esac
}

# fio's nbd engine against 127.0.0.1:PORT/vol0, JSON into OUT; total
# latency percentiles (submission to completion) are reported.
fio_nbd() {	# PORT OUT FIO_ARGS...
	local port=$1 out=$2
	shift 2
	timeout -k 5 $((JOB_SECONDS + CLIENT_TIMEOUT)) \
		fio --output-format=json --output="$out" --name=bench --ioengine=nbd \
		--uri="nbd://127.0.0.1:$port/vol0" --lat_percentiles=1 \
		--time_based --runtime="$JOB_SECONDS" --ramp_time=1 \
		--group_reporting "$@" >/dev/null 2>"$out.err"
}

# Prints: iops mibs p50_us p99_us gib_moved (reads and writes summed; the
# percentiles are the worse direction's)
fio_summary() {	# JSON
	jq -r '[.jobs[0].read, .jobs[0].write] | map(select(.io_bytes > 0)) as $d
		| ($d | map(.lat_ns.percentile // .clat_ns.percentile // {})) as $p
		| [($d | map(.iops) | add // 0), ($d | map(.bw_bytes) | add // 0),
		   ($p | map(.["50.000000"] // 0) | max // 0),
		   ($p | map(.["99.000000"] // 0) | max // 0),
		   ($d | map(.io_bytes) | add // 0)] | @tsv' "$1" |
		awk '{ printf "%.0f %.1f %.0f %.0f %.3f\n", $1, $2 / 1048576, $3 / 1000, $4 / 1000, $5 / 1073741824 }'
}

# One row group: the same fio job (FIO_ARGS) against every server of
# SERVERS (an array the caller sets), a fresh server start per run so that
# its CPU time and peak RSS belong to that run alone. A different server
# goes first in each group (ROW counts groups), and the dirty data of the
# previous run is written back before the next starts: the host's
# writeback must not favour whoever runs first.
# Fills R_IOPS R_MIBS R_P50 R_P99 R_CPG (CPU s/GiB) R_RSS (KiB), keyed
# by server; "FAILED"/"-" where fio failed.
declare -A R_IOPS=() R_MIBS=() R_P50=() R_P99=() R_CPG=() R_RSS=()
run_row() {	# ROW IMG FIO_ARGS...
	local row=$1 img=$2 k s port out iops mibs p50 p99 moved cpu rss
	shift 2
	R_IOPS=() R_MIBS=() R_P50=() R_P99=() R_CPG=() R_RSS=()
	for ((k = 0; k < ${#SERVERS[@]}; k++)); do
		s=${SERVERS[$(((k + row) % ${#SERVERS[@]}))]}
		sync
		sleep 1
		port=$(free_port)
		out=$BENCH_DIR/run.$row.$s.json
		if start_named "$s" "$img" "$port" && fio_nbd "$port" "$out" "$@"; then
			read -r iops mibs p50 p99 moved <<<"$(fio_summary "$out")"
		else
			iops=FAILED mibs=- p50=- p99=- moved=0
		fi
		read -r cpu rss <<<"$(stop_server)"
		R_IOPS[$s]=$iops R_MIBS[$s]=$mibs R_P50[$s]=$p50 R_P99[$s]=$p99
		R_CPG[$s]=$(awk -v c="$cpu" -v g="$moved" 'BEGIN { if (g > 0) printf "%.2f", c / g; else print "-" }')
		R_RSS[$s]=$rss
	done
}

mib() {	# KIB -> MiB with one decimal
	awk -v k="$1" 'BEGIN { if (k == "" || k == "-") print "-"; else printf "%.1f", k / 1024 }'
}

# The three ratio cells of SERVER in the group run_row filled: throughput
# (IOPS) against the best of nbdkit and qemu-nbd, CPU s/GiB against the
# lowest of theirs, peak RSS against nbdkit's. Empty cells for a peer.
# A blkstackd row that misses a target (below 1.0x, above the best peer's
# CPU per GiB, above 1.5x nbdkit's RSS) is recorded for the Targets
# summary as "DESC, LABEL: what".
ratio_cells() {	# SERVER DESC
	local s=$1 best cpu_best rt rc rr joined miss=()
	case $s in
	blkstackd*) ;;
	*) echo " | | |"; return ;;
	esac
	best=$(printf '%s\n' "${R_IOPS[nbdkit]:-}" "${R_IOPS[qemu-nbd]:-}" | grep -E '^[0-9.]+$' | sort -g | tail -1)
	cpu_best=$(printf '%s\n' "${R_CPG[nbdkit]:-}" "${R_CPG[qemu-nbd]:-}" | grep -E '^[0-9.]+$' | sort -g | head -1)
	rt=$(ratio "${R_IOPS[$s]}" "$best")
	rc=$(ratio "${R_CPG[$s]}" "$cpu_best")
	rr=$(ratio "${R_RSS[$s]}" "${R_RSS[nbdkit]:-}")
	if [ "${R_IOPS[$s]}" = FAILED ]; then
		miss+=("failed")
		rc=- rr=-
	fi
	awk -v r="$rt" 'BEGIN { exit !(r != "-" && r < 1.0) }' && miss+=("${rt}x best peer's throughput")
	awk -v r="$rc" 'BEGIN { exit !(r != "-" && r > 1.0) }' && miss+=("CPU ${R_CPG[$s]} s/GiB vs best peer's $cpu_best (${rc}x)")
	awk -v r="$rr" 'BEGIN { exit !(r != "-" && r > 1.5) }' && miss+=("peak RSS $(mib "${R_RSS[$s]}") MiB = ${rr}x nbdkit's")
	if [ ${#miss[@]} -gt 0 ]; then
		joined=$(printf '%s; ' "${miss[@]}")
		target_miss "$2, $(server_label "$s"): ${joined%; }"
	fi
	echo " $rt | $rc | $rr |"
}

# The Targets summary: every row that missed a target. run.sh sets
# BENCH_TARGETS to one file for the whole run and prints it at the end;
# a script run alone prints its own (targets_summary at its end).
target_miss() {	# LINE
	echo "- $1" >>"${BENCH_TARGETS:-$BENCH_DIR/targets}"
}

targets_summary() {	# [FILE]
	local f=${1:-$BENCH_DIR/targets}
	echo "### Targets"
	echo
	echo "blkstackd rows below 1.0x the best peer's throughput, above the best"
	echo "peer's CPU per GiB, or above 1.5x nbdkit's peak RSS; zeroing under load"
	echo "above its cost targets; iSCSI rows below 1.2x tgtd's throughput, above"
	echo "its CPU per GiB or 1.5x its peak RSS:"
	echo
	if [ -s "$f" ]; then
		cat "$f"
	else
		echo "- none: every row meets the targets"
	fi
}

# Called at the end of a script: its own summary when run alone.
own_targets_summary() {
	if [ -z "${BENCH_TARGETS:-}" ]; then
		echo
		targets_summary
	fi
}
