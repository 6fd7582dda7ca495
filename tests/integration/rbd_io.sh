#!/usr/bin/env bash
# The rbd driver with many requests in flight, and discard, against a real
# one-node Ceph cluster (scripts/ceph-cluster.sh), through blkstackd's NBD
# export of an rbd device:
#   - fio's nbd engine at depth 16, two jobs, random writes of 4K..256K
#     verified with crc32c (librbd completes on its own threads, the
#     completions come back to the loops): no error, no mismatch, and the
#     driver's info shows that many requests were in flight at once;
#   - TRIM (qemu-io discard) over three whole 4 MiB objects plus unaligned
#     edges: `rbd du` drops by exactly the whole objects, they read back
#     zeroes, the bytes outside the range are unchanged, and the partial
#     pieces inside it keep their data (rbd_skip_partial_discard, as
#     docs/drivers.md says: discard is advisory, never zeroing).
# In the ThreadSanitizer stage too (scripts/run-tsan.sh).
# check: alone (a Ceph cluster of its own (CPU-heavy start, 4 GiB memstore))
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
source "$(dirname "$0")/lib/ceph.bash"
need qemu-io fio jq
fio --enghelp=nbd >/dev/null 2>&1 || skip "fio has no nbd engine"
daemon_setup
ceph_setup

M=$((1024 * 1024))
rbd_nbd_config rbd/io 64M
start_daemon "$T/d.ini"
U=nbd://127.0.0.1:$PORT/r
R="rbd:rbd/io:conf=$CEPH_CONF"
wait_live r

note "fio crc32c verify at depth 16, two jobs (many requests in flight)"
fio_verify r "$U" --size=24M --offset=8M --offset_increment=28M \
	--numjobs=2 --iodepth=16
ctl 0 info r
[[ $OUT =~ inflight\ +0\ \(peak\ ([0-9]+)\) ]] || fail "no in-flight count: $OUT"
peak=${BASH_REMATCH[1]}
# two NBD connections at depth 16 each: the requests overlap in librbd
((peak >= 16)) || fail "at most $peak requests in flight at once"
note "up to $peak requests in flight in librbd"

note "discard: whole objects freed and read zeroes, the edges stay"
# objects 0..4 (0..20M) hold 0x3c; discard 4M-1000 .. 16M+3000
qio "$U" -c "write -z -u 0 64M" -c "write -P 0x3c 0 $((20 * M))" ||
	fail "fill 0..20M"
used=$(rbd_used rbd/io)
((used == 20 * M)) || fail "20M written in 5 objects: used $used"
qio "$U" -c "discard $((4 * M - 1000)) $((12 * M + 4000))" || fail "discard"
used=$(rbd_used rbd/io)
((used == 8 * M)) || fail "discard of 3 whole objects: used $used, want 8M"
for u in "$R" "$U"; do
	qio "$u" -c "read -P 0x3c 0 $((4 * M - 1000))" \
		-c "read -P 0x3c $((4 * M - 1000)) 1000" \
		-c "read -P 0 $((4 * M)) $((12 * M))" \
		-c "read -P 0x3c $((16 * M)) 3000" \
		-c "read -P 0x3c $((16 * M + 3000)) $((4 * M - 3000))" \
		-c "read -P 0 $((20 * M)) $M" ||
		fail "after the discard, bytes read wrong on ${u%%:*}"
done

stop_daemon
note "rbd_io: pass"
