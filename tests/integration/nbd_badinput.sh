#!/usr/bin/env bash
# Bad input from a raw NBD client (tests/integration/lib/nbd_raw.py):
# protocol errors are answered per the NBD protocol or close only that
# connection; nothing unacknowledged is written; other clients go on.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need python3
daemon_setup
cat >>"$T/d.ini" <<EOC
[device disk]
type = file
path = $T/disk.img
size = 64M

[export disk]
type = nbd
device = disk
listen = 127.0.0.1:$PORT
EOC
start_daemon "$T/d.ini"
timeout 120 python3 "$(dirname "$0")/lib/nbd_raw.py" 127.0.0.1 "$PORT" disk \
	$((64 << 20)) || fail "raw client cases failed"
# the daemon is alive and answers
ctl 0 ls
[[ $OUT == *disk* ]] || fail "daemon not answering after bad input: $OUT"
# a client negotiating while the daemon stops: the option it was sending
# is answered NBD_REP_ERR_SHUTDOWN (not a dropped connection), then EOF
timeout 30 python3 "$(dirname "$0")/lib/nbd_raw.py" 127.0.0.1 "$PORT" disk \
	$((64 << 20)) --stop-while-negotiating "$DPID" ||
	fail "an option sent while stopping was not answered NBD_REP_ERR_SHUTDOWN"
stop_daemon
echo "PASS"
