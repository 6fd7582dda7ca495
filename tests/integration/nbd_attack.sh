#!/usr/bin/env bash
# Issue 10 item 12: connections that never finish the NBD handshake must
# not lock other clients out. Two attacks, each with a bystander (nbdinfo
# from 127.0.0.1) that must still be served:
#  1. many stalled handshakes fill a listener: the handshake timeout
#     closes them and the bystander gets in;
#  2. one peer address opening more than its share: the per-peer limit
#     refuses the rest at once and the bystander gets in while the hog
#     still holds its connections.
# Also: idle_timeout closes a client that went quiet after the handshake.
# Small limits and timeouts come from the config. The attackers bind
# 127.0.0.2 (any 127/8 address is local on Linux).
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need python3 nbdinfo
daemon_setup
STALL=$(dirname "$0")/lib/nbd_stall.py
P1=$PORT
P2=$(free_port)
P3=$(free_port)
cat >>"$T/d.ini" <<EOC
[device a]
type = mem
size = 16M

[device b]
type = mem
size = 16M

[device c]
type = mem
size = 16M

[export a]
type = nbd
device = a
listen = 127.0.0.1:$P1
max_connections = 32
max_connections_per_peer = 32
handshake_timeout = 1

[export b]
type = nbd
device = b
listen = 127.0.0.1:$P2
max_connections = 32
max_connections_per_peer = 8
handshake_timeout = 30

[export c]
type = nbd
device = c
listen = 127.0.0.1:$P3
idle_timeout = 1
EOC
start_daemon "$T/d.ini"

# can_serve URI: nbdinfo gets the export's size
can_serve() { timeout 10 nbdinfo --size "$1" >/dev/null 2>&1; }

# wait_ready FILE: the attacker holds its connections (bounded)
wait_ready() {
	local i
	for ((i = 0; i < 300; i++)); do
		[[ -s $1 ]] && return 0
		sleep 0.1
	done
	fail "attacker not ready after 30 s"
}

note "attack 1: 32 stalled handshakes fill the listener; the timeout frees it"
timeout 60 python3 "$STALL" 127.0.0.1 "$P1" 127.0.0.2 32 10 "$T/r1" >"$T/s1" &
SPID=$!
wait_ready "$T/r1"
[[ $(cat "$T/r1") == "accepted=32 refused=0" ]] ||
	fail "attack 1 did not fill the listener: $(cat "$T/r1")"
served=
for ((i = 0; i < 20; i++)); do
	if can_serve "nbd://127.0.0.1:$P1/a"; then
		served=$i
		break
	fi
	sleep 0.25
done
[[ -n $served ]] || fail "bystander locked out by stalled handshakes"
wait "$SPID" || fail "attacker 1 failed"
read -r line <"$T/s1"
[[ $line == "accepted=32 refused=0 closed=32 "* ]] ||
	fail "stalled handshakes not all closed by the server: $line"
grep -q 'handshake not finished in 1.0 s' "$T/d.log" ||
	fail "no log line for the handshake timeout"
grep -q 'max_connections = 32' "$T/d.log" ||
	fail "no log line for the refused bystander while the listener was full"

note "attack 2: one address takes its 8, the rest are refused, others served"
timeout 60 python3 "$STALL" 127.0.0.1 "$P2" 127.0.0.2 40 5 "$T/r2" >"$T/s2" &
SPID=$!
wait_ready "$T/r2"
[[ $(cat "$T/r2") == "accepted=8 refused=32" ]] ||
	fail "per-peer limit not applied: $(cat "$T/r2")"
# served at once, while the hog still holds its 8 (handshake timeout 30 s)
can_serve "nbd://127.0.0.1:$P2/b" || fail "bystander not served beside a hog"
can_serve "nbd://127.0.0.1:$P2/b" || fail "bystander not served twice"
wait "$SPID" || fail "attacker 2 failed"
read -r line <"$T/s2"
[[ $line == "accepted=8 refused=32 closed=0 "* ]] ||
	fail "the hog's accepted connections should still be open: $line"
grep -q 'max_connections_per_peer = 8' "$T/d.log" ||
	fail "no log line for the per-peer refusals"
n=$(grep -c 'refused 127.0.0.2' "$T/d.log" || true)
((n >= 1 && n < 32)) || fail "refusals not rate-limited: $n log lines"

note "idle_timeout: a client quiet after the handshake is closed"
timeout 30 python3 - 127.0.0.1 "$P3" <<'EOF' || fail "idle client not closed"
import socket, struct, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
def recvn(n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError
        b += c
    return b
recvn(18)
s.sendall(struct.pack(">I", 3))                       # FIXED_NEWSTYLE|NO_ZEROES
s.sendall(struct.pack(">QII", 0x49484156454F5054, 1, 1) + b"c")
recvn(10)                                             # size + flags
t0 = time.monotonic()
s.settimeout(5)
assert s.recv(1) == b"", "data instead of a close"
dt = time.monotonic() - t0
assert 0.8 <= dt <= 4, "closed after %.1f s" % dt
EOF
grep -q 'idle for 1.0 s' "$T/d.log" || fail "no log line for the idle timeout"

# the daemon is alive and answers
ctl 0 ls
stop_daemon
echo "PASS"
