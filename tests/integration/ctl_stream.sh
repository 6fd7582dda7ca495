#!/usr/bin/env bash
# Control replies stream (issue 10 item 9): a 20,000,000-byte file goes in
# with `fs put` and comes back byte-exact with `fs cat` through the daemon
# (the reply used to be cut to 16 MiB with exit 0), the daemon's memory
# stays bounded while it streams (VmHWM), a reply cut short by the daemon
# dying fails loudly, and a reader that stops early does not hurt the
# daemon.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need python3 sha256sum
daemon_setup
truncate -s 128M "$T/fs.img"
cat >>"$T/d.ini" <<EOC
[device v]
type = file
path = $T/fs.img

; served: fs commands that write are refused on a served device
[device e]
type = mem
size = 16M

[export e]
type = nbd
device = e
listen = 127.0.0.1:$PORT
EOC
start_daemon "$T/d.ini"
hwm() { awk '/^VmHWM:/ { print $2 * 1024 }' "/proc/$DPID/status"; }

note "fs put then fs cat of 20,000,000 bytes: byte-exact"
head -c 20000000 /dev/urandom >"$T/big"
ctl 0 fs mkfs v
ctl 0 fs put v "$T/big" /big
ctl 0 fs stat v /big
[[ $OUT == *20000000* ]] || fail "stat: $OUT"
before=$(hwm)
timeout 120 "$BS" -s "$CTL" fs cat v /big >"$T/back" 2>"$T/err" ||
	fail "fs cat exited $?: $(cat "$T/err")"
[[ ! -s $T/err ]] || fail "fs cat wrote errors: $(cat "$T/err")"
[[ $(stat -c %s "$T/back") == 20000000 ]] || fail "fs cat gave $(stat -c %s "$T/back") bytes"
[[ $(sha "$T/back") == $(sha "$T/big") ]] || fail "fs cat differs from what was put"
after=$(hwm)
note "daemon VmHWM: $((before >> 20)) MiB before cat, $((after >> 20)) MiB after"
# the whole reply held in memory took > 32 MiB (a memstream, then a copy);
# streaming holds 256 KiB of reply and fs cat's 4 MiB buffer (ASan's
# quarantine of freed memory adds some more)
((after - before < 24 << 20)) ||
	fail "the daemon's peak memory grew by $(((after - before) >> 20)) MiB streaming 19 MiB"

note "a slow reader: the command waits, the reply is still whole"
timeout 120 "$BS" -s "$CTL" fs cat v /big 2>"$T/err" |
	{ sleep 1; sha256sum | cut -d' ' -f1; } >"$T/sum"
[[ $(cat "$T/sum") == $(sha "$T/big") ]] || fail "slow reader got other bytes"

note "a reader that stops early: loud failure, the daemon keeps serving"
timeout 60 "$BS" -s "$CTL" fs cat v /big 2>"$T/err" | head -c 1000 >/dev/null ||
	true
ctl 0 ls
[[ $OUT == *v* ]] || fail "ls after an early close: $OUT"

note "the daemon dies mid-reply: the client says so and fails"
{
	r=0
	timeout 60 "$BS" -s "$CTL" fs cat v /big 2>"$T/err" || r=$?
	echo "$r" >"$T/rc"
} | {
	# kill once the reply has begun (a fixed sleep raced a slow
	# daemon under TSan, which had not answered yet): 64 KiB of it
	# are here, and 20 MB cannot all be in the socket buffers
	head -c 65536 >/dev/null
	kill -KILL "$DPID"
	cat >/dev/null
}
wait "$DPID" 2>/dev/null || true
DPID=
rc=$(cat "$T/rc")
((rc != 0)) || fail "a reply cut short exited 0"
grep -q 'cut short' "$T/err" || fail "no 'cut short' message: $(cat "$T/err")"
echo "PASS: ctl_stream"
