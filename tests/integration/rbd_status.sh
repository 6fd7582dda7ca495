#!/usr/bin/env bash
# The rbd driver's block status and its time budget, against a real
# one-node Ceph cluster (scripts/ceph-cluster.sh), through blkstackd's NBD
# export and nbdinfo --map:
#   - an image with fast-diff (librbd's default features), default budget
#     (100 ms): the map is exact (data where written, holes elsewhere) and
#     no call was cut;
#   - an image without an object map (every object a round trip) and
#     status_budget = 1ms: calls are cut (block_status_cut in info), what
#     they found is right (the first object's data, the hole after it),
#     and nothing written is ever reported as a hole;
#   - the cache: info says the flush at open put librbd's cache in
#     write-back (rbd_cache_writethrough_until_flush).
# check: alone (a Ceph cluster of its own (CPU-heavy start, 4 GiB memstore); a 1 ms status budget)
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
source "$(dirname "$0")/lib/ceph.bash"
need nbdinfo qemu-io jq
daemon_setup
ceph_setup

PORT2=$(free_port)
M=$((1024 * 1024))
G=$((1024 * M))
timeout 60 rbd create --size 4G --image-feature layering rbd/slow ||
	fail "rbd create rbd/slow"
cat >>"$T/d.ini" <<EOC
[device f]
type = rbd
image = rbd/fast
conf = $CEPH_CONF
create = 2G

[device s]
type = rbd
image = rbd/slow
conf = $CEPH_CONF
status_budget = 1ms

[export f]
type = nbd
device = f
listen = 127.0.0.1:$PORT

[export s]
type = nbd
device = s
listen = 127.0.0.1:$PORT2
EOC
start_daemon "$T/d.ini"
UF=nbd://127.0.0.1:$PORT/f
US=nbd://127.0.0.1:$PORT2/s
wait_live f
wait_live s

note "the cache is write-back from the open (one flush at open)"
ctl 0 info f
[[ $OUT == *"rbd_cache true, write-back: flushed at open"* ]] || fail "info f cache: $OUT"

write() {	# URI OFFSET...: 1 MiB of 0x5a at each offset
	local u=$1 a=()
	shift
	for o in "$@"; do a+=(-c "write -P 0x5a $o 1M"); done
	timeout 60 qemu-io -f raw "$u" "${a[@]}" -c flush >"$T/q.log" 2>&1 ||
		{ cat "$T/q.log"; fail "writes to $u"; }
}

# mapped URI: nbdinfo --map as "offset length data|hole" lines
mapped() {
	timeout 60 nbdinfo --map --json "$1" |
		jq -r '.[] | "\(.offset) \(.length) \(if (.type % 2) == 1 then "hole" else "data" end)"'
}

# no_hole_over MAPFILE OFF LEN: no hole extent overlaps [OFF, OFF+LEN)
no_hole_over() {
	awk -v o="$2" -v l="$3" '$3 == "hole" && $1 < o + l && $1 + $2 > o { bad = 1 }
		END { exit bad }' "$1"
}

note "fast-diff image, default budget: the map is exact, nothing cut"
write "$UF" 0 $G
mapped "$UF" >"$T/f.map" || fail "nbdinfo --map f"
# whole objects (4 MiB) come back as data
grep -q "^0 $((4 * M)) data$" "$T/f.map" || { cat "$T/f.map"; fail "f: no data at 0"; }
grep -q "^$G $((4 * M)) data$" "$T/f.map" || { cat "$T/f.map"; fail "f: no data at 1G"; }
grep -q "^$((4 * M)) $((G - 4 * M)) hole$" "$T/f.map" ||
	{ cat "$T/f.map"; fail "f: no hole between"; }
ctl 0 info f
[[ $OUT == *"block_status_cut"*"0 of "*"status_budget 100 ms"* ]] ||
	fail "f: calls cut: $OUT"

note "no object map, status_budget 1ms: calls cut, what they say is true"
write "$US" 0 $((3 * G))
t0=$(date +%s%N)
mapped "$US" >"$T/s.map" || fail "nbdinfo --map s"
ms=$((($(date +%s%N) - t0) / 1000000))
ctl 0 info s
[[ $OUT =~ block_status_cut\ +([0-9]+)\ of\ ([0-9]+) ]] || fail "s: no counter: $OUT"
cut=${BASH_REMATCH[1]} calls=${BASH_REMATCH[2]}
note "s: map in $ms ms, $cut of $calls block status calls cut; $(wc -l <"$T/s.map") extents"
((cut >= 1)) || { cat "$T/s.map"; fail "s: no call was cut with a 1 ms budget"; }
grep -q "^0 $((4 * M)) data$" "$T/s.map" || { cat "$T/s.map"; fail "s: no data at 0"; }
# the first piece (64 objects) is always walked: the hole after object 0
awk -v a=$((4 * M)) '$1 == a && $3 == "hole" { f = 1 } END { exit !f }' "$T/s.map" ||
	{ cat "$T/s.map"; fail "s: the first piece's hole is missing"; }
no_hole_over "$T/s.map" 0 $M || { cat "$T/s.map"; fail "s: written data at 0 reported as a hole"; }
no_hole_over "$T/s.map" $((3 * G)) $M ||
	{ cat "$T/s.map"; fail "s: written data at 3G reported as a hole"; }
timeout 60 qemu-io -f raw "$US" -c "read -P 0x5a $((3 * G)) 1M" >"$T/q.log" 2>&1 ||
	{ cat "$T/q.log"; fail "s: read back"; }
grep -qi -e fail -e error "$T/q.log" && { cat "$T/q.log"; fail "s: read back"; }

stop_daemon
echo "PASS: rbd_status"
