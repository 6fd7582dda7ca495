#!/usr/bin/env bash
# The server-wide in-flight budget ([daemon] max_inflight, stall_timeout):
#  - twelve clients each send a 32 MiB WRITE and all but 1 MiB of its
#    payload, then stall: the daemon holds at most the budget (64 MiB) of
#    their payload, the rest waits in the kernel's socket buffers;
#  - a bystander is still served: the stalled holders are closed after
#    stall_timeout because others wait, and the log says why;
#  - a budget below the minimum is a config error naming the line.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need python3 qemu-io
daemon_setup
sed -i '/^\[daemon\]/a max_inflight = 64M\nstall_timeout = 4' "$T/d.ini"
cat >>"$T/d.ini" <<EOC
[device ram]
type = mem
size = 512M
[export ram]
type = nbd
device = ram
listen = 127.0.0.1:$PORT
EOC
start_daemon "$T/d.ini"
grep -q 'in-flight payload budget 64 MiB' "$T/d.log" || fail "budget not logged"
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$DPID/status"; }
# one bystander request first, so that lazily made buffers exist
timeout 20 qemu-io -f raw -c 'write -P 7 0 64k' "nbd://127.0.0.1:$PORT/ram" \
	>/dev/null || fail "bystander write before the attack"
base=$(rss_kib)

cat >"$T/stall.py" <<'PY'
import socket, struct, sys, threading, time
port, n, hold = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
LEN = 32 << 20
socks = []
def recvn(s, k):
    b = b""
    while len(b) < k:
        c = s.recv(k - len(b))
        if not c: raise EOFError
        b += c
    return b
def attack(i):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    socks.append(s)
    recvn(s, 18); s.sendall(struct.pack(">I", 3))
    name = b"ram"
    s.sendall(struct.pack(">QII", 0x49484156454F5054, 7, 4 + len(name) + 2)
              + struct.pack(">I", len(name)) + name + struct.pack(">H", 0))
    while True:
        _, _, typ, ln = struct.unpack(">QIII", recvn(s, 20)); recvn(s, ln)
        if typ == 1: break
    s.settimeout(hold)
    try:
        s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 1, i, i * LEN, LEN)
                  + bytes([i]) * (LEN - (1 << 20)))
    except (socket.timeout, OSError):
        pass   # waiting for the budget, or closed: either is fine
threads = [threading.Thread(target=attack, args=(i,)) for i in range(n)]
for t in threads: t.start()
print("attacking", flush=True)
for t in threads: t.join()
time.sleep(hold)
PY
python3 "$T/stall.py" "$PORT" 12 20 >"$T/stall.out" 2>&1 &
APID=$!
for ((i = 0; i < 100; i++)); do
	grep -q attacking "$T/stall.out" && break
	sleep 0.1
done
sleep 2
peak=0
for ((i = 0; i < 10; i++)); do
	r=$(rss_kib)
	((r > peak)) && peak=$r
	sleep 0.2
done
note "RSS grew by $(((peak - base) / 1024)) MiB under twelve stalled 31 MiB writes"
# the budget (64 MiB) plus slack for buffers and the allocator; without
# the budget this is twelve times 31 MiB
(((peak - base) < 112 * 1024)) || fail "daemon RSS grew by $(((peak - base) / 1024)) MiB (budget 64 MiB)"

note "a bystander is served: the stalled holders are closed"
start=$(date +%s)
timeout 30 qemu-io -f raw -c 'write -P 9 0 64k' -c 'read -P 9 0 64k' \
	"nbd://127.0.0.1:$PORT/ram" >"$T/by.out" 2>&1 ||
	{ cat "$T/by.out"; tail -20 "$T/d.log"; fail "bystander not served"; }
took=$(($(date +%s) - start))
note "bystander served after $took s"
# one eviction round: stall_timeout plus the watchdog's half period
((took <= 12)) || fail "bystander waited $took s (stall_timeout 4 s)"
grep -q 'no progress for 4 s while holding' "$T/d.log" ||
	{ tail -20 "$T/d.log"; fail "no eviction logged"; }
kill "$APID" 2>/dev/null || true
wait "$APID" 2>/dev/null || true
stop_daemon

note "a budget below 64M is refused with the place"
sed -i 's/^max_inflight = 64M/max_inflight = 1M/' "$T/d.ini"
if "$BSD" -f -c "$T/d.ini" >"$T/bad.log" 2>&1; then fail "1M budget accepted"; fi
grep -q "d.ini:2: max_inflight: 1048576 bytes is below the minimum of 64 MiB" "$T/bad.log" ||
	{ cat "$T/bad.log"; fail "wrong error for a small budget"; }
echo "PASS"
