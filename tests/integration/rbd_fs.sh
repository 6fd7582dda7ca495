#!/usr/bin/env bash
# A blkstack ext4 filesystem on an RBD image (the CLI, rbd:POOL/IMAGE
# specs, one throw-away cluster from scripts/ceph-cluster.sh): the image
# is first filled with a pattern by qemu on rbd:, then mkfs, put/cat, and
# a WRITE_ZEROES file (fs fallocate -w, which needs unmap zeroing) that
# reads back as zeroes and frees objects (`rbd du`); e2fsck -fn of the
# image, read out by qemu-img, is clean.
# check: alone (a Ceph cluster of its own (CPU-heavy start, 4 GiB memstore))
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
source "$(dirname "$0")/lib/ceph.bash"
need qemu-img qemu-io jq e2fsck cmp
daemon_setup
ceph_setup

M=$((1024 * 1024))
DEV="rbd:rbd/fs1,conf=$CEPH_CONF,create=256M"
R="rbd:rbd/fs1:conf=$CEPH_CONF"

fsck_clean() {
	local rc=0 out
	rm -f "$T/fs.raw"
	timeout 120 qemu-img convert -f raw -O raw "$R" "$T/fs.raw" ||
		fail "reading the image out after $1"
	out=$(e2fsck -fn "$T/fs.raw" 2>&1) || rc=$?
	((rc == 0)) || { echo "$out" >&2; fail "e2fsck -fn after $1: exit $rc"; }
}

note "create the image, fill it with a pattern through qemu"
run_bs 0 info "$DEV"
[[ $OUT == *"write_zeroes_unmap"*"yes"* ]] || fail "info: $OUT"
timeout 120 qemu-io -f raw -c "write -P 0xee 0 256M" "$R" >/dev/null ||
	fail "pattern fill"
full=$(rbd_used rbd/fs1)
((full == 256 * M)) || fail "after the fill, used $full"

note "mkfs, put, cat"
run_bs 0 fs mkfs -F -L rbdfs "$DEV"
fsck_clean mkfs
head -c 3000000 /dev/urandom >"$T/data"
run_bs 0 fs mkdir "$DEV" /d
run_bs 0 fs put "$DEV" "$T/data" /d/data
"$BS" fs cat "$DEV" /d/data | cmp - "$T/data" || fail "cat differs from put"

note "WRITE_ZEROES file over the pattern: zeroes, written, objects freed"
before=$(rbd_used rbd/fs1)
run_bs 0 fs fallocate -w -l 64M "$DEV" /w
run_bs 0 fs map "$DEV" /w
grep -q ' written' <<<"$OUT" || fail "map /w: $OUT"
grep -q 'unwritten' <<<"$OUT" && fail "map /w still unwritten: $OUT"
"$BS" fs cat "$DEV" /w | cmp - <(head -c $((64 * M)) /dev/zero) ||
	fail "/w does not read zeroes"
after=$(rbd_used rbd/fs1)
((after <= before - 48 * M)) ||
	fail "WRITE_ZEROES of 64M freed too little: used $before -> $after"
"$BS" fs cat "$DEV" /d/data | cmp - "$T/data" || fail "/d/data changed"
fsck_clean "fallocate -w"

note "with the knob off WRITE_ZEROES is refused, nothing changes"
run_bs 1 fs fallocate -w -l 1M "$DEV,write_zeroes_unmap=0" /w2
expect_err "fs fallocate /w2" "Operation not supported"
fsck_clean "refused fallocate"
note "rbd_fs: pass"
