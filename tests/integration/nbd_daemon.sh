#!/usr/bin/env bash
# blkstackd as an operator meets it: one clear line and exit 1 for every
# bad start (unknown key, missing device, cycle, size mismatch, busy
# address, nothing to serve), going to the background with start-up errors
# still reported, the pid file and log file, `blkstack -s` errors, and the
# embedded default served on 127.0.0.1:10809.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need python3 nbdinfo jq
make_tmp
trap daemon_cleanup EXIT

# bad_start EXPECT... < CONFIG: blkstackd refuses, one line naming it all
bad_start() {
	local rc=0
	cat >"$T/bad.ini"
	timeout 30 "$BSD" -f -c "$T/bad.ini" >"$T/out" 2>"$T/err" || rc=$?
	ERR=$(cat "$T/err")
	((rc == 1)) || fail "bad config: exit $rc, expected 1: $ERR"
	[[ $ERR != *Sanitizer* ]] || fail "sanitizer: $ERR"
	expect_err "$@"
}

PORT=$(free_port)
note "bad configs: one line with file, line and reason"
bad_start bad.ini:4 "unknown key 'bogus'" <<EOC
[device a]
type = mem
size = 1G
bogus = 1
[export a]
type = nbd
device = a
listen = 127.0.0.1:$PORT
EOC
bad_start bad.ini:6 "device 'nosuch' does not exist" <<EOC
[device a]
type = mem
size = 1G
[export a]
type = nbd
device = nosuch
listen = 127.0.0.1:$PORT
EOC
bad_start "nothing to serve" <<EOC
[daemon]
state_dir = $T/s1
[device a]
type = mem
size = 1G
EOC
bad_start "daemon" "unknown key 'colour'" <<EOC
[daemon]
colour = blue
EOC
bad_start "listen" "HOST:PORT" <<EOC
[device a]
type = mem
size = 1G
[export a]
type = nbd
device = a
listen = nonsense
EOC
printf 'x' >"$T/small.img"
truncate -s 1M "$T/small.img"
bad_start small.img "size" <<EOC
[device a]
type = file
path = $T/small.img
size = 2M
[export a]
type = nbd
device = a
listen = 127.0.0.1:$PORT
EOC
if has_type linear; then
	bad_start "cycle" <<EOC
[device a]
type = linear
devices = b
[device b]
type = linear
devices = a
[export a]
type = nbd
device = a
listen = 127.0.0.1:$PORT
EOC
fi
note "usage errors exit 2"
rc=0; "$BSD" --bogus >/dev/null 2>"$T/err" || rc=$?
((rc == 2)) || fail "--bogus: exit $rc"
H=$("$BSD" --help); grep -q 'embedded default' <<<"$H" || fail "--help lacks the default"
# every export type of this build, with its keys, from the registry
for t in nbd iscsi nvmf nfs; do
	grep -q "^  $t - " <<<"$H" || fail "--help lacks the export type $t"
done
grep -q '^      lease=SECONDS' <<<"$H" || fail "--help lacks the nfs keys"

note "blkstack -s with no daemon: one clear line"
run_bs 1 -s "$T/none.sock" ls
expect_err "$T/none.sock" "is it running"

note "a good config in the background: pid file, log file, control socket"
CTL=$T/ctl.sock
cat >"$T/d.ini" <<EOC
[daemon]
state_dir = $T/state
control = $CTL
[device a]
type = mem
size = 64M
[device b]
type = mem
size = 64M
[export a]
type = nbd
device = a
listen = 127.0.0.1:$PORT
EOC
timeout 30 "$BSD" -c "$T/d.ini" || fail "background start failed"
[[ -s $T/state/blkstackd.pid ]] || fail "no pid file"
BGPID=$(cat "$T/state/blkstackd.pid")
DPID=$BGPID	# cleanup kills it if we fail below
ctl 0 info a
[[ $OUT == *"64 MiB"* || $OUT == *67108864* ]] || fail "info over -s: $OUT"
ctl 0 ls
[[ $OUT == *a*mem* ]] || fail "ls over -s: $OUT"
# zeroout and fallocate run on a device no export holds (b); on the
# served one (a) they are refused naming the export
ctl 0 zeroout -l 1M b
ctl 0 fallocate -w -o 1M -l 1M b
ctl 1 zeroout -l 1M a
expect_err "a" "in use by export nbd/a"
ctl 1 fallocate -w -o 1M -l 1M a
expect_err "a" "in use by export nbd/a"
ctl 0 explain a
[[ $OUT == *a* ]] || fail "explain over -s: $OUT"
fast_zero() { nbdinfo --json "nbd://127.0.0.1:$PORT/a" | jq -r '.exports[0].can_fast_zero'; }
[[ $(fast_zero) == true ]] || fail "fast zero not offered before the knob"
ctl 0 attr a queue/write_zeroes_unmap 0
ctl 0 attr b queue/write_zeroes_unmap 0
ctl 1 fallocate -w -l 1M b
expect_err "b" "write_zeroes_unmap"
note "a capability change is logged once and new connections get it"
[[ $(fast_zero) == false ]] || fail "fast zero still offered after the knob"
LOG=$T/state/blkstackd.log
for ((i = 0; i < 100; i++)); do grep -q 'capabilities changed' "$LOG" && break; sleep 0.05; done
grep -q "export a: device a capabilities changed (generation [0-9]*): write_zeroes_unmap yes->no (write zeroes unmap disabled by the user (queue/write_zeroes_unmap=0)), fast_zero yes->no; new connections get them" "$LOG" ||
	fail "no capability change line in the log: $(grep -i capab "$LOG")"
ctl 0 attr a queue/write_zeroes_unmap 1
[[ $(fast_zero) == true ]] || fail "fast zero not offered again after re-enabling"
for ((i = 0; i < 100; i++)); do grep -q 'fast_zero no->yes' "$LOG" && break; sleep 0.05; done
(($(grep -c 'capabilities changed' "$LOG") == 2)) || fail "expected 2 change lines: $(grep -i capab "$LOG")"
ctl 1 info file:/etc/passwd
expect_err "configured devices"
ctl 2 nosuchcommand
note "a second daemon on the same address refuses with one line"
rc=0; timeout 30 "$BSD" -f -c "$T/d.ini" 2>"$T/err" || rc=$?
((rc == 1)) || fail "second daemon: exit $rc"
ERR=$(cat "$T/err"); expect_err "in use"
kill -TERM "$BGPID"
for ((i = 0; i < 200; i++)); do kill -0 "$BGPID" 2>/dev/null || break; sleep 0.05; done
kill -0 "$BGPID" 2>/dev/null && fail "background daemon did not stop"
DPID=
grep -q 'ready:' "$T/state/blkstackd.log" || fail "log file lacks 'ready'"
grep -q 'stopped' "$T/state/blkstackd.log" || fail "log file lacks 'stopped'"
[[ ! -e $T/state/blkstackd.pid ]] || fail "pid file left behind"
[[ ! -e $CTL ]] || fail "control socket left behind"

note "the embedded default: 64 GiB thin vol0 on 127.0.0.1:10809"
if python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",10809))' 2>/dev/null; then
	"$BSD" -f -d "$T/def" >>"$T/d.log" 2>&1 &
	DPID=$!
	for ((i = 0; i < 200; i++)); do grep -q 'ready:' "$T/d.log" && break; sleep 0.05; done
	J=$(timeout 20 nbdinfo --json nbd://127.0.0.1/vol0)
	[[ $(jq -r '.exports[0]."export-size"' <<<"$J") == $((64 << 30)) ]] ||
		fail "default export size: $J"
	[[ $(nbdinfo --size "nbd+unix:///vol0?socket=$T/def/nbd.sock") == $((64 << 30)) ]] ||
		fail "default UNIX socket"
	a=$(du --block-size=1 "$T/def/vol0.img" | cut -f1)
	((a < 1 << 20)) || fail "default volume not thin: $a bytes"
	CTL=$T/def/blkstackd.sock
	ctl 0 ls
	stop_daemon
else
	note "(port 10809 busy here: the embedded default's port not checked)"
fi
echo "PASS"
