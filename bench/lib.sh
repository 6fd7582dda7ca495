# shellcheck shell=bash
# Shared helpers for the benchmarks: servers started here are stopped here,
# by PID; everything listens on 127.0.0.1; every job is bounded in time.

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$BENCH_ROOT/build}
BLKSTACK=$BUILD/blkstack
BLKSTACKD=$BUILD/blkstackd
JOB_SECONDS=${JOB_SECONDS:-10}	# each fio job; the issue caps it at 30 s
[ "$JOB_SECONDS" -le 30 ] || JOB_SECONDS=30

declare -a BENCH_PIDS=()

bench_cleanup() {
	local pid
	for pid in "${BENCH_PIDS[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${BENCH_PIDS[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	BENCH_PIDS=()
	[ -n "${BENCH_DIR:-}" ] && rm -rf "$BENCH_DIR"
}

# A scratch directory on the real filesystem (not tmpfs): the point is the
# host filesystem's behaviour.
bench_dir() {
	BENCH_DIR=$(mktemp -d "${BENCH_TMP:-/var/tmp}/blkstack-bench.XXXXXX")
	trap bench_cleanup EXIT
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_port() {	# PORT [TIMEOUT_S]
	local i
	for ((i = 0; i < ${2:-10} * 10; i++)); do
		if python3 -c "import socket,sys; s=socket.socket(); s.settimeout(0.2); sys.exit(s.connect_ex(('127.0.0.1',$1)))" 2>/dev/null; then
			return 0
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
	wait_port "$port" 15
}

# Stop the server started last; prints "CPU_SECONDS PEAK_RSS_KB".
stop_server() {
	local child i
	# time(1) forwards nothing: signal its child, the server itself
	child=$(pgrep -P "$SERVER_PID" | head -1)
	[ -n "$child" ] && kill -TERM "$child" 2>/dev/null
	# often called as $(stop_server): a subshell cannot wait(1) for it
	for ((i = 0; i < 600; i++)); do
		kill -0 "$SERVER_PID" 2>/dev/null || break
		sleep 0.05
	done
	wait "$SERVER_PID" 2>/dev/null || true
	awk -F': ' '/User time/ {u=$2} /System time/ {s=$2}
		/Maximum resident set size/ {r=$2}
		END {printf "%.2f %d\n", u+s, r}' "$SERVER_TIME"
}

blkstackd_conf() {	# FILE IMG PORT [extra device lines]
	cat >"$1" <<CONF
[daemon]
state_dir = $BENCH_DIR/state
[device vol0]
type = file
path = $2
${4:-}
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
	start_server qemu-nbd "$2" qemu-nbd -f raw -x vol0 -b 127.0.0.1 -p "$2" -e 8 -t --aio=io_uring "$1"
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
	awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0 || a == "FAILED" || b == "FAILED") print "-"; else printf "%.2f", a / b }'
}

# Reads back as zeroes? ("yes"/"NO")
is_zero_file() {	# FILE OFFSET LEN
	if cmp -s -n "$3" <(tail -c +"$(($2 + 1))" "$1") /dev/zero; then echo yes; else echo NO; fi
}

machine_info() {
	echo "- machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB RAM, $(uname -srm)"
	echo "- filesystem under test: $(df -T "${BENCH_TMP:-/var/tmp}" | awk 'NR==2 {print $2 " on " $1}')"
	echo "- blkstack: $(git -C "$BENCH_ROOT" rev-parse --short HEAD 2>/dev/null)"
	echo "- peers: $(nbdkit --version 2>/dev/null | head -1); $(qemu-nbd --version | head -1); $(fio --version); $(qemu-io --version | head -1)"
}
