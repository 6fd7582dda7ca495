#!/usr/bin/env bash
# The iSCSI target with real initiators (issue 13, part 1):
# - discovery: iscsi-ls lists both targets sharing one address, each with
#   its portal; login by TargetName picks each one;
# - iscsi-inq: standard INQUIRY and VPD B2 with LBPU/LBPWS/LBPWS10/LBPRZ
#   = 1 on a file device that punches holes; LBPWS/LBPWS10/LBPRZ 0 and
#   LBPU still 1 (the device still discards) after
#   `attr DEV queue/write_zeroes_unmap 0` (a unit attention, then the new
#   answers), all 1 again after setting it back;
# - iscsi-readcapacity16: LBPME and LBPRZ;
# - qemu-img convert into the LUN and compare: identical;
# - qemu-io `write -z -u` over written data reads zeroes and the backing
#   file's allocation drops (du);
# - a second unit is LUN 1 and holds its own data;
# - max_sessions = 1: a second session while one is open is refused
#   (03/01), and allowed again once the first has logged out;
# - an unknown TargetName is refused (02/03);
# - a raw client (lib/iscsi_raw.py): a second login with the same
#   InitiatorName and ISID reinstates the session (the first connection
#   closes, admitted at max_sessions = 1); bad PDUs get their Reject
#   reasons and an oversized data segment closes the connection;
# - SIGTERM ends a session open to a target whose IQN is longer than a
#   connection label.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need iscsi-ls iscsi-inq iscsi-readcapacity16 qemu-img qemu-io python3
qemu-img --help 2>/dev/null | grep -qw iscsi ||
	skip "qemu-img without the iscsi block driver (qemu-block-extra)"
daemon_setup
cat >>"$T/d.ini" <<EOC
[device da]
type = file
path = $T/a.img
size = 64M
[device db]
type = file
path = $T/b.img
size = 8M
[device dc]
type = mem
size = 4M
[export t0]
type = iscsi
listen = 127.0.0.1:$PORT
unit.a = da
unit.b = db
[export other]
type = iscsi
iqn = iqn.2026-12.org.example:a-target-name-longer-than-a-connection-label-holds-0123456789
device = dc
listen = 127.0.0.1:$PORT
max_sessions = 1
EOC
start_daemon "$T/d.ini"
IQN=iqn.2026-12.org.blkstack:t0
LONG=iqn.2026-12.org.example:a-target-name-longer-than-a-connection-label-holds-0123456789
URL=iscsi://127.0.0.1:$PORT/$IQN

note "discovery lists both targets on the shared address"
out=$(timeout 20 iscsi-ls -s "iscsi://127.0.0.1:$PORT") || fail "iscsi-ls: $out"
grep -q "Target:$IQN Portal:127.0.0.1:$PORT,1" <<<"$out" ||
	fail "t0 not listed: $out"
grep -q "Target:iqn.2026-12.org.example:a-target-name-longer-than-a-connection-label-holds-0123456789 Portal:127.0.0.1:$PORT,1" \
	<<<"$out" || fail "other not listed: $out"
grep -q "Lun:0" <<<"$out" && grep -q "Lun:1" <<<"$out" ||
	fail "iscsi-ls -s shows no LUN 0 and 1: $out"

note "standard INQUIRY"
out=$(timeout 20 iscsi-inq "$URL/0") || fail "iscsi-inq: $out"
grep -q "Peripheral Device Type:DIRECT_ACCESS" <<<"$out" || fail "$out"
grep -q "Vendor:BLKSTACK" <<<"$out" || fail "vendor: $out"
out=$(timeout 20 iscsi-inq -e 1 -c 0 "$URL/0") || fail "VPD 00: $out"
grep -q "Page:0xb2" <<<"$out" || fail "VPD B2 not listed: $out"

b2() { timeout 20 iscsi-inq -e 1 -c 178 "$URL/0"; }
note "VPD B2 on a file device that punches holes"
out=$(b2) || fail "iscsi-inq -e 1 -c 0xb2: $out"
for f in lbpu lbpws lbpws10 lbprz; do
	grep -qx "$f:1" <<<"$out" || fail "$f is not 1: $out"
done
out=$(timeout 20 iscsi-readcapacity16 "$URL/0") || fail "$out"
grep -q "LBPME:1 LBPRZ:1" <<<"$out" || fail "readcapacity16: $out"

note "the knob off: B2 and READ CAPACITY(16) say 0, LBPU stays 1"
ctl 0 attr da queue/write_zeroes_unmap 0
out=$(b2) || fail "iscsi-inq after the knob: $out"
for f in lbpws lbpws10 lbprz; do
	grep -qx "$f:0" <<<"$out" || fail "$f is not 0 with the knob off: $out"
done
# UNMAP still works (the device discards): LBPU says so, and sd keeps
# discarding with UNMAP (docs/iscsi.md, "LBPU follows discard")
grep -qx "lbpu:1" <<<"$out" || fail "lbpu is not 1 with the knob off: $out"
out=$(timeout 20 iscsi-readcapacity16 "$URL/0") || fail "$out"
grep -q "LBPRZ:0" <<<"$out" || fail "readcapacity16 with the knob off: $out"
ctl 0 attr da queue/write_zeroes_unmap 1
out=$(b2) || fail "$out"
for f in lbpu lbpws lbpws10 lbprz; do
	grep -qx "$f:1" <<<"$out" || fail "$f not back to 1: $out"
done

note "qemu-img convert in, compare identical"
head -c 16M /dev/urandom >"$T/src.img"
timeout 120 qemu-img convert -n -f raw -O raw "$T/src.img" "$URL/0" ||
	fail "qemu-img convert into the LUN"
timeout 120 qemu-img compare -f raw -F raw "$T/src.img" "$URL/0" >/dev/null ||
	fail "qemu-img compare: the LUN differs from the source"

note "qemu-io write -z -u over written data: zeroes, blocks freed"
sync "$T/a.img"
before=$(allocated "$T/a.img")
timeout 60 qemu-io -f raw -c "write -z -u 0 8M" "$URL/0" >/dev/null ||
	fail "qemu-io write -z -u"
out=$(timeout 60 qemu-io -f raw -c "read -P 0 0 8M" "$URL/0") ||
	fail "zeroed range does not read back as zeroes: $out"
after=$(allocated "$T/a.img")
((after <= before - 7 * 1024 * 1024)) ||
	fail "allocation did not drop by 8 MiB: $before -> $after"

note "LUN 1 is unit b, its own device"
timeout 60 qemu-io -f raw -c "write -P 0x5a 0 1M" "$URL/1" >/dev/null ||
	fail "write to LUN 1"
cmp -n 1048576 "$T/b.img" <(head -c 1M /dev/zero | tr '\0' 'Z') ||
	fail "unit b's device does not hold LUN 1's write"

note "the other target serves its own device"
out=$(timeout 20 iscsi-readcapacity16 \
	"iscsi://127.0.0.1:$PORT/iqn.2026-12.org.example:a-target-name-longer-than-a-connection-label-holds-0123456789/0") || fail "$out"
grep -q "Total size:4194304" <<<"$out" || fail "other target size: $out"

note "max_sessions = 1: a second session is refused 03/01 while one is open"
OTHER=iscsi://127.0.0.1:$PORT/iqn.2026-12.org.example:a-target-name-longer-than-a-connection-label-holds-0123456789/0
timeout 60 qemu-io -f raw -c "sleep 4000" "$OTHER" >"$T/hold.log" 2>&1 &
hold=$!
for ((i = 0; i < 100; i++)); do
	grep -q "login: normal session to iqn.2026-12.org.example:a-target-name-longer-than-a-connection-label-holds-0123456789 from iqn.2008-11.org.linux-kvm" \
		"$T/d.log" && break
	sleep 0.05
done
if out=$(timeout 20 iscsi-readcapacity16 "$OTHER" 2>&1); then
	fail "a second session beyond max_sessions logged in: $out"
fi
grep -q "login refused (status 03/01): target iqn.2026-12.org.example:a-target-name-longer-than-a-connection-label-holds-0123456789: max_sessions reached" \
	"$T/d.log" || fail "no 03/01 refusal: $(tail -3 "$T/d.log")"
wait "$hold" || fail "the session holding the target failed: $(cat "$T/hold.log")"
out=$(timeout 20 iscsi-readcapacity16 "$OTHER") ||
	fail "no session possible after the first one ended: $out"

note "an unknown target name is refused"
if out=$(timeout 20 iscsi-inq "iscsi://127.0.0.1:$PORT/iqn.2026-12.org.x:none/0" 2>&1); then
	fail "login to an unknown target succeeded: $out"
fi
grep -q "login refused (status 02/03)" "$T/d.log" ||
	fail "no 02/03 refusal logged: $(tail -5 "$T/d.log")"

note "raw sessions: reinstatement by ISID at max_sessions = 1, bad PDUs"
python3 "$(dirname "$0")/lib/iscsi_raw.py" 127.0.0.1 "$PORT" "$LONG" ||
	fail "iscsi_raw.py: $(tail -5 "$T/d.log")"
grep -q "reinstating 1 session of iqn.2026-12.org.test:raw,i,0x80123456789a" \
	"$T/d.log" || fail "no reinstatement logged"

note "SIGTERM with a session open to the long-named target: it ends"
logins() { grep -c "login: normal session to $LONG from iqn.2008-11.org.linux-kvm" "$T/d.log"; }
before=$(logins)
timeout 60 qemu-io -f raw -c "sleep 30000" "$OTHER" >"$T/hold2.log" 2>&1 &
hold=$!
for ((i = 0; i < 200; i++)); do
	(($(logins) > before)) && break
	sleep 0.05
done
(($(logins) > before)) || fail "the holding session did not log in"
stop_daemon
grep -q "close target $LONG initiator iqn.2008-11.org.linux-kvm: .*server shutting down" \
	"$T/d.log" || fail "the open session was not shut down: $(tail -3 "$T/d.log")"
wait "$hold" 2>/dev/null || true
echo "PASS: iscsi_clients"
