#!/usr/bin/env bash
# Targets with units (issue 11 item 2): one [export] with unit.NAME lines
# serves each unit as an NBD export name on one listener, beside an export
# written the old way (device =) on the same address:
# - nbdinfo --list shows every unit (and the old export), with the unit's
#   description;
# - qemu-io writes to unit a and reads it back; unit b (another device) is
#   unchanged; unit c (a's device, unit.c.readonly = 1) reads a's data and
#   refuses writes;
# - each unit claims its device, named after the unit;
# - blkstack ls lists each export: its units and devices, the listener;
# - a unit name that another export already serves on the same address is
#   refused at start with file:line, before anything is created.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need python3 nbdinfo qemu-io jq
make_tmp
trap daemon_cleanup EXIT

PORT=$(free_port)
CTL=$T/ctl.sock
cat >"$T/d.ini" <<EOC
[daemon]
state_dir = $T/state
control = $CTL
[device da]
type = file
path = $T/a.img
size = 4M
[device db]
type = file
path = $T/b.img
size = 8M
[device old]
type = mem
size = 1M
[export t]
type = nbd
listen = 127.0.0.1:$PORT
description = target t
unit.a = da
unit.b = db
unit.b.description = the b unit
unit.c = da
unit.c.readonly = 1
[export old]
type = nbd
device = old
listen = 127.0.0.1:$PORT
EOC
start_daemon "$T/d.ini"
URI=nbd://127.0.0.1:$PORT

note "the log names each unit"
grep -q "export t unit a (nbd): device da, 4 MiB" "$T/d.log" ||
	fail "no ready line for unit a: $(cat "$T/d.log")"
grep -q "export t unit c (nbd): device da, 4 MiB, read-only" "$T/d.log" ||
	fail "no read-only ready line for unit c: $(cat "$T/d.log")"
grep -q "export old (nbd): device old, 1 MiB" "$T/d.log" ||
	fail "the old export's ready line changed: $(cat "$T/d.log")"

note "blkstack ls shows each export with its units, listener and clients"
ctl 0 ls
LS=$OUT
grep -Eq "^t +nbd +0  127\.0\.0\.1:$PORT +a=da,b=db,c=da\(ro\)$" <<<"$LS" ||
	fail "ls: no line for target t with its units: $LS"
grep -Eq "^old +nbd +0  127\.0\.0\.1:$PORT +old$" <<<"$LS" ||
	fail "ls: no line for export old: $LS"

note "nbdinfo --list shows every unit on the one listener"
LIST=$(timeout 20 nbdinfo --list --json "$URI")
NAMES=$(jq -r '[.exports[]["export-name"]] | join(" ")' <<<"$LIST")
[[ $NAMES == "a b c old" ]] || fail "export names: '$NAMES'"
DESC=$(jq -r '.exports[] | select(.["export-name"] == "b") | .description' <<<"$LIST")
[[ $DESC == "the b unit" ]] || fail "unit b description: '$DESC'"
DESC=$(jq -r '.exports[] | select(.["export-name"] == "a") | .description' <<<"$LIST")
[[ $DESC == "target t" ]] || fail "unit a description: '$DESC'"
SIZE=$(jq -r '.exports[] | select(.["export-name"] == "b") | .["export-size"]' <<<"$LIST")
((SIZE == 8 * 1024 * 1024)) || fail "unit b size: $SIZE"
RO=$(jq -r '.exports[] | select(.["export-name"] == "c") | .["is_read_only"]' <<<"$LIST")
[[ $RO == true ]] || fail "unit c not read-only: $RO"

note "qemu-io writes to unit a and reads it back; unit b is unchanged"
OUT=$(timeout 30 qemu-io -f raw "$URI/a" -c "write -P 0xab 64k 128k" -c "read -P 0xab 64k 128k" 2>&1) ||
	fail "qemu-io on unit a: $OUT"
[[ $OUT == *"wrote 131072/131072"* && $OUT == *"read 131072/131072"* ]] ||
	fail "qemu-io on unit a: $OUT"
[[ $OUT != *"Pattern verification failed"* ]] || fail "unit a reads back wrong: $OUT"
OUT=$(timeout 30 qemu-io -r -f raw "$URI/b" -c "read -P 0 0 8M" 2>&1) ||
	fail "qemu-io read of unit b: $OUT"
[[ $OUT == *"read 8388608/8388608"* && $OUT != *"Pattern verification failed"* ]] ||
	fail "unit b changed: $OUT"

note "unit c serves a's device read-only"
OUT=$(timeout 30 qemu-io -r -f raw "$URI/c" -c "read -P 0xab 64k 128k" 2>&1) ||
	fail "qemu-io read of unit c: $OUT"
[[ $OUT == *"read 131072/131072"* && $OUT != *"Pattern verification failed"* ]] ||
	fail "unit c does not show a's data: $OUT"
OUT=$(timeout 30 qemu-io -f raw "$URI/c" -c "write -P 0xcd 0 4k" 2>&1) || true
[[ $OUT != *"wrote 4096/4096"* ]] || fail "unit c took a write: $OUT"

note "each unit claims its device, named after the unit"
ctl 0 info da
[[ $OUT == *"export nbd/t/a (write)"* && $OUT == *"export nbd/t/c (read)"* ]] ||
	fail "info da names no unit holders: $OUT"

stop_daemon
note "the data is in a.img, b.img is untouched"
cmp -s -n 65536 "$T/a.img" /dev/zero || fail "a.img changed before 64k"
python3 - "$T/a.img" <<'EOF' || fail "a.img lacks the pattern"
import sys
d = open(sys.argv[1], "rb").read()
sys.exit(0 if d[65536:65536 + 131072] == b"\xab" * 131072 and d[65536 + 131072:] == bytes(len(d) - 196608) else 1)
EOF
cmp -s "$T/b.img" <(head -c 8M /dev/zero) || fail "b.img changed"

note "a unit name served twice on one address is refused at file:line"
PORT2=$(free_port)
cat >"$T/bad.ini" <<EOC
[daemon]
state_dir = $T/never
[device da]
type = mem
size = 1M
[device db]
type = mem
size = 1M
[export t]
type = nbd
listen = 127.0.0.1:$PORT2
unit.a = da
unit.b = db
[export u]
type = nbd
listen = 127.0.0.1:$PORT2
unit.b = da
EOC
rc=0
timeout 30 "$BSD" -f -c "$T/bad.ini" >"$T/out" 2>"$T/err" || rc=$?
ERR=$(grep -v '^[0-9]\{4\}-' "$T/err" || true)
((rc == 1)) || fail "clash: exit $rc, expected 1: $ERR"
expect_err "bad.ini:17: export u: NBD export name 'b' is already served on 127.0.0.1:$PORT2 by export t"
[[ ! -e $T/never ]] || fail "a refused config left its state dir"

note "ok"
