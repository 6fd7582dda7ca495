#!/usr/bin/env bash
# Task management across sessions (issue 13): on the threaded daemon, one
# session (B) has long WRITE SAME commands in flight on a LUN while
# another (A) sends LOGICAL UNIT RESET. The LU has one task set for all
# I_T nexuses: B's commands end with TASK ABORTED (or GOOD if they had
# finished), never hang; A's reset answers only after they are gone; both
# sessions then see UNIT ATTENTION 29h/03h. tests/tools/iscsi_tmf.c is
# the libiscsi client. make tsan runs this under ThreadSanitizer.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
TOOL=$BUILD/tools/iscsi_tmf
[[ -x $TOOL ]] || skip "$TOOL not built (make)"
daemon_setup
daemon_threads 2
cat >>"$T/d.ini" <<EOC
[device d]
type = file
path = $T/d.img
size = ${TMF_SIZE:-256M}
[export tmf]
type = iscsi
device = d
listen = 127.0.0.1:$PORT
max_sessions = 8
EOC
start_daemon "$T/d.ini"
URL=iscsi://127.0.0.1:$PORT/iqn.2026-12.org.blkstack:tmf/0

note "LU reset from session A while session B's WRITE SAMEs run"
out=$(timeout 180 "$TOOL" "$URL" ${ROUNDS:-8} 2>&1) || {
	tail -20 "$T/d.log" >&2
	fail "iscsi_tmf: $out"
}
echo "$out"
grep -q "task management function 5: response 0" "$T/d.log" ||
	fail "no LU reset answered in the log"
stop_daemon
echo "PASS: mt_iscsi_tmf"
