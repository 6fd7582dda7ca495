#!/usr/bin/env bash
# The nbd client driver's reconnect policy against nbdkit (file plugin,
# on a UNIX socket of the test's own), killed and restarted by PID, seen
# through blkstackd's NBD export of the nbd device (timeout = 4 s,
# reconnect_ms = 200):
#   - with the server gone, a read fails with EIO, and only after the
#     timeout (not at once, and not much later);
#   - a read sent while the server is down and restarted within the
#     timeout is retried on the new connection and returns the bytes;
#   - after the restart I/O works again; info counts the lost connection
#     and the reconnect;
#   - a write acknowledged (no FUA, no flush yet), the server killed and
#     restarted: the next FLUSH fails with EIO, once; the one after works;
#   - the server restarted with other flags (nozero filter) and a larger
#     image: the driver decides again on the new connection (no
#     write-zeroes: the core writes zeroes), the export above serves the
#     new size to new clients; restarted as before: write-zeroes is back;
#   - the server restarted read-only (nbdkit -r): writes through the
#     export fail with a read-only error; restarted read-write: writes
#     work again (the device follows the server), while a second device
#     on the same server configured "readonly = 1" stays read-only;
#   - bounded reconnect (device kd: timeout = 30, down_after = 2): with
#     the server gone, a read waiting for a connection fails with EIO once
#     the device is down (about 2 s, not the 30 s timeout), later ones at
#     once; the daemon's log, info and explain say the server is
#     unreachable; attempts go on, and the restarted server is used again
#     (log line, info, explain back to the decision, the bytes read).
# check: alone (an EIO expected after the 4 s timeout, not much later; restarts within it)
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need nbdkit qemu-io
has_type nbd || skip "blkstack built without the nbd driver"
daemon_setup

KPID=
cleanup() {
	if [[ -n $KPID ]]; then
		kill -KILL "$KPID" 2>/dev/null || true
		wait "$KPID" 2>/dev/null || true
	fi
	daemon_cleanup
}
trap cleanup EXIT

start_nbdkit() {
	local i
	rm -f "$T/k.sock"
	nbdkit -f -U "$T/k.sock" "$@" file "$T/k.img" >>"$T/k.log" 2>&1 &
	KPID=$!
	for ((i = 0; i < 100; i++)); do
		[[ -S $T/k.sock ]] && return 0
		sleep 0.05
	done
	fail "nbdkit did not start"
}
kill_nbdkit() {
	kill -KILL "$KPID"
	wait "$KPID" 2>/dev/null || true
	KPID=
}
# read_eio URI OFFSET LOG: a qemu-io read of 64K that must fail with EIO;
# MS is how long it took
read_eio() {
	local t0
	t0=$(date +%s%N)
	timeout 60 qemu-io -f raw "$1" -c "read $2 64K" >"$3" 2>&1 || true
	MS=$((($(date +%s%N) - t0) / 1000000))
	grep -q "Input/output error" "$3" || { cat "$3"; fail "no EIO from $1"; }
}

truncate -s 32M "$T/k.img"
start_nbdkit
cat >>"$T/d.ini" <<EOC
[device k]
type = nbd
uri = nbd+unix:///?socket=$T/k.sock
timeout = 4
reconnect_ms = 200

[device kr]
type = nbd
uri = nbd+unix:///?socket=$T/k.sock
timeout = 4
reconnect_ms = 200
readonly = 1

[device kd]
type = nbd
uri = nbd+unix:///?socket=$T/k.sock
timeout = 30
reconnect_ms = 200
down_after = 2

[export k]
type = nbd
device = k
socket = $T/ek.sock

[export kd]
type = nbd
device = kd
socket = $T/ekd.sock
EOC
start_daemon "$T/d.ini"
EK="nbd+unix:///k?socket=$T/ek.sock"
for ((i = 0; i < 50; i++)); do
	ctl 0 info k
	[[ $OUT == *"state"*"live"* ]] && break
	sleep 0.1
done
timeout 20 qemu-io -f raw "$EK" -c "write -P 0x61 0 1M" >"$T/q.log" 2>&1 ||
	{ cat "$T/q.log"; fail "first write"; }

note "server gone: EIO, after the timeout"
kill_nbdkit
read_eio "$EK" 0 "$T/q1.log"
((MS >= 3000)) || fail "EIO after $MS ms, before the 4 s timeout"
# qemu-io sends two reads here (its open reads the first block), each
# waiting its 4 s: about 8 s plus start-up
((MS <= 12000)) || fail "EIO after $MS ms, long past the 4 s timeout"
note "EIO after $MS ms"

note "server back within the timeout: the waiting read is retried"
timeout 30 qemu-io -f raw "$EK" -c "read -P 0x61 0 64K" >"$T/q2.log" 2>&1 &
QPID=$!
sleep 1
start_nbdkit
wait "$QPID" || { cat "$T/q2.log"; fail "qemu-io failed"; }
grep -q "read 65536/65536" "$T/q2.log" && ! grep -q "error\|Pattern verification failed" "$T/q2.log" ||
	{ cat "$T/q2.log"; fail "the read across the restart did not return the bytes"; }

note "I/O works again; info counts the loss and the reconnect"
timeout 20 qemu-io -f raw "$EK" -c "write -P 0x62 1M 1M" -c "read -P 0x62 1M 1M" \
	-c "read -P 0x61 0 1M" >"$T/q3.log" 2>&1 || { cat "$T/q3.log"; fail "after reconnect"; }
grep -q "Pattern verification failed\|error" "$T/q3.log" && { cat "$T/q3.log"; fail "bytes after reconnect"; }
ctl 0 info k
[[ $OUT =~ conn\.1\ +ready\ \(connects\ [2-9] ]] || fail "no reconnect in info: $OUT"
[[ $OUT =~ lost\ [1-9] ]] || fail "loss not counted: $OUT"
[[ $OUT =~ failed\ at\ the\ deadline\ [1-9] ]] || fail "expiry not counted: $OUT"

note "writes acknowledged, then the server restarted: the next FLUSH fails once"
# qemu-io -t writeback: plain writes (no FUA), a flush only when asked
mkfifo "$T/qin"
timeout 60 qemu-io -t writeback -f raw "$EK" <"$T/qin" >"$T/q4.log" 2>&1 &
QPID=$!
exec 7>"$T/qin"
echo "write -P 0x63 2M 64K" >&7
for ((i = 0; i < 100; i++)); do
	grep -q "wrote 65536/65536" "$T/q4.log" && break
	sleep 0.1
done
grep -q "wrote 65536/65536" "$T/q4.log" || { cat "$T/q4.log"; fail "write before the restart"; }
kill_nbdkit
sleep 0.5
start_nbdkit
for ((i = 0; i < 50; i++)); do
	ctl 0 info k
	[[ $OUT =~ conn\.1\ +ready\ \(connects\ 3 ]] && break
	sleep 0.1
done
n0=$(grep -c "flush 0+0: Input/output error" "$T/d.log" || true)
echo "flush" >&7
# the flush's answer is in the daemon's log; then quit. After a failed
# flush qemu-io sometimes never acts on "quit" (it sends nothing more
# and hangs until killed): give it 5 s, then stop it
for ((i = 0; i < 100; i++)); do
	(($(grep -c "flush 0+0: Input/output error" "$T/d.log" || true) > n0)) && break
	sleep 0.1
done
echo "quit" >&7
exec 7>&-
for ((i = 0; i < 50; i++)); do
	kill -0 "$QPID" 2>/dev/null || break
	sleep 0.1
done
kill "$QPID" 2>/dev/null || true
wait "$QPID" || true
# qemu-io prints nothing for a failed flush: the daemon's log and info say it
n=$(grep -c "flush 0+0: Input/output error" "$T/d.log" || true)
((n == 2)) || { tail -5 "$T/d.log"; fail "want one more failed flush (the one at the deadline before), got $n"; }
ctl 0 info k
[[ $OUT == *"flushes failed after a lost connection 1"* ]] || fail "not counted: $OUT"
note "and only once: the next flush works, the bytes are there"
timeout 20 qemu-io -t writeback -f raw "$EK" -c "write -P 0x64 3M 64K" -c flush \
	-c "read -P 0x63 2M 64K" -c "read -P 0x64 3M 64K" >"$T/q5.log" 2>&1 ||
	{ cat "$T/q5.log"; fail "after the failed flush"; }
grep -q "Pattern verification failed\|error" "$T/q5.log" && { cat "$T/q5.log"; fail "bytes after the failed flush"; }
n=$(grep -c "flush 0+0: Input/output error" "$T/d.log" || true)
((n == 2)) || fail "a second flush failed after the restart"

note "the server comes back with other flags and size: decided again"
ctl 0 explain k
[[ $OUT == *"can_zero=1"* ]] || fail "explain before the change: $OUT"
kill_nbdkit
truncate -s 48M "$T/k.img"
start_nbdkit --filter=nozero
# the driver reconnects on its own (reconnect_ms); wait for the new facts
for ((i = 0; i < 100; i++)); do
	ctl 0 explain k
	[[ $OUT == *"can_zero=0"* ]] && break
	sleep 0.1
done
[[ $OUT == *"can_zero=0"* ]] || fail "explain after the nozero restart: $OUT"
size=$(nbd_flag "$EK" export-size)
((size == 48 * 1024 * 1024)) || fail "export size $size after the resize, want 48 MiB"
timeout 20 qemu-io -f raw "$EK" -c "write -z 40M 1M" -c "read -P 0 40M 1M" \
	-c "read -P 0x64 3M 64K" >"$T/q6.log" 2>&1 || { cat "$T/q6.log"; fail "I/O after the flag change"; }
grep -q "Pattern verification failed\|error" "$T/q6.log" && { cat "$T/q6.log"; fail "bytes after the flag change"; }
kill_nbdkit
start_nbdkit
for ((i = 0; i < 100; i++)); do
	ctl 0 explain k
	[[ $OUT == *"can_zero=1"* ]] && break
	sleep 0.1
done
[[ $OUT == *"can_zero=1"* ]] || fail "explain after the plain restart: $OUT"

note "the server restarted read-only, then read-write: the device follows"
# wait until device $1's info says the server's read_only is $2 and its
# ro attribute is $3
wait_ro() {
	local i
	for ((i = 0; i < 100; i++)); do
		ctl 0 info "$1"
		[[ $OUT == *"read_only $2,"* ]] && break
		sleep 0.1
	done
	[[ $OUT == *"read_only $2,"* ]] || fail "$1: server read_only not $2: $OUT"
	ctl 0 attr "$1" ro
	[[ $OUT == "$3" ]] || fail "$1: ro attribute '$OUT', want $3"
}
wait_ro kr 0 1
kill_nbdkit
start_nbdkit -r
wait_ro k 1 1
wait_ro kr 1 1
timeout 20 qemu-io -f raw "$EK" -c "write -P 0x65 4M 64K" >"$T/q7.log" 2>&1 || true
grep -q "write failed: Operation not permitted" "$T/q7.log" ||
	{ cat "$T/q7.log"; fail "a write to the read-only server did not fail read-only"; }
timeout 20 qemu-io -f raw "$EK" -c "read -P 0x64 3M 64K" >"$T/q8.log" 2>&1 ||
	{ cat "$T/q8.log"; fail "read from the read-only server"; }
grep -q "Pattern verification failed\|error" "$T/q8.log" && { cat "$T/q8.log"; fail "bytes from the read-only server"; }
kill_nbdkit
start_nbdkit
wait_ro k 0 0
wait_ro kr 0 1
timeout 20 qemu-io -f raw "$EK" -c "write -P 0x65 4M 64K" -c "read -P 0x65 4M 64K" \
	>"$T/q9.log" 2>&1 || { cat "$T/q9.log"; fail "write after the read-write restart"; }
grep -q "Pattern verification failed\|error\|not permitted" "$T/q9.log" &&
	{ cat "$T/q9.log"; fail "bytes after the read-write restart"; }

note "bounded reconnect: down after down_after, EIO at once, up again"
EKD="nbd+unix:///kd?socket=$T/ekd.sock"
# kd_up: wait (10 s at most) until info says kd is reachable; info in $OUT
kd_up() {
	local i
	for ((i = 0; i < 100; i++)); do
		ctl 0 info kd
		[[ $OUT == *"reachable"*"yes (down"* ]] && return 0
		sleep 0.1
	done
	fail "kd not reachable: $OUT"
}
# kd went down and up with the restarts above
kd_up
[[ $OUT == *"down_after 2 s"* ]] || fail "policy lacks down_after: $OUT"
timeout 20 qemu-io -f raw "$EKD" -c "write -P 0x66 5M 64K" >"$T/q10.log" 2>&1 ||
	{ cat "$T/q10.log"; fail "write through kd"; }
ndown=$(grep -c "kd: nbd .*server unreachable for 2 s" "$T/d.log" || true)
kill_nbdkit
read_eio "$EKD" 5M "$T/q11.log"
# the waiting read fails when the device goes down (2 s), not at its 30 s
((MS >= 1500 && MS <= 10000)) || fail "kd: EIO after $MS ms, want about 2 s"
note "waiting read failed after $MS ms"
ctl 0 info kd
[[ $OUT == *"reachable"*"no: down for"*"requests fail at once with EIO"* ]] ||
	fail "info does not say down: $OUT"
ctl 0 explain kd
[[ $OUT == *"nbd server unreachable over 2 s (down_after)"* ]] || fail "explain: $OUT"
(($(grep -c "kd: nbd .*server unreachable for 2 s" "$T/d.log" || true) > ndown)) ||
	{ tail -5 "$T/d.log"; fail "no log line for the device going down"; }
read_eio "$EKD" 5M "$T/q12.log"
# at once: well below the 30 s timeout (qemu-io starts in the time)
((MS < 5000)) || fail "kd down: EIO after $MS ms, not at once"
note "down: EIO after $MS ms"
nup=$(grep -c "kd: nbd .*connected again after" "$T/d.log" || true)
start_nbdkit
kd_up
(($(grep -c "kd: nbd .*connected again after" "$T/d.log" || true) > nup)) ||
	{ tail -5 "$T/d.log"; fail "no log line for the device back"; }
ctl 0 explain kd
[[ $OUT == *"can_zero=1"* ]] || fail "explain after the server came back: $OUT"
timeout 20 qemu-io -f raw "$EKD" -c "read -P 0x66 5M 64K" >"$T/q13.log" 2>&1 ||
	{ cat "$T/q13.log"; fail "read through kd after the server came back"; }
grep -q "Pattern verification failed\|error" "$T/q13.log" && { cat "$T/q13.log"; fail "kd: bytes after the server came back"; }

stop_daemon
note "PASS"
