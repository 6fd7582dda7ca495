#!/usr/bin/env bash
# iSCSI login security and digests (issue 13, part 1):
# - a target with chap_user/chap_secret: the right secret logs in and
#   reads; a wrong secret, a wrong user and no credentials are refused
#   (status 02/01 in the log) and no command reaches the LUN;
# - mutual CHAP: libiscsi's target_user/target_password checked against
#   the target's mutual secret: right one logs in, wrong one is refused
#   by the initiator;
# - header digests: a target with header_digest = CRC32C gets CRC32C
#   from libiscsi (which offers None,CRC32C); data written and read back
#   through qemu-io is intact and the log names the digest chosen; with
#   header_digest = None only, None is chosen. (libiscsi offers no data
#   digest; the data digest is covered by the unit tests and the fuzzer.)
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need iscsi-inq iscsi-readcapacity16 qemu-io python3
qemu-img --help 2>/dev/null | grep -qw iscsi ||
	skip "qemu-img without the iscsi block driver (qemu-block-extra)"
daemon_setup
cat >>"$T/d.ini" <<EOC
[device d0]
type = file
path = $T/a.img
size = 16M
[device d1]
type = mem
size = 8M
[export sec]
type = iscsi
device = d0
listen = 127.0.0.1:$PORT
chap_user = alice
chap_secret = alice-secret-123
mutual_chap_user = target0
mutual_chap_secret = target-secret-456
[export dig]
type = iscsi
device = d1
listen = 127.0.0.1:$PORT
header_digest = CRC32C
data_digest = CRC32C,None
[export nod]
type = iscsi
device = d1
readonly = 1
listen = 127.0.0.1:$PORT
header_digest = None
EOC
start_daemon "$T/d.ini"
SEC=iqn.2026-12.org.blkstack:sec
DIG=iqn.2026-12.org.blkstack:dig
NOD=iqn.2026-12.org.blkstack:nod
H=127.0.0.1:$PORT

note "CHAP with the right secret"
out=$(timeout 20 iscsi-readcapacity16 "iscsi://alice%alice-secret-123@$H/$SEC/0") ||
	fail "CHAP login with the right secret: $out"
grep -q "Total size:16777216" <<<"$out" || fail "$out"

refused() {
	local n
	n=$(grep -c "login refused (status 02/01)" "$T/d.log" || true)
	if out=$(timeout 20 iscsi-readcapacity16 "$1" 2>&1); then
		fail "$2: login succeeded: $out"
	fi
	(($(grep -c "login refused (status 02/01)" "$T/d.log") > n)) ||
		fail "$2: no 02/01 refusal logged: $(tail -3 "$T/d.log")"
}
note "CHAP refusals: wrong secret, wrong user, no credentials"
refused "iscsi://alice%wrong-secret-000@$H/$SEC/0" "wrong secret"
refused "iscsi://mallory%alice-secret-123@$H/$SEC/0" "wrong user"
refused "iscsi://$H/$SEC/0" "no credentials"

note "mutual CHAP"
out=$(timeout 20 iscsi-readcapacity16 \
	"iscsi://alice%alice-secret-123@$H/$SEC/0?target_user=target0&target_password=target-secret-456") ||
	fail "mutual CHAP with the right target secret: $out"
if out=$(timeout 20 iscsi-readcapacity16 \
	"iscsi://alice%alice-secret-123@$H/$SEC/0?target_user=target0&target_password=not-the-secret" 2>&1); then
	fail "mutual CHAP with a wrong target secret was accepted: $out"
fi

note "header digest CRC32C"
timeout 60 qemu-io -f raw -c "write -P 0xa5 0 4M" -c "read -P 0xa5 0 4M" \
	"iscsi://$H/$DIG/0" >/dev/null || fail "write/read with digests"
grep -q "login: normal session to $DIG .*digests CRC32C/None" "$T/d.log" ||
	fail "header digest not CRC32C: $(grep "$DIG" "$T/d.log" | tail -2)"
note "header digest None where only None is allowed"
out=$(timeout 20 iscsi-readcapacity16 "iscsi://$H/$NOD/0") || fail "$out"
grep -q "login: normal session to $NOD .*digests None/None" "$T/d.log" ||
	fail "header digest not None: $(grep "$NOD" "$T/d.log" | tail -2)"

stop_daemon
grep -q "digest error" "$T/d.log" && fail "digest errors: $(grep 'digest error' "$T/d.log")"
echo "PASS: iscsi_chap"
