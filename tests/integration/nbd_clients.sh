#!/usr/bin/env bash
# blkstackd's NBD export as real clients see it: nbdinfo's capability
# flags (fast zero follows write_zeroes_unmap, live through the control
# socket), qemu-io zeroing with and without unmap and with fast zero,
# qemu-img convert/compare/map, holes through base:allocation.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need nbdinfo qemu-io qemu-img jq python3
daemon_setup
STRIPED=
if has_type striped; then
	STRIPED="
[device s0]
type = file
path = $T/s0.img
size = 128M

[device s1]
type = file
path = $T/s1.img
size = 128M
zeroes = write

[device st]
type = striped
devices = s0 s1
chunk = 64K

[export st]
type = nbd
device = st
listen = 127.0.0.1:$PORT
"
fi
cat >>"$T/d.ini" <<EOC
[device vol0]
type = file
path = $T/vol0.img
size = 1G

[device slow]
type = file
path = $T/slow.img
size = 64M
zeroes = write

[export vol0]
type = nbd
device = vol0
description = test volume
listen = 127.0.0.1:$PORT
socket = $T/nbd.sock

[export slow]
type = nbd
device = slow
listen = 127.0.0.1:$PORT

[export ro]
type = nbd
device = vol0
readonly = 1
listen = 127.0.0.1:$PORT
$STRIPED
EOC
start_daemon "$T/d.ini"
U=nbd://127.0.0.1:$PORT
alloc() { du --block-size=1 "$1" | cut -f1; }
qio() { timeout 120 qemu-io -f raw "$@"; }

note "capabilities of a capable export"
J=$(timeout 20 nbdinfo --json "$U/vol0")
for k in can_zero can_fast_zero can_trim can_flush can_fua can_multi_conn \
	can_cache; do
	[[ $(jq -r ".exports[0].$k" <<<"$J") == true ]] || fail "vol0: $k not true: $J"
done
[[ $(jq -r '.exports[0].is_read_only' <<<"$J") == false ]] || fail "vol0 read-only"
[[ $(jq -r '.exports[0]."export-size"' <<<"$J") == 1073741824 ]] || fail "vol0 size: $J"
[[ $(jq -r '.exports[0].description' <<<"$J") == "test volume" ]] || fail "description: $J"
[[ $(jq -r '.exports[0].contexts[0]' <<<"$J") == base:allocation ]] || fail "no base:allocation: $J"
[[ $(jq -r '.exports[0].block_size_maximum' <<<"$J") -ge 1048576 ]] || fail "block max: $J"

note "the UNIX socket serves the same export"
[[ $(nbd_flag "nbd+unix:///vol0?socket=$T/nbd.sock" can_fast_zero) == true ]] ||
	fail "unix socket: no fast zero"
note "NBD_OPT_LIST names every export"
L=$(timeout 20 nbdinfo --list --json "$U")
for e in vol0 slow ro; do
	jq -e --arg e "$e" '.exports[] | select(."export-name" == $e)' <<<"$L" >/dev/null ||
		fail "list lacks $e: $L"
done

note "an incapable export (zeroes = write) offers zero, not fast zero"
[[ $(nbd_flag "$U/slow" can_zero) == true ]] || fail "slow: no can_zero"
[[ $(nbd_flag "$U/slow" can_fast_zero) == false ]] || fail "slow offers fast zero"
[[ $(nbd_flag "$U/ro" is_read_only) == true ]] || fail "ro not read-only"

note "the knob, through the control socket, governs new connections"
ctl 0 attr vol0 queue/write_zeroes_unmap 0
[[ $(nbd_flag "$U/vol0" can_fast_zero) == false ]] || fail "knob 0: still fast zero"
ctl 0 attr vol0 queue/write_zeroes_unmap
[[ $OUT == 0 ]] || fail "knob reads '$OUT'"
ctl 0 attr vol0 queue/write_zeroes_unmap 1
[[ $(nbd_flag "$U/vol0" can_fast_zero) == true ]] || fail "knob 1: no fast zero"
ctl 1 attr nosuch queue/write_zeroes_unmap
expect_err nosuch

note "write -z -u over 1 GiB of data: zeroes read back, blocks freed"
qio "$U/vol0" -c 'write -P 0x5a 0 1G' >/dev/null
a=$(alloc "$T/vol0.img")
((a >= 1073741824)) || fail "1 GiB written but only $a bytes allocated"
qio "$U/vol0" -c 'write -z -u 0 1G' -c 'read -P 0 0 1G' >"$T/q" || { cat "$T/q"; fail "write -z -u"; }
grep -q 'Pattern verification failed' "$T/q" && fail "not zero after write -z -u"
a=$(alloc "$T/vol0.img")
((a < 16 << 20)) || fail "write -z -u left $a bytes allocated"

note "write -z without unmap: zeroes, still allocated"
qio "$U/vol0" -c 'write -P 0x11 0 64M' -c 'write -z 0 64M' -c 'read -P 0 0 64M' >"$T/q"
grep -q 'Pattern verification failed' "$T/q" && fail "not zero after write -z"
a=$(alloc "$T/vol0.img")
((a >= 64 << 20)) || fail "write -z (NO_HOLE) freed blocks: $a allocated"

note "write -z -n (fast zero): works on vol0, refused on slow with nothing written"
qio "$U/vol0" -c 'write -z -n 0 64M' >"$T/q" 2>&1 || { cat "$T/q"; fail "fast zero on vol0"; }
grep -qi 'not supported' "$T/q" && fail "vol0 refused fast zero: $(cat "$T/q")"
qio "$U/slow" -c 'write -P 0x77 0 1M' >/dev/null
qio "$U/slow" -c 'write -z -n 0 1M' >"$T/q" 2>&1 || true
grep -q 'Operation not supported' "$T/q" || fail "slow fast zero: $(cat "$T/q")"
qio "$U/slow" -c 'read -P 0x77 0 1M' >"$T/q"
grep -q 'Pattern verification failed' "$T/q" && fail "refused fast zero changed data"
if [[ -n $STRIPED ]]; then
	note "striped over a zeroes=write leg: no fast zero either"
	[[ $(nbd_flag "$U/st" can_fast_zero) == false ]] || fail "striped offers fast zero"
	qio "$U/st" -c 'write -P 0x33 0 1M' >/dev/null
	qio "$U/st" -c 'write -z -n 0 1M' >"$T/q" 2>&1 || true
	grep -q 'Operation not supported' "$T/q" || fail "striped fast zero: $(cat "$T/q")"
	qio "$U/st" -c 'read -P 0x33 0 1M' >"$T/q"
	grep -q 'Pattern verification failed' "$T/q" && fail "striped: refused fast zero changed data"
else
	note "(striped mapper not built in: its fast-zero case not run)"
fi

note "read-only export refuses writes"
qio "$U/ro" -c 'write -P 1 0 4k' >"$T/q" 2>&1 || true
grep -qi -e 'read-only' -e 'not permitted' -e 'permission denied' "$T/q" || fail "ro write: $(cat "$T/q")"

note "qemu-img convert a sparse 1 GiB image, compare, map shows the holes"
qemu-img create -q -f raw "$T/src.img" 1G
qio "$T/src.img" -c 'write -P 0xc1 0 1M' -c 'write -P 0xc2 300M 2M' \
	-c 'write -P 0xc3 1023M 1M' >/dev/null
timeout 120 qemu-img convert -n -f raw -O raw "$T/src.img" "$U/vol0" ||
	fail "qemu-img convert"
timeout 120 qemu-img compare -f raw -F raw "$T/src.img" "$U/vol0" >"$T/q" ||
	{ cat "$T/q"; fail "qemu-img compare"; }
grep -q 'identical' "$T/q" || fail "compare: $(cat "$T/q")"
if command -v nbdcopy >/dev/null; then
	note "nbdcopy out of the export reproduces the image"
	timeout 120 nbdcopy "$U/vol0" "$T/back.img" || fail "nbdcopy from the export"
	cmp "$T/src.img" "$T/back.img" || fail "nbdcopy copy differs"
	rm -f "$T/back.img"
fi
M=$(timeout 60 qemu-img map -f raw --output=json "$U/vol0")
holes=$(jq '[.[] | select(.data == false)] | length' <<<"$M")
((holes >= 2)) || fail "qemu-img map shows $holes holes: $M"
D=$(timeout 60 nbdinfo --map "$U/vol0")
grep -q hole <<<"$D" || fail "nbdinfo --map shows no hole: $D"
a=$(alloc "$T/vol0.img")
((a < 64 << 20)) || fail "after convert $a bytes allocated (holes not kept)"

stop_daemon
grep -q 'stopped' "$T/d.log" || fail "no 'stopped' line in the log"
echo "PASS"
