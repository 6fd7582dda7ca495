#!/usr/bin/env bash
# Asynchronous open (issue 11 item 5), with the error mapper's open_delay
# standing in for a remote driver that takes seconds to connect:
#  - the daemon is ready at once; an export on a live device is served
#    while another export's device is still opening;
#  - a client of the opening export is refused with the reason, and
#    served once the device (and the linear mapper waiting on it) is live;
#    the log names the change (state opening->live);
#  - `ls` and `info` show opening / failed and why; a device whose open
#    fails stays listed as failed, its export refuses with the reason;
#  - the CLI waits for an opening device before doing I/O on it.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need nbdinfo jq
daemon_setup
cat >>"$T/d.ini" <<EOC
[device ram]
type = mem
size = 16M
[device leg]
type = mem
size = 16M
[device slow]
type = error
size = 32M
ops = discard
open_delay = 6000
[device lin]
type = linear
devices = slow leg
[device bad]
type = error
size = 8M
open_delay = 300
open_error = ETIMEDOUT
[export ram]
type = nbd
device = ram
listen = 127.0.0.1:$PORT
[export lin]
type = nbd
device = lin
listen = 127.0.0.1:$PORT
[export bad]
type = nbd
device = bad
listen = 127.0.0.1:$PORT
EOC
t0=$(date +%s%N)
start_daemon "$T/d.ini"
U=nbd://127.0.0.1:$PORT
note "a live export is served while another device opens"
[[ $(nbd_flag "$U/ram" export-size) == 16777216 ]] || fail "ram not served"
ms=$((($(date +%s%N) - t0) / 1000000))
((ms < 4000)) || fail "ram served only after $ms ms (the slow open takes 6000)"
grep -q "export lin (nbd): device lin opening (waiting for component slow" "$T/d.log" ||
	fail "start-up log does not say lin is opening"

# go_error NAME: the error message of NBD_OPT_GO for NAME, as a client gets it
cat >"$T/go.py" <<'PY'
import socket, struct, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
def recvn(n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c: raise EOFError
        b += c
    return b
recvn(18); s.sendall(struct.pack(">I", 3))
n = sys.argv[2].encode()
s.sendall(struct.pack(">QII", 0x49484156454F5054, 7, 4 + len(n) + 2)
          + struct.pack(">I", len(n)) + n + struct.pack(">H", 0))
while True:
    _, _, typ, ln = struct.unpack(">QIII", recvn(20)); data = recvn(ln)
    if typ == 1: print("ACK"); break
    if typ & (1 << 31): print("ERR %d %s" % (typ & 0x7fffffff, data.decode())); break
PY
go_error() { timeout 20 python3 "$T/go.py" "$PORT" "$1"; }
note "the opening export refuses with the reason"
r=$(go_error lin)
[[ $r == "ERR 6 export 'lin': device lin is still opening: waiting for component slow"* ]] ||
	fail "GO lin while opening: $r"
ctl 0 ls
grep -Eq '^lin .* opening ' <<<"$OUT" || fail "ls: lin not opening: $OUT"
ctl 0 info --json lin
[[ $(jq -r .state <<<"$OUT") == opening ]] || fail "info: $OUT"
note "an I/O command in the daemon is refused with the state"
ctl 1 zeroout -l 1M lin
expect_err "lin: open: Resource temporarily unavailable (still opening (waiting for component slow (error: open_delay = 6000 ms)))"

note "live after the delay: served, with the size of both legs"
for ((i = 0; i < 150; i++)); do
	grep -q "export lin: device lin capabilities changed" "$T/d.log" && break
	sleep 0.1
done
grep -q "export lin: device lin capabilities changed (generation [0-9]*): state opening->live, size 0->50331648" "$T/d.log" ||
	{ tail "$T/d.log"; fail "no change line for lin"; }
[[ $(nbd_flag "$U/lin" export-size) == 50331648 ]] || fail "lin not served when live"
ctl 0 ls
grep -Eq '^lin .* 48(\.0)? MiB ' <<<"$OUT" || fail "ls after open: $OUT"

note "a failed open stays listed, with the reason"
ctl 0 info bad
grep -q "state .*failed: error: open failed on purpose (ETIMEDOUT)" <<<"$OUT" ||
	fail "info bad: $OUT"
r=$(go_error bad)
[[ $r == "ERR 6 export 'bad': device bad failed to open: error: open failed on purpose (ETIMEDOUT)" ]] ||
	fail "GO bad: $r"
stop_daemon

note "the CLI waits for an opening device before I/O"
grep -v '^\[export\|^type = nbd\|^device = \|^listen' "$T/d.ini" |
	sed '/^\[daemon\]/,/^$/d' >"$T/c.ini"
t0=$(date +%s%N)
run_bs 0 -c "$T/c.ini" zeroout -l 1M lin
ms=$((($(date +%s%N) - t0) / 1000000))
((ms >= 5000)) || fail "zeroout did not wait for lin ($ms ms)"
run_bs 1 -c "$T/c.ini" zeroout -l 1M bad
expect_err "bad: open: No such device or address (failed to open: error: open failed on purpose (ETIMEDOUT))"
echo PASS
