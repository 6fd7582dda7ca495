#!/usr/bin/env bash
# A chain across protocols (issue 13, "what must hold"): a file device
# exported over iSCSI by one blkstackd (the bottom), a second blkstackd
# (the top) with an `iscsi` device on that LUN (the sd driver) exported
# over NBD. nbdinfo on the top shows can_fast_zero: true; the knob set to
# 0 on the bottom's file device makes the top lose fast zero for new
# connections within 5 s (the bottom raises a unit attention, the top's
# idle TEST UNIT READY meets it, rescans and restacks), and setting it
# back restores it. Bytes written at the top land in the bottom's file.
#
# Needs the iSCSI target (export type `iscsi`); skips while this tree has
# none.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need nbdinfo qemu-io jq python3
has_type iscsi || skip "blkstack built without the iscsi driver"
daemon_setup

BPID=
BPORT=$(free_port)
BCTL=$T/bottom.sock
cleanup() {
	if [[ -n $BPID ]]; then
		kill -KILL "$BPID" 2>/dev/null || true
		wait "$BPID" 2>/dev/null || true
	fi
	daemon_cleanup
}
trap cleanup EXIT

cat >"$T/bottom.ini" <<EOC
[daemon]
state_dir = $T/bstate
control = $BCTL

[device disk]
type = file
path = $T/disk.img
size = 64M

[export t0]
type = iscsi
listen = 127.0.0.1:$BPORT
device = disk
EOC
"$BSD" -f -c "$T/bottom.ini" >"$T/bottom.log" 2>&1 &
BPID=$!
for ((i = 0; i < 200; i++)); do
	if ! kill -0 "$BPID" 2>/dev/null; then
		wait "$BPID" 2>/dev/null || true
		BPID=
		grep -q "unknown export type 'iscsi'" "$T/bottom.log" &&
			skip "no iSCSI target in this tree yet"
		cat "$T/bottom.log" >&2
		fail "the bottom blkstackd exited while starting"
	fi
	grep -q 'ready:' "$T/bottom.log" && break
	sleep 0.05
done
grep -q 'ready:' "$T/bottom.log" || fail "the bottom blkstackd is not ready"

# the target's name: the default for export t0, as the target's docs say
IQN=iqn.2026-12.org.blkstack:t0
cat >>"$T/d.ini" <<EOC
[device remote]
type = iscsi
url = iscsi://127.0.0.1:$BPORT/$IQN/0
poll_ms = 500

[export remote]
type = nbd
device = remote
listen = 127.0.0.1:$PORT
EOC
start_daemon "$T/d.ini"
U=nbd://127.0.0.1:$PORT

# wait_fast_zero WANT SECONDS: new NBD connections see can_fast_zero WANT
wait_fast_zero() {
	local want=$1 limit=$(($2 * 10)) i
	for ((i = 0; i < limit; i++)); do
		[[ $(nbd_flag "$U" can_fast_zero) == "$want" ]] && return 0
		sleep 0.1
	done
	fail "can_fast_zero is not $want after $2 s: $(nbd_flag "$U" can_fast_zero)"
}

note "the top shows the bottom's unmap zeroing as NBD fast zero"
wait_fast_zero true 10
ctl 0 explain remote
[[ $OUT == *"write_zeroes_unmap yes"*"WRITE SAME"*"UNMAP"* ]] ||
	fail "top explain: $OUT"

note "bytes written at the top are in the bottom's file"
timeout 60 qemu-io -f raw "$U" -c "write -P 0x6b 1M 2M" -c flush \
	>"$T/q.log" 2>&1 || { cat "$T/q.log"; fail "qemu-io write"; }
cmp -n 2M -i $((1 << 20)):0 "$T/disk.img" <(head -c 2M /dev/zero | tr '\0' '\153') ||
	fail "the bottom's file lacks the bytes"

note "knob 0 at the bottom: the top loses fast zero within 5 s"
run_bs 0 -s "$BCTL" attr disk queue/write_zeroes_unmap 0
wait_fast_zero false 5
ctl 0 explain remote
[[ $OUT == *"write_zeroes_unmap no"* ]] || fail "top explain after knob 0: $OUT"

note "knob 1 again: fast zero is back within 5 s"
run_bs 0 -s "$BCTL" attr disk queue/write_zeroes_unmap 1
wait_fast_zero true 5

note "zeroing through the chain frees the bottom's blocks"
before=$(allocated "$T/disk.img")
timeout 60 qemu-io -f raw "$U" -c "write -z -u 1M 2M" -c "read -P 0 1M 2M" \
	>"$T/q.log" 2>&1 || { cat "$T/q.log"; fail "qemu-io zero"; }
after=$(allocated "$T/disk.img")
((after + (1 << 20) <= before)) || fail "the bottom kept its blocks: $before -> $after"

stop_daemon
kill -TERM "$BPID"
wait "$BPID" || fail "the bottom blkstackd exited $?"
BPID=
echo "PASS: sd_chain"
