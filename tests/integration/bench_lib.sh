#!/usr/bin/env bash
# The benchmark helpers (bench/lib.sh) without servers or fio: ratio
# columns and the Targets summary from made-up rows, a server that dies at
# start-up fails fast, and every bench script parses. Seconds, no I/O.
# check: alone (wall-time bounds of 3 and 5 s on the bench helpers)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
. bench/lib.sh
BENCH_DIR=$(mktemp -d "${TMPDIR:-/tmp}/bench-lib.XXXXXX")
trap 'rm -rf "$BENCH_DIR"' EXIT
unset BENCH_TARGETS
fails=0
check() {	# WHAT GOT WANT
	if [ "$2" != "$3" ]; then
		echo "FAIL: $1: got '$2', want '$3'"
		fails=$((fails + 1))
	fi
}

for f in bench/*.sh; do
	bash -n "$f" || { echo "FAIL: $f does not parse"; fails=$((fails + 1)); }
done

check "ratio" "$(ratio 3 2)" "1.50"
check "ratio of unknown" "$(ratio - 2)" "-"
check "ratio of FAILED" "$(ratio FAILED 2)" "-"
check "ratio by zero" "$(ratio 3 0)" "-"
check "mib" "$(mib 3072)" "3.0"
check "default servers" "$(bench_servers)" "blkstackd-t1 blkstackd-t2 nbdkit qemu-nbd"
check "label" "$(server_label blkstackd-t2)" "blkstackd t2"
check "pick (full)" "$(BENCH_QUICK=0 pick a b)" "b"
check "pick (quick)" "$(BENCH_QUICK=1 pick a b)" "a"

# fio's JSON: reads and writes summed, the worse direction's percentiles
# (total latency when fio has them, else completion latency)
cat >"$BENCH_DIR/fio.json" <<'JSON'
{"jobs": [{"read": {"io_bytes": 1073741824, "iops": 1000.4, "bw_bytes": 1048576,
  "lat_ns": {"percentile": {"50.000000": 20000, "99.000000": 90000}}},
 "write": {"io_bytes": 536870912, "iops": 500.2, "bw_bytes": 2097152,
  "clat_ns": {"percentile": {"50.000000": 30000, "99.000000": 80000}}}}]}
JSON
check "fio_summary" "$(fio_summary "$BENCH_DIR/fio.json")" "1501 3.0 30 90 1.500"
port=$(free_port)
check "free_port is a port" "$([[ $port =~ ^[0-9]+$ ]] && ((port >= 20000 && port < 32000)) && echo ok)" ok

# a row that meets every target: ratios shown, nothing recorded
R_IOPS=([blkstackd-t1]=1200 [nbdkit]=1000 [qemu-nbd]=900)
R_CPG=([blkstackd-t1]=0.40 [nbdkit]=0.50 [qemu-nbd]=0.45)
R_RSS=([blkstackd-t1]=6144 [nbdkit]=4096 [qemu-nbd]=8192)
check "cells, on target" "$(ratio_cells blkstackd-t1 "w, 1 conn")" " 1.20 | 0.89 | 1.50 |"
check "no miss recorded" "$(cat "$BENCH_DIR/targets" 2>/dev/null)" ""
check "peer cells" "$(ratio_cells nbdkit "w, 1 conn")" " | | |"

# below the best peer (qemu-nbd here), above the lowest CPU, above 1.5x RSS
R_IOPS=([blkstackd-t2]=900 [nbdkit]=800 [qemu-nbd]=1000)
R_CPG=([blkstackd-t2]=0.60 [nbdkit]=0.50 [qemu-nbd]=0.70)
R_RSS=([blkstackd-t2]=8192 [nbdkit]=4096 [qemu-nbd]=1024)
check "cells, three misses" "$(ratio_cells blkstackd-t2 "seq-write, 4 conn")" " 0.90 | 1.20 | 2.00 |"
check "misses recorded" "$(cat "$BENCH_DIR/targets")" \
	"- seq-write, 4 conn, blkstackd t2: 0.90x best peer's throughput; CPU 0.60 s/GiB vs best peer's 0.50 (1.20x); peak RSS 8.0 MiB = 2.00x nbdkit's"

# a failed peer is left out of "best"; a failed blkstackd row says so
rm -f "$BENCH_DIR/targets"
R_IOPS=([blkstackd]=FAILED [nbdkit]=FAILED [qemu-nbd]=1000)
R_CPG=([blkstackd]=- [nbdkit]=- [qemu-nbd]=0.70)
R_RSS=([blkstackd]=2048 [nbdkit]=2048 [qemu-nbd]=1024)
check "cells, failed" "$(ratio_cells blkstackd "r, 1 conn")" " - | - | - |"
check "failed recorded" "$(cat "$BENCH_DIR/targets")" "- r, 1 conn, blkstackd: failed"
targets_summary | grep -q "^- r, 1 conn, blkstackd: failed" || { echo "FAIL: summary"; fails=$((fails + 1)); }
rm -f "$BENCH_DIR/targets"
targets_summary | grep -q "^- none" || { echo "FAIL: empty summary"; fails=$((fails + 1)); }

# a server that exits at once fails its start within a second or two, not
# after the whole 15 s wait (it used to take minutes on a loaded machine)
port=$(free_port)
s=$SECONDS
if start_server dead "$port" sh -c 'echo "no such key" >&2; exit 1' 2>"$BENCH_DIR/err"; then
	echo "FAIL: start_server of a dead server succeeded"
	fails=$((fails + 1))
fi
wait "$SERVER_PID" 2>/dev/null
check "dead server fails fast" "$(((SECONDS - s) <= 3))" 1
grep -q "no such key" "$BENCH_DIR/err" || { echo "FAIL: the server's words are not shown"; fails=$((fails + 1)); }

# a server that ignores SIGTERM is killed after STOP_SECONDS, and a client
# that a server never answers is stopped by CLIENT_TIMEOUT
port=$(free_port)
start_server deaf "$port" python3 -c "
import signal, socket, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
s = socket.socket(); s.bind(('127.0.0.1', $port)); s.listen()
time.sleep(60)" || { echo "FAIL: start of the deaf server"; fails=$((fails + 1)); }
s=$SECONDS
STOP_SECONDS=1 stop_server >/dev/null 2>&1
check "deaf server killed" "$(((SECONDS - s) <= 5))" 1
kill -0 "$SERVER_PID" 2>/dev/null && { echo "FAIL: deaf server alive"; kill "$SERVER_PID"; fails=$((fails + 1)); }
s=$SECONDS
CLIENT_TIMEOUT=1 bounded sleep 30
check "bounded client's status" "$?" 124
check "bounded client stopped" "$(((SECONDS - s) <= 3))" 1

if ((fails)); then
	exit 1
fi
echo PASS
