#!/usr/bin/env bash
# blkstackd when clients misbehave or resources run out:
#  - a client that sends WRITE + DISC and closes at once (UNIX and TCP)
#    while the daemon is busy still gets its write on the device;
#  - out of file descriptors, the daemon pauses accepting (a few log
#    lines, no spinning) and serves again once clients go;
#  - a stop signal during a control-socket command still answers it;
#  - a control client that hangs up mid-command does not make the daemon
#    spin, and the command still completes.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need python3 qemu-io
daemon_setup
cat >>"$T/d.ini" <<EOC
[device ram]
type = mem
size = 64M
[device slow]
type = file
path = $T/slow.img
size = 2G
zeroes = none
direct = 1
[export ram]
type = nbd
device = ram
listen = 127.0.0.1:$PORT
socket = $T/nbd.sock
EOC
start_daemon "$T/d.ini"
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

note "WRITE + DISC + close while the daemon is stopped: the write lands"
cat >"$T/wd.py" <<'PY'
import socket, struct, sys
addr = sys.argv[1]
if addr.startswith("/"):
    s = socket.socket(socket.AF_UNIX); s.connect(addr)
else:
    h, p = addr.rsplit(":", 1); s = socket.create_connection((h, int(p)))
def recvn(n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c: raise EOFError
        b += c
    return b
recvn(18); s.sendall(struct.pack(">I", 3))
n = b"ram"
s.sendall(struct.pack(">QII", 0x49484156454F5054, 7, 4 + len(n) + 2) + struct.pack(">I", len(n)) + n + struct.pack(">H", 0))
while True:
    magic, opt, typ, ln = struct.unpack(">QIII", recvn(20)); recvn(ln)
    if typ == 1: break
off, pat = int(sys.argv[2]), int(sys.argv[3])
if sys.argv[4] == "go":
    print("ready", flush=True); sys.stdin.readline()
s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 1, 1, off, 65536) + bytes([pat]) * 65536
          + struct.pack(">IHHQQI", 0x25609513, 0, 2, 2, 0, 0))
s.close()
PY
for how in unix tcp; do
	if [[ $how == unix ]]; then
		addr=$T/nbd.sock off=$((1 << 20)) pat=$((0x61))
	else
		addr=127.0.0.1:$PORT off=$((2 << 20)) pat=$((0x62))
	fi
	coproc WD { python3 "$T/wd.py" "$addr" "$off" "$pat" go; }
	read -r line <&"${WD[0]}"
	kill -STOP "$DPID"
	echo >&"${WD[1]}"
	wait "${WD_PID:-}" 2>/dev/null || true
	kill -CONT "$DPID"
	sleep 0.3
	timeout 30 qemu-io -f raw "nbd+unix:///ram?socket=$T/nbd.sock" \
		-c "read -P $pat $off 64k" >"$T/q" 2>&1 || true
	grep -q 'Pattern verification failed' "$T/q" && fail "$how: WRITE before DISC+close was lost"
	grep -q "^read 65536/65536" "$T/q" || fail "$how: read back failed: $(cat "$T/q")"
done

# wait until the daemon has accepted a control client (a slow, loaded
# machine can take longer than any fixed sleep to get there)
ctl_client_in() {
	local i
	for ((i = 0; i < 200; i++)); do
		(($(ss -xH state connected 2>/dev/null | grep -cF "$CTL") > 0)) && return 0
		sleep 0.05
	done
	return 1
}

# zeroout_under_way: the CLI's zeroout of slow has written its first
# zero buffers (slow.img, punched empty before, has blocks again): it is
# mid-command now, whatever the machine's speed (a fixed sleep let a
# fast disk finish 2 GiB first, and a loaded one not start)
zeroout_under_way() {
	local i
	for ((i = 0; i < 400; i++)); do
		(($(stat -c %b "$T/slow.img") > 0)) && return 0
		sleep 0.025
	done
	return 1
}

note "a stop signal during a control command: the command answers"
fallocate -p -o 0 -l 2G "$T/slow.img"
"$BS" -s "$CTL" zeroout -l 2G slow >"$T/zo.out" 2>&1 &
ZP=$!
ctl_client_in || fail "the zeroout's control client never connected"
zeroout_under_way || fail "the zeroout wrote nothing in 10 s"
kill -TERM "$DPID"
zr=0; wait "$ZP" || zr=$?
((zr == 0)) || fail "zeroout over -s during SIGTERM: exit $zr: $(cat "$T/zo.out")"
for ((i = 0; i < 400; i++)); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.05; done
wait "$DPID" || fail "daemon exit after SIGTERM"
DPID=
check_daemon_log
sig=$(grep -n 'SIGTERM: stopping' "$T/d.log" | tail -1 | cut -d: -f1)
done_at=$(grep -n 'control: blkstack zeroout -l 2G slow' "$T/d.log" | tail -1 | cut -d: -f1)
((sig < done_at)) || fail "the zeroout finished before the signal: the case was not tested"

note "a control client that hangs up mid-command: no spinning"
start_daemon "$T/d.ini"
fallocate -p -o 0 -l 2G "$T/slow.img"
"$BS" -s "$CTL" zeroout -l 2G slow >/dev/null 2>&1 &
ZP=$!
ctl_client_in || fail "the zeroout's control client never connected"
zeroout_under_way || fail "the zeroout wrote nothing in 10 s"
kill -0 "$ZP" 2>/dev/null || fail "the control zeroout ended before it could be interrupted"
kill -KILL "$ZP"; wait "$ZP" 2>/dev/null || true
t0=$(cpu_ticks "$DPID")
sleep 2
t1=$(cpu_ticks "$DPID")
ticks=$((t1 - t0))
# a spinning loop burns ~all of 2 s (200 ticks); the zeroout itself little
((ticks < 120)) || fail "daemon used $ticks ticks in 2 s after its control client hung up"
ctl 0 ls
stop_daemon

note "out of file descriptors: accepting pauses, then resumes"
(ulimit -n 64; exec "$BSD" -f -c "$T/d.ini") >"$T/fd.log" 2>&1 &
DPID=$!
for ((i = 0; i < 200; i++)); do grep -q 'ready:' "$T/fd.log" && break; sleep 0.05; done
python3 - "$PORT" <<'PY' || fail "client flood script"
import socket, sys, time
port = int(sys.argv[1]); socks = []
for i in range(120):
    try:
        socks.append(socket.create_connection(("127.0.0.1", port), timeout=2))
    except OSError:
        pass
time.sleep(1.5)
for s in socks: s.close()
time.sleep(0.5)
PY
lines=$(grep -c 'accept: Too many open files' "$T/fd.log" || true)
((lines >= 1 && lines <= 50)) || fail "$lines 'Too many open files' lines (expected a few)"
timeout 30 nbdinfo --size "nbd://127.0.0.1:$PORT/ram" >/dev/null ||
	{ tail -5 "$T/fd.log"; fail "not serving after descriptors freed up"; }
kill -TERM "$DPID"; wait "$DPID" || fail "exit after the fd flood"
DPID=
cat "$T/fd.log" >>"$T/d.log"
check_daemon_log
echo "PASS"
