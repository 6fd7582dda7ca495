#!/usr/bin/env bash
# The rbd driver against a real one-node Ceph cluster
# (scripts/ceph-cluster.sh), exported over NBD by blkstackd:
#   - explain/info: unmap zeroing from librbd's write_zeroes; NBD fast zero;
#   - bytes written through blkstack read back with qemu-io on
#     rbd:POOL/IMAGE, and the other way round;
#   - zeroing of unaligned ranges over data reads back zeroes, byte-exact,
#     with the bytes around kept (may-unmap and NOUNMAP zeroing);
#   - `rbd du` drops after may-unmap zeroing of whole objects and does not
#     after NOUNMAP zeroing;
#   - nbdinfo --map shows holes and data; qemu-img convert of the export
#     equals the image read by qemu directly;
#   - a missing image or pool, or create with another size, fail the open
#     naming the step.
# check: alone (a Ceph cluster of its own (CPU-heavy start, 4 GiB memstore))
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
source "$(dirname "$0")/lib/ceph.bash"
need nbdinfo qemu-io qemu-img jq python3 cmp
daemon_setup
ceph_setup

M=$((1024 * 1024))
rbd_nbd_config rbd/v1 64M
start_daemon "$T/d.ini"
U=nbd://127.0.0.1:$PORT/r
R="rbd:rbd/v1:conf=$CEPH_CONF"

note "explain and NBD flags: unmap zeroing from librbd's write_zeroes"
wait_live r
ctl 0 explain r
[[ $OUT == *"write_zeroes_unmap yes"*"granularity 0"* ]] || fail "explain: $OUT"
ctl 0 info r
[[ $OUT == *"object_size"*4194304* ]] || fail "info lacks the object size: $OUT"
[[ $(nbd_flag "$U" can_fast_zero) == true ]] || fail "no fast zero over NBD"
[[ $(nbd_flag "$U" can_zero) == true ]] || fail "no zero over NBD"
[[ $(nbd_flag "$U" can_trim) == true ]] || fail "no trim over NBD"
[[ $(rbd_used rbd/v1) == 0 ]] || fail "a new image uses $(rbd_used rbd/v1) bytes"

note "blkstack writes, qemu reads rbd: directly"
qio "$U" -c "write -P 0xa1 0 5M" -c "write -P 0xb2 $((20 * M + 7 * 512)) 3000" ||
	fail "writes through NBD"
qio "$R" -c "read -P 0xa1 0 5M" -c "read -P 0 5M 1M" \
	-c "read -P 0xb2 $((20 * M + 7 * 512)) 3000" ||
	fail "qemu-io on rbd: does not read what blkstack wrote"

note "qemu writes rbd: directly, blkstack reads"
qio "$R" -c "write -P 0xc3 $((40 * M + 1)) 1234567" || fail "qemu-io writes rbd:"
qio "$U" -c "read -P 0 $((40 * M)) 1" -c "read -P 0xc3 $((40 * M + 1)) 1234567" \
	-c "read -P 0 $((40 * M + 1 + 1234567)) 1" ||
	fail "blkstack does not read what qemu wrote"

note "unaligned zeroing over data reads zeroes, the bytes around stay"
qio "$U" -c "write -P 0x5a $((8 * M)) $((8 * M))" || fail "fill 8M..16M"
# may unmap (no NO_HOLE): an odd range inside one object, one across two
qio "$U" -c "write -z -u $((8 * M + 3)) 4093" \
	-c "write -z -u $((12 * M - 777)) 10001" || fail "may-unmap zeroing"
# NOUNMAP (NO_HOLE)
qio "$U" -c "write -z $((14 * M + 511)) 70001" || fail "NOUNMAP zeroing"
qio "$R" -c "read -P 0x5a $((8 * M)) 3" -c "read -P 0 $((8 * M + 3)) 4093" \
	-c "read -P 0x5a $((8 * M + 4096)) $((4 * M - 4096 - 777))" \
	-c "read -P 0 $((12 * M - 777)) 10001" \
	-c "read -P 0x5a $((12 * M - 777 + 10001)) 100000" \
	-c "read -P 0x5a $((14 * M)) 511" -c "read -P 0 $((14 * M + 511)) 70001" \
	-c "read -P 0x5a $((14 * M + 511 + 70001)) 4096" ||
	fail "zeroed ranges or their neighbours read wrong (qemu on rbd:)"
qio "$U" -c "read -P 0 $((8 * M + 3)) 4093" -c "read -P 0 $((12 * M - 777)) 10001" \
	-c "read -P 0 $((14 * M + 511)) 70001" -c "read -P 0x5a $((15 * M)) $M" ||
	fail "zeroed ranges read wrong through blkstack"

note "rbd du: may-unmap zeroing of whole objects frees them, NOUNMAP does not"
qio "$U" -c "write -z -u 0 64M" || fail "zero the image"
[[ $(rbd_used rbd/v1) == 0 ]] || fail "after zeroing everything: used $(rbd_used rbd/v1)"
qio "$U" -c "write -P 0x77 $((24 * M)) $((16 * M))" || fail "write 16M"
used=$(rbd_used rbd/v1)
((used == 16 * M)) || fail "16M written in 4 objects: used $used"
qio "$U" -c "write -z $((24 * M)) $((16 * M))" || fail "NOUNMAP zeroing"
used=$(rbd_used rbd/v1)
((used == 16 * M)) || fail "NOUNMAP zeroing freed objects: used $used"
qio "$R" -c "read -P 0 $((24 * M)) $((16 * M))" || fail "NOUNMAP zeroes read wrong"
qio "$U" -c "write -P 0x78 $((24 * M)) $((16 * M))" || fail "write 16M again"
qio "$U" -c "write -z -u $((24 * M)) $((16 * M))" || fail "may-unmap zeroing"
used=$(rbd_used rbd/v1)
((used == 0)) || fail "may-unmap zeroing of 4 whole objects left used $used"
qio "$R" -c "read -P 0 $((24 * M)) $((16 * M))" || fail "unmapped zeroes read wrong"

note "with the knob off, may-unmap zeroing keeps objects and fast zero goes"
ctl 0 attr r queue/write_zeroes_unmap 0
[[ $(nbd_flag "$U" can_fast_zero) == false ]] || fail "fast zero with the knob off"
qio "$U" -c "write -P 0x79 $((24 * M)) $((8 * M))" -c "write -z -u $((24 * M)) $((8 * M))" ||
	fail "zeroing with the knob off"
used=$(rbd_used rbd/v1)
((used == 8 * M)) || fail "knob off, zeroing freed objects: used $used"
ctl 0 attr r queue/write_zeroes_unmap 1
[[ $(nbd_flag "$U" can_fast_zero) == true ]] || fail "fast zero not back"

note "nbdinfo --map: data where written, holes elsewhere"
qio "$U" -c "write -z -u 0 64M" -c "write -P 0x42 $((4 * M)) $((4 * M))" \
	-c "write -P 0x43 $((60 * M)) 4096" || fail "layout for the map"
timeout 30 nbdinfo --map --json "$U" >"$T/map" || fail "nbdinfo --map"
python3 - "$T/map" <<'EOF' || fail "map wrong: $(cat "$T/map")"
import json, sys
M = 1 << 20
ext = json.load(open(sys.argv[1]))
data = [(e["offset"], e["offset"] + e["length"]) for e in ext
        if not (e["type"] & 1)]
# whole objects: 4M..8M and the object holding 60M
assert data == [(4 * M, 8 * M), (60 * M, 64 * M)], data
assert sum(e["length"] for e in ext) == 64 * M
EOF

note "qemu-img convert of the NBD export equals the image read by qemu"
timeout 120 qemu-img convert -f raw -O raw "$U" "$T/via-nbd.raw" || fail "convert from NBD"
timeout 120 qemu-img convert -f raw -O raw "$R" "$T/direct.raw" || fail "convert from rbd:"
cmp "$T/via-nbd.raw" "$T/direct.raw" || fail "the two copies differ"
timeout 120 qemu-img compare -f raw -F raw "$U" "$T/direct.raw" >/dev/null ||
	fail "qemu-img compare"

note "open failures say which step and why"
out=$("$BS" info "rbd:rbd/nope,conf=$CEPH_CONF" 2>&1 || true)
[[ $out == *"failed: rbd rbd/nope: no such image (create = SIZE makes it)"* ]] ||
	fail "missing image: $out"
out=$("$BS" info "rbd:nopool/x,conf=$CEPH_CONF" 2>&1 || true)
[[ $out == *"no such pool"* ]] || fail "missing pool: $out"
out=$("$BS" info "rbd:rbd/v1,conf=$CEPH_CONF,create=32M" 2>&1 || true)
[[ $out == *"the image has 67108864 bytes, create = 33554432"* ]] ||
	fail "create with another size: $out"

stop_daemon
note "rbd_data: pass"
