#!/usr/bin/env bash
# Several iSCSI sessions of one target on several I/O threads (issue 13):
# four qemu-io initiators at once, each writing its own pattern to its own
# quarter of one LUN (their sessions share the target's SCSI core from
# different loops), while the device's knob flips twice (capability
# change: a unit attention for every nexus, raised from the main loop).
# Every quarter then reads back its pattern, VPD B2 follows the knob, and
# the daemon stops cleanly (make tsan runs this under ThreadSanitizer).
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need qemu-io iscsi-inq python3
qemu-img --help 2>/dev/null | grep -qw iscsi ||
	skip "qemu-img without the iscsi block driver (qemu-block-extra)"
daemon_setup
daemon_threads 2
cat >>"$T/d.ini" <<EOC
[device d]
type = file
path = $T/d.img
size = 64M
[export mt]
type = iscsi
device = d
listen = 127.0.0.1:$PORT
max_sessions = 8
EOC
start_daemon "$T/d.ini"
URL=iscsi://127.0.0.1:$PORT/iqn.2026-12.org.blkstack:mt/0
Q=$((16 * 1024 * 1024))

note "four sessions write their quarters at once, the knob flips meanwhile"
pids=()
for i in 0 1 2 3; do
	off=$((i * Q))
	timeout 120 qemu-io -f raw \
		-c "write -P $((0x11 * (i + 1))) $off $Q" \
		-c "aio_write -P $((0x11 * (i + 1))) $off 1M" -c aio_flush \
		-c "write -z $((off + Q - 1048576)) 1M" \
		-c "write -P $((0x11 * (i + 1))) $((off + Q - 1048576)) 1M" \
		"$URL" >"$T/w$i.log" 2>&1 &
	pids+=($!)
done
ctl 0 attr d queue/write_zeroes_unmap 0
ctl 0 attr d queue/write_zeroes_unmap 1
for i in 0 1 2 3; do
	wait "${pids[$i]}" || fail "writer $i: $(tail -3 "$T/w$i.log")"
done

note "every quarter holds its pattern"
for i in 0 1 2 3; do
	out=$(timeout 60 qemu-io -f raw -c "read -P $((0x11 * (i + 1))) $((i * Q)) $Q" \
		"$URL" 2>&1) || fail "quarter $i: $out"
	grep -q "Pattern verification failed" <<<"$out" && fail "quarter $i: $out"
done

note "VPD B2 follows the knob"
ctl 0 attr d queue/write_zeroes_unmap 0
out=$(timeout 20 iscsi-inq -e 1 -c 178 "$URL") || fail "$out"
grep -qx "lbpws:0" <<<"$out" || fail "lbpws not 0: $out"
ctl 0 attr d queue/write_zeroes_unmap 1
out=$(timeout 20 iscsi-inq -e 1 -c 178 "$URL") || fail "$out"
grep -qx "lbpws:1" <<<"$out" || fail "lbpws not 1: $out"

n=$(grep -c "login: normal session to iqn.2026-12.org.blkstack:mt" "$T/d.log")
((n >= 10)) || fail "only $n sessions logged in"
stop_daemon
echo "PASS: mt_iscsi"
