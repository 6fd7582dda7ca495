#!/usr/bin/env bash
# The nvmf host driver's bounded reconnect (issue 14: "reconnects with a
# bounded policy"): blkstackd T exports a file over nvmf on two
# listeners; the daemon under test has a one-path device `s` and a
# two-path device `mp` (one path per listener) on it, both
# `down_after = 2` with a 30 s `timeout`, exported over NBD.
#   - T killed (every path of both devices lost): a read waiting on each
#     device fails with EIO after about 2 s (not the 30 s timeout), the
#     next one at once; the daemon's log has one line per device going
#     down, `info` says `reachable no: down`, `explain` says the target
#     is unreachable;
#   - T restarted: both devices come back by themselves (a log line each,
#     `reachable yes (down 1 times)`, explain back to the decision), and
#     the bytes written before read back intact.
# check: alone (a read fails with EIO after about 2 s, not the 30 s timeout: times measured)
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
source "$(dirname "$0")/lib/nvmf_ana.bash"
need python3 qemu-io
has_type nvmf || skip "blkstack built without the nvmf driver"
need_export_type nvmf
daemon_setup
daemon_threads 2

P1=$(free_port) P2=$(free_port)
nvmf_target_start down "$P1" "$P2"

U=nvme+tcp://127.0.0.1
cat >>"$T/d.ini" <<EOC
[device s]
type = nvmf
url = $U:$P1/$NQN/1
reconnect_ms = 200
timeout = 30
down_after = 2

[device mp]
type = nvmf
url = $U:$P1/$NQN/1
url.2 = $U:$P2/$NQN/1
reconnect_ms = 200
timeout = 30
down_after = 2

[export s]
type = nbd
device = s
socket = $T/s.sock

[export mp]
type = nbd
device = mp
socket = $T/mp.sock
EOC
start_daemon "$T/d.ini"
declare -A URI=([s]="nbd+unix:///?socket=$T/s.sock"
	[mp]="nbd+unix:///?socket=$T/mp.sock")
declare -A OFF=([s]=0 [mp]=4194304) PAT=([s]=0x66 [mp]=0x67)

# reachable DEV WANT: wait (10 s) until info DEV's reachable line has WANT
reachable() {
	local i
	for ((i = 0; i < 100; i++)); do
		ctl 0 info "$1"
		[[ $OUT =~ reachable[^$'\n']*$2 ]] && return 0
		sleep 0.1
	done
	fail "$1: reachable not '$2': $OUT"
}

# timed_read DEV N [T0_NS]: read DEV's pattern through its export
# (qemu-io log in $T/rN-DEV.log, milliseconds from T0_NS, by default the
# read's start, to its end in $T/msN-DEV)
timed_read() {
	local t0=${3:-$(date +%s%N)}
	timeout 60 qemu-io -f raw "${URI[$1]}" -c "read -P ${PAT[$1]} ${OFF[$1]} 64k" \
		>"$T/r$2-$1.log" 2>&1 || true
	echo $((($(date +%s%N) - t0) / 1000000)) >"$T/ms$2-$1"
}

note "both devices live and reachable; their patterns written"
for d in s mp; do
	wait_live "$d"
	reachable "$d" "yes \(down 0 times\)"
	[[ $OUT == *"timeouts"*"down_after 2 s"* ]] || fail "$d: no down_after: $OUT"
	timeout 30 qemu-io -f raw "${URI[$d]}" -c "write -P ${PAT[$d]} ${OFF[$d]} 64k" \
		>"$T/w-$d.log" 2>&1 || { cat "$T/w-$d.log"; fail "$d: write"; }
done
ctl 0 info mp
[[ $OUT == *"(2 live)"* ]] || fail "mp: not two live paths: $OUT"

note "the target killed: a waiting read fails with EIO after about 2 s"
# counted from the kill: down_after runs from the loss, not from the
# read (qemu-io's start under load took 0.6 s once)
KILLED=$(date +%s%N)
kill -KILL "$XPID"
wait "$XPID" 2>/dev/null || true
XPID=
timed_read s 1 "$KILLED" &
R1=$!
timed_read mp 1 "$KILLED" &
R2=$!
wait "$R1" "$R2"
for d in s mp; do
	ms=$(<"$T/ms1-$d")
	grep -q "Input/output error" "$T/r1-$d.log" ||
		{ cat "$T/r1-$d.log"; fail "$d: no EIO with the target gone"; }
	# it fails when the device goes down (2 s), not at its 30 s timeout
	((ms >= 1500 && ms <= 10000)) || fail "$d: EIO $ms ms after the kill, want about 2 s"
	note "$d: the waiting read failed $ms ms after the kill"
	reachable "$d" "no: down for"
	[[ $OUT == *"reachable"*"no live path for down_after 2 s before"*"requests fail at once with EIO"* ]] ||
		fail "$d: info does not say down: $OUT"
	ctl 0 explain "$d"
	[[ $OUT == *"nvmf target unreachable over 2 s (down_after): I/O fails at once with EIO"* ]] ||
		fail "$d: explain: $OUT"
	(($(grep -c "$d: nvmf .*target unreachable for 2 s" "$T/d.log" || true) == 1)) ||
		{ tail -5 "$T/d.log"; fail "$d: not one log line for the device going down"; }
done

note "down: the next read fails at once"
for d in s mp; do
	timed_read "$d" 2
	ms=$(<"$T/ms2-$d")
	grep -q "Input/output error" "$T/r2-$d.log" ||
		{ cat "$T/r2-$d.log"; fail "$d down: no EIO"; }
	((ms < 1500)) || fail "$d down: EIO after $ms ms, not at once"
	note "$d down: EIO after $ms ms"
done

note "the target back: both devices up again, the bytes intact"
# a log of its own: start_other_daemon waits for its first 'ready:'
start_other_daemon "$T/t.ini" "$T/t2.log"
for d in s mp; do
	reachable "$d" "yes \(down 1 times\)"
	grep -q "$d: nvmf .*live again after [0-9]* s down" "$T/d.log" ||
		{ tail -5 "$T/d.log"; fail "$d: no log line for the device back"; }
	ctl 0 explain "$d"
	[[ $OUT == *"write_zeroes_unmap yes"*"DLFEAT=0x09"* ]] ||
		fail "$d: explain after the target came back: $OUT"
	timeout 30 qemu-io -f raw "${URI[$d]}" -c "read -P ${PAT[$d]} ${OFF[$d]} 64k" \
		>"$T/r3-$d.log" 2>&1 || { cat "$T/r3-$d.log"; fail "$d: read after"; }
	! grep -qi -e "fail" -e "error" "$T/r3-$d.log" ||
		{ cat "$T/r3-$d.log"; fail "$d: bytes after the target came back"; }
done
ctl 0 info mp
for ((i = 0; i < 50; i++)); do
	[[ $OUT == *"(2 live)"* ]] && break
	sleep 0.1
	ctl 0 info mp
done
[[ $OUT == *"(2 live)"* ]] || fail "mp: both paths not back: $OUT"

stop_daemon
stop_other_daemon "$T/t2.log"
note "PASS"
