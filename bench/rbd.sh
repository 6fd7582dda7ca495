#!/usr/bin/env bash
# RBD on the one-node test cluster (scripts/ceph-cluster.sh, memstore):
#
#   1. 1 GiB of written data made zeroes: by writing zeroes (qemu-io on
#      rbd:, the data path), by blkstack's NOUNMAP zeroing (librbd
#      THICK_PROVISION write-same), and by unmap zeroing (blkstack
#      zeroout, and qemu-io write -z -u over NBD from blkstackd); `rbd du`
#      after each.
#   2. NBD over RBD: fio's nbd engine against blkstackd (an rbd device)
#      and qemu-nbd (its own rbd driver) serving the same image.
#
# Markdown on stdout. A memstore OSD on 2 shared cores is not a Ceph
# cluster: the ratios say how the two servers and the zeroing methods
# compare on it, not what a real cluster does.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_dir

CEPH_DIR=$BENCH_DIR/ceph
rbd_cleanup() {
	"$BENCH_ROOT/scripts/ceph-cluster.sh" stop "$CEPH_DIR" >/dev/null 2>&1 || true
	bench_cleanup
}
trap rbd_cleanup EXIT
if ! "$BENCH_ROOT/scripts/ceph-cluster.sh" start "$CEPH_DIR" >"$BENCH_DIR/ceph.log" 2>&1; then
	echo "**bench/rbd.sh: the test cluster did not start**"
	tail -5 "$BENCH_DIR/ceph.log"
	exit 0
fi
CONF=$CEPH_DIR/ceph.conf
export CEPH_CONF=$CONF
GIB=$(pick 1 1)
IMG=bench
DEV="rbd:rbd/$IMG,conf=$CONF"
R="rbd:rbd/$IMG:conf=$CONF"

used() { rbd du --format json "rbd/$IMG" | jq -r '.images[0].used_size'; }
fill() { bounded qemu-io -f raw -c "write -P 0x5a 0 ${GIB}G" "$R" >/dev/null; }
zero_ok() {	# reads back zero? via qemu on rbd:
	if bounded qemu-io -f raw -c "read -P 0 0 ${GIB}G" "$R" 2>&1 | grep -qi 'pattern\|fail'; then
		echo NO
	else
		echo yes
	fi
}

rbd create --size "${GIB}G" "rbd/$IMG"

echo "### RBD: zeroing ${GIB} GiB of written data (one-node memstore cluster)"
echo
echo "| method | seconds | speed-up vs writing zeroes | rbd du after | reads back zero |"
echo "|---|---:|---:|---:|:---:|"
fill
t_w=$(time_cmd bounded qemu-io -f raw -c "write -P 0 0 ${GIB}G" "$R")
echo "| qemu-io write of zero buffers on rbd: | $t_w | 1.00 | $(used) | $(zero_ok) |"
fill
t=$(time_cmd "$BLKSTACK" zeroout --no-unmap -l "${GIB}G" "$DEV")
echo "| blkstack zeroout --no-unmap (THICK_PROVISION write-same) | $t | $(ratio "$t_w" "$t") | $(used) | $(zero_ok) |"
fill
t=$(time_cmd "$BLKSTACK" zeroout -l "${GIB}G" "$DEV")
echo "| blkstack zeroout (unmap zeroing: objects removed) | $t | $(ratio "$t_w" "$t") | $(used) | $(zero_ok) |"
fill
port=$(free_port)
mkdir -p "$BENCH_DIR/state"
cat >"$BENCH_DIR/bd.ini" <<CONF
[daemon]
state_dir = $BENCH_DIR/state
[device vol0]
type = rbd
image = rbd/$IMG
conf = $CONF
[export vol0]
type = nbd
device = vol0
listen = 127.0.0.1:$port
CONF
start_server blkstackd "$port" "$BLKSTACKD" -f -c "$BENCH_DIR/bd.ini"
sleep 1	# the rbd device opens asynchronously
t=$(time_cmd bounded qemu-io -f raw -c "write -z -u 0 ${GIB}G" "nbd://127.0.0.1:$port/vol0")
stop_server >/dev/null
echo "| qemu-io write -z -u over NBD → blkstackd (unmap zeroing) | $t | $(ratio "$t_w" "$t") | $(used) | $(zero_ok) |"
echo

echo "### NBD over RBD: blkstackd (rbd device) vs qemu-nbd (rbd: driver), same image"
echo
echo "| job | server | IOPS | MiB/s | p50 µs | p99 µs | CPU s/GiB | peak RSS MiB |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
fill
row=0
while IFS='|' read -r desc args; do
	for s in blkstackd qemu-nbd; do
		port=$(free_port)
		out=$BENCH_DIR/fio.$row.$s.json
		if [ "$s" = blkstackd ]; then
			sed -i "s/^listen = .*/listen = 127.0.0.1:$port/" "$BENCH_DIR/bd.ini"
			start_server blkstackd "$port" "$BLKSTACKD" -f -c "$BENCH_DIR/bd.ini"
			sleep 1
		else
			start_server qemu-nbd "$port" qemu-nbd -f raw -x vol0 -b 127.0.0.1 \
				-p "$port" -e 32 -t --cache=writeback "$R"
		fi
		# shellcheck disable=SC2086
		if fio_nbd "$port" "$out" $args; then
			read -r iops mibs p50 p99 moved <<<"$(fio_summary "$out")"
		else
			iops=FAILED mibs=- p50=- p99=- moved=0
		fi
		read -r cpu rss <<<"$(stop_server)"
		cpg=$(awk -v c="$cpu" -v g="$moved" 'BEGIN { if (g > 0) printf "%.2f", c / g; else print "-" }')
		echo "| $desc | $s | $iops | $mibs | $p50 | $p99 | $cpg | $(mib "$rss") |"
	done
	row=$((row + 1))
done <<'JOBS'
4 KiB random read, depth 32|--rw=randread --bs=4k --iodepth=32 --size=1G
4 KiB random write, depth 32|--rw=randwrite --bs=4k --iodepth=32 --size=1G
1 MiB sequential write, depth 8|--rw=write --bs=1M --iodepth=8 --size=1G
1 MiB sequential read, depth 8|--rw=read --bs=1M --iodepth=8 --size=1G
JOBS
echo
echo "- cluster: $(tail -1 "$BENCH_DIR/ceph.log" | sed 's/: export.*//'), $(ceph-osd --version | cut -d' ' -f1-3); ${JOB_SECONDS} s per fio job"
