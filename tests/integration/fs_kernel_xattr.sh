#!/usr/bin/env bash
# Extended attributes between `blkstack fs` and the kernel's own ext4
# (loop device), with setfattr/getfattr from Debian's attr package:
# - blkstack sets user., trusted. and security. names, small values (in
#   the inode), a 3000-byte one (in the xattr block) and a binary one, on
#   a file and a directory; e2fsck -fn clean; the kernel (read-only)
#   reads the same names and bytes;
# - the kernel (read-write) sets its own, including one identical
#   1000-byte value on two files, which it puts in ONE shared xattr
#   block (refcount 2: debugfs shows the same File ACL); blkstack reads
#   them, removes one of the two files (the shared block must stay for
#   the other), changes the other's (a copy is made), removes a name;
#   e2fsck -fn clean after each step, and the kernel reads the result.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/fs-image.bash"
has_type file || skip "no 'file' device type in this build"
command -v e2fsck >/dev/null || skip "e2fsck not installed"
command -v debugfs >/dev/null || skip "debugfs not installed"
make_tmp

fs_image_setup

# the "File ACL:" block of PATH (debugfs on the unmounted image)
acl_block() {
	debugfs -R "stat $1" "$IMG" 2>/dev/null | sed -n 's/.*File ACL: \([0-9]*\).*/\1/p'
}

# the value of NAME on PATH as the kernel reads it, in hex
kget() {
	getfattr --only-values -n "$2" "$MNT$1" 2>/dev/null | od -An -tx1 -v | tr -d ' \n'
}

# the same through blkstack
bget() {
	"$BS" fs getfattr --only-values "$DEV" "$1" "$2" | od -An -tx1 -v | tr -d ' \n'
}

hex() { printf '%s' "$1" | od -An -tx1 -v | tr -d ' \n'; }

truncate -s 64M "$IMG"
run_bs 0 fs mkfs "$DEV"
printf 'data\n' >"$T/data"
run_bs 0 fs put "$DEV" "$T/data" /f
run_bs 0 fs mkdir "$DEV" /d
BIG=$(head -c 3000 /dev/zero | tr '\0' B)

note "blkstack sets attributes (inode and block)"
run_bs 0 fs setfattr "$DEV" /f user.small "hello"
run_bs 0 fs setfattr "$DEV" /f user.bin 0x00ff10ee
run_bs 0 fs setfattr "$DEV" /f trusted.t "trusted value"
run_bs 0 fs setfattr "$DEV" /f security.s "security value"
run_bs 0 fs setfattr "$DEV" /f user.big "$BIG"
run_bs 0 fs setfattr "$DEV" /d user.dir "on a directory"
run_bs 0 fs setfattr "$DEV" /f user.gone x
run_bs 0 fs setfattr -x user.gone "$DEV" /f
fsck_clean "blkstack's setfattr"
[[ $(acl_block /f) != 0 ]] || fail "/f has no xattr block for its 3000-byte value"

[[ $(id -u) == 0 ]] || skip "not root: cannot loop-mount (blkstack side passed)"
command -v getfattr >/dev/null && command -v setfattr >/dev/null ||
	skip "getfattr/setfattr not installed (Debian package attr)"
mkdir -p "$MNT"

note "the kernel's ext4 reads them (loop, read-only)"
if ! mount -t ext4 -o loop,ro "$IMG" "$MNT" 2>"$T/mount.err"; then
	skip "mount -o loop failed: $(head -1 "$T/mount.err")"
fi
mounted=1
[[ $(kget /f user.small) == "$(hex hello)" ]] || fail "kernel user.small: $(kget /f user.small)"
[[ $(kget /f user.bin) == 00ff10ee ]] || fail "kernel user.bin: $(kget /f user.bin)"
[[ $(kget /f trusted.t) == "$(hex "trusted value")" ]] || fail "kernel trusted.t"
[[ $(kget /f security.s) == "$(hex "security value")" ]] || fail "kernel security.s"
[[ $(kget /f user.big) == "$(hex "$BIG")" ]] || fail "kernel user.big (3000 bytes in the block)"
[[ $(kget /d user.dir) == "$(hex "on a directory")" ]] || fail "kernel user.dir"
getfattr -n user.gone "$MNT/f" >/dev/null 2>&1 && fail "kernel: the removed user.gone is there"
got=$(getfattr -m - --absolute-names "$MNT/f" 2>/dev/null | grep -v '^#' | grep . | sort | paste -sd,)
[[ $got == "security.s,trusted.t,user.big,user.bin,user.small" ]] || fail "kernel list of /f: $got"
echo "kernel: names and values as blkstack set them"
umount "$MNT"
mounted=0
fsck_clean "the read-only mount"

note "the kernel sets attributes (loop, read-write), one block shared by two files"
mount -t ext4 -o loop "$IMG" "$MNT" || fail "mount read-write"
mounted=1
SHARED=$(head -c 1000 /dev/zero | tr '\0' S)
printf 'one\n' >"$MNT/k1"
printf 'two\n' >"$MNT/k2"
setfattr -n user.shared -v "$SHARED" "$MNT/k1"
setfattr -n user.shared -v "$SHARED" "$MNT/k2"
setfattr -n user.k -v kernel "$MNT/f"
setfattr -n user.hex -v 0x0102fffe "$MNT/d"
setfattr -x user.small "$MNT/f"
setfattr -n trusted.kt -v "kernel trusted" "$MNT/k1"
umount "$MNT"
mounted=0
fsck_clean "the read-write mount"
b1=$(acl_block /k1)
b2=$(acl_block /k2)
((b1 != 0)) || fail "the kernel put k1's 1000-byte value in no block"
if [[ $b1 == "$b2" ]]; then
	echo "kernel: k1 and k2 share xattr block $b1"
	shared=1
else
	note "the kernel did not share the block ($b1, $b2): the shared-block steps test less"
	shared=0
fi

note "blkstack reads the kernel's"
[[ $(bget /k1 user.shared) == "$(hex "$SHARED")" ]] || fail "blkstack /k1 user.shared"
[[ $(bget /k2 user.shared) == "$(hex "$SHARED")" ]] || fail "blkstack /k2 user.shared"
[[ $(bget /k1 trusted.kt) == "$(hex "kernel trusted")" ]] || fail "blkstack /k1 trusted.kt"
[[ $(bget /f user.k) == "$(hex kernel)" ]] || fail "blkstack /f user.k"
[[ $(bget /d user.hex) == 0102fffe ]] || fail "blkstack /d user.hex"
run_bs 0 fs getfattr "$DEV" /f
[[ $OUT == *'user.k="kernel"'* && $OUT != *user.small* ]] || fail "blkstack getfattr /f: $OUT"
run_bs 1 fs getfattr "$DEV" /f user.small
expect_err "fs getfattr /f" "No data available"

note "blkstack removes one sharer, changes the other, removes a name"
run_bs 0 fs rm "$DEV" /k1
fsck_clean "rm of a file sharing its xattr block"
((shared == 0)) || [[ $(acl_block /k2) == "$b1" ]] || fail "/k2 lost its shared block"
[[ $(bget /k2 user.shared) == "$(hex "$SHARED")" ]] || fail "/k2 value after rm /k1"
run_bs 0 fs setfattr "$DEV" /k2 user.more "more"
run_bs 0 fs setfattr "$DEV" /k2 user.shared "changed"
run_bs 0 fs setfattr -x user.k "$DEV" /f
run_bs 0 fs setfattr "$DEV" /d user.hex 0xcafe
fsck_clean "blkstack's changes"

note "the kernel reads the result"
mount -t ext4 -o loop,ro "$IMG" "$MNT" || fail "mount read-only again"
mounted=1
[[ -e $MNT/k1 ]] && fail "kernel: /k1 is still there"
[[ $(kget /k2 user.shared) == "$(hex changed)" ]] || fail "kernel /k2 user.shared: $(kget /k2 user.shared)"
[[ $(kget /k2 user.more) == "$(hex more)" ]] || fail "kernel /k2 user.more"
[[ $(kget /d user.hex) == cafe ]] || fail "kernel /d user.hex"
getfattr -n user.k "$MNT/f" >/dev/null 2>&1 && fail "kernel: the removed user.k is there"
[[ $(kget /f user.big) == "$(hex "$BIG")" ]] || fail "kernel /f user.big after all"
umount "$MNT"
mounted=0
fsck_clean "the end"
run_bs 0 fs rm "$DEV" /k2
run_bs 0 fs rm "$DEV" /f
fsck_clean "removing the files"
echo "PASS"
