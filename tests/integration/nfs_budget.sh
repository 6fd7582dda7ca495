#!/usr/bin/env bash
# The NFS server takes its calls' bytes from the server-wide in-flight
# budget ([daemon] max_inflight), as NBD, iSCSI and NVMe/TCP do
# (docs/nfs.md "Memory"):
#  - a daemon with max_inflight = 64M serves twelve bench/tools/nfsio
#    clients (libnfs's async API) at once, each writing its own 16 MiB
#    file in 1 MiB WRITEs with 16 in flight, then all reading theirs back
#    the same way (each call asks for its record plus its reply's room:
#    about 400 MiB at once for the writes, 200 MiB for the reads); every
#    byte verified by nfsio, the host files equal, one read back again
#    by nfs-cat; at the stop the daemon's budget line shows a peak at
#    most 64 MiB, above half of it, and calls that waited;
#  - a second daemon (stall_timeout = 4) with 40 connections that each
#    send a record header of 1 MiB and half of it, then stall: the budget
#    fills, the stalled holders are closed after stall_timeout because
#    others wait (a log line naming the connection and the reason), and
#    a bystander's verified writes and reads are served.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
source "$(dirname "$0")/lib/nfs.bash"
need python3 nfs-cat
[[ $EUID == 0 ]] || skip "the directory backend needs CAP_DAC_READ_SEARCH (run as root)"
daemon_setup
daemon_threads 2
nfsio_build || skip "nfsio not built ($(nfsio_why))"
LIMIT=$((64 << 20))
NCLI=12
DIR=$T/dir
mkdir -p "$DIR/d"
sed -i '/^\[daemon\]/a max_inflight = 64M' "$T/d.ini"
cp "$T/d.ini" "$T/s.ini"
nfs_dir_export "$T/d.ini" e "$DIR" "$PORT"
start_daemon "$T/d.ini"
grep -q 'in-flight payload budget 64 MiB' "$T/d.log" || fail "budget not logged"
url() { echo "nfs://127.0.0.1/d/$1?version=4&nfsport=$PORT"; }

# all clients at once; each one's output in $T/io.N
run_all() { # OP
	local pids=() i rc=0
	for ((i = 0; i < NCLI; i++)); do
		timeout 120 "$NFSIO" -m seq -o "$1" -b 1M -q 16 -s 16M -C -V \
			"$(url "f$i")" >"$T/io.$1.$i" 2>&1 &
		pids+=($!)
	done
	for ((i = 0; i < NCLI; i++)); do
		wait "${pids[$i]}" || rc=$?
		grep -q ' errors=0 verified=yes' "$T/io.$1.$i" ||
			{ cat "$T/io.$1.$i" >&2; rc=1; }
	done
	((rc == 0)) || { tail -20 "$T/d.log" >&2; fail "nfsio $1: a client failed"; }
}
run_all write
for ((i = 0; i < NCLI; i++)); do
	[[ $(stat -c %s "$DIR/d/f$i") == $((16 << 20)) ]] || fail "f$i is not 16 MiB"
done
# nfsio's pattern depends on the offset only: every file holds the same
sums=$(md5sum "$DIR"/d/f* | awk '{print $1}' | sort -u | wc -l)
((sums == 1)) || fail "the $NCLI files differ ($sums checksums)"
run_all read
timeout 60 nfs-cat "$(url f3)" >"$T/back" 2>/dev/null || fail "nfs-cat"
cmp "$DIR/d/f3" "$T/back" || fail "nfs-cat: bytes differ"
note "$NCLI clients wrote and read 16 MiB each at 16 x 1 MiB in flight, verified"
grep -q 'no progress for' "$T/d.log" && fail "a connection was evicted"
stop_daemon
line=$(grep 'in-flight payload budget: peak' "$T/d.log") ||
	{ tail -20 "$T/d.log"; fail "no budget peak logged"; }
echo "$line"
read -r peak limit waits over < <(sed -E 's/.*peak ([0-9]+) bytes of ([0-9]+), ([0-9]+) requests waited, ([0-9]+) bytes taken above it.*/\1 \2 \3 \4/' <<<"$line")
((limit == LIMIT)) || fail "budget limit $limit, not $LIMIT"
((peak <= LIMIT && over == 0)) || fail "budget peak $peak (over $over) above the limit $LIMIT"
# without the NFS server's accounting nothing is taken and nothing waits
((peak > LIMIT / 2 && waits > 0)) || fail "the budget was not used (peak $peak, $waits waits)"

note "stalled holders are closed, a bystander is served"
PORT2=$(free_port)
sed -i '/^\[daemon\]/a stall_timeout = 4' "$T/s.ini"
nfs_dir_export "$T/s.ini" s "$DIR" "$PORT2"
start_daemon "$T/s.ini"
cat >"$T/stall.py" <<'PY'
import socket, struct, sys, time
port, n, hold = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
LEN = 1 << 20
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.setblocking(False)
    socks.append(s)
    try:   # the last fragment's mark, then half of its bytes
        s.send(struct.pack(">I", 0x80000000 | LEN) + bytes(LEN // 2))
    except BlockingIOError:
        pass   # waiting for the budget: the kernel holds the rest
print("stalling", flush=True)
time.sleep(hold)
PY
mkfifo "$T/stall.fifo"
python3 "$T/stall.py" "$PORT2" 40 40 >"$T/stall.fifo" 2>"$T/stall.err" &
SPID=$!
# its first line once all 40 are connected (EOF if it died)
read -r -t 20 ready <"$T/stall.fifo" && [[ $ready == stalling ]] ||
	{ cat "$T/stall.err"; fail "stallers did not connect"; }
start=$(date +%s)
N2="nfs://127.0.0.1/d/by?version=4&nfsport=$PORT2"
timeout 60 "$NFSIO" -m seq -o write -b 1M -q 4 -s 4M -C -V "$N2" >"$T/by.out" 2>&1 &&
	timeout 60 "$NFSIO" -m seq -o read -b 1M -q 4 -s 4M -C -V "$N2" >>"$T/by.out" 2>&1 ||
	{ cat "$T/by.out"; tail -20 "$T/d.log"; fail "bystander not served"; }
took=$(($(date +%s) - start))
grep -c ' errors=0 verified=yes' "$T/by.out" | grep -qx 2 ||
	{ cat "$T/by.out"; fail "bystander not verified"; }
note "bystander served after $took s"
grep -Eq 'nfs #[0-9]+ 127\.0\.0\.1:[0-9]+: closed: no progress for 4 s while holding [0-9]+ KiB of the in-flight budget' "$T/d.log" ||
	{ tail -20 "$T/d.log"; fail "no eviction logged"; }
kill "$SPID" 2>/dev/null || true
wait "$SPID" 2>/dev/null || true
stop_daemon
line=$(grep 'in-flight payload budget: peak' "$T/d.log" | tail -1)
read -r peak waits < <(sed -E 's/.*peak ([0-9]+) bytes of [0-9]+, ([0-9]+) requests waited.*/\1 \2/' <<<"$line")
((peak <= LIMIT && waits > 0)) || fail "stalled run: peak $peak, $waits waits"
echo "PASS: nfs_budget"
