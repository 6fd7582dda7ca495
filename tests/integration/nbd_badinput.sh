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
timeout 30 python3 - 127.0.0.1 "$PORT" "$DPID" <<'EOF' ||
import os, signal, socket, struct, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
def recvn(n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError("closed after %d of %d bytes" % (len(b), n))
        b += c
    return b
recvn(18)
s.sendall(struct.pack(">I", 3))
data = struct.pack(">I", 4) + b"disk" + struct.pack(">H", 0)
s.sendall(struct.pack(">QII", 0x49484156454F5054, 6, len(data)) + data[:3])
time.sleep(0.3)
os.kill(int(sys.argv[3]), signal.SIGTERM)
time.sleep(0.5)
s.sendall(data[3:])
magic, opt, typ, ln = struct.unpack(">QIII", recvn(20))
assert (opt, typ) == (6, 0x80000007), "reply %d 0x%x" % (opt, typ)
assert b"shutting down" in recvn(ln)
assert s.recv(1) == b"", "not closed after the answer"
EOF
	fail "an option sent while stopping was not answered NBD_REP_ERR_SHUTDOWN"
stop_daemon
echo "PASS"
