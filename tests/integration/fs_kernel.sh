#!/usr/bin/env bash
# blkstack's ext4 read by the kernel's own ext4: `fs mkfs` on a 4 GiB sparse
# image, a 1 GiB FALLOC_FL_WRITE_ZEROES file and a plainly fallocated one;
# mounted through a loop device, the first reads 1 GiB of zeroes with
# written extents (filefrag: no "unwritten"), the second shows "unwritten";
# the image's allocated size grows far less than 1 GiB; a stale pattern
# written below before mkfs never shows, in blkstack or in the kernel;
# e2fsck is clean.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/fs-image.bash"
has_type file || skip "no 'file' device type in this build"
command -v e2fsck >/dev/null || skip "e2fsck not installed"
make_tmp

fs_image_setup
GiB=$((1024 * 1024 * 1024))

truncate -s 4G "$IMG"
# Stale data below: the first 1.25 GiB (where /f and /g will land) hold a
# pattern before mkfs; neither blkstack nor the kernel may ever show it.
PATTERN='STALE!PATTERN'
{ yes "$PATTERN" || true; } | head -c 1280M |
	dd of="$IMG" bs=4M conv=notrunc iflag=fullblock status=none
note "fs mkfs on a 4 GiB sparse image (1.25 GiB of it a stale pattern)"
run_bs 0 fs mkfs "$DEV"
fsck_clean mkfs

run_bs 0 info --json "$DEV"
jq -e '.write_zeroes_unmap == true' <<<"$OUT" >/dev/null ||
	skip "the file device here has no write_zeroes_unmap: $(jq -r .write_zeroes_unmap_why_not <<<"$OUT")"

note "fs fallocate -w -l 1G /f, fs fallocate -l 256M /g"
before=$(allocated "$IMG")
run_bs 0 fs fallocate -w -l 1G "$DEV" /f
run_bs 0 fs fallocate -l 256M "$DEV" /g
after=$(allocated "$IMG")
grown=$((after - before))
((grown < 64 * 1024 * 1024)) ||
	fail "image allocation grew by $grown bytes for 1 GiB of zeroes"
echo "image allocation changed by $grown bytes (stale blocks under /f were unmapped)"
run_bs 0 fs map "$DEV" /f
grep -q unwritten <<<"$OUT" && fail "fs map /f shows unwritten extents: $OUT"
grep -q ' written' <<<"$OUT" || fail "fs map /f shows no written extent: $OUT"
for f in /f /g; do
	"$BS" fs cat "$DEV" "$f" | grep -aFq "$PATTERN" && fail "blkstack shows stale bytes in $f"
done
run_bs 0 fs map "$DEV" /g
grep -q unwritten <<<"$OUT" || fail "fs map /g shows no unwritten extent: $OUT"
fsck_clean "fallocate"

note "the kernel's ext4 reads it (loop, read-only)"
[[ $(id -u) == 0 ]] || skip "not root: cannot loop-mount (blkstack side passed)"
mkdir -p "$MNT"
if ! mount -t ext4 -o loop,ro "$IMG" "$MNT" 2>"$T/mount.err"; then
	skip "mount -o loop failed: $(head -1 "$T/mount.err")"
fi
mounted=1
[[ $(stat -c %s "$MNT/f") == "$GiB" ]] || fail "/f is not 1 GiB in the kernel"
cmp -n "$GiB" "$MNT/f" /dev/zero || fail "/f does not read 1 GiB of zeroes"
ff=$(filefrag -v "$MNT/f")
grep -q unwritten <<<"$ff" && { echo "$ff" >&2; fail "filefrag shows /f unwritten"; }
grep -Eq '^ +[0-9]+:' <<<"$ff" || { echo "$ff" >&2; fail "filefrag shows no extent of /f"; }
fg=$(filefrag -v "$MNT/g")
grep -q unwritten <<<"$fg" || { echo "$fg" >&2; fail "filefrag shows /g written"; }
cmp -n $((256 * 1024 * 1024)) "$MNT/g" /dev/zero || fail "/g does not read zeroes"
for f in "$MNT"/f "$MNT"/g; do
	grep -aFq "$PATTERN" "$f" && fail "the kernel shows stale bytes in $f"
done
umount "$MNT"
mounted=0
fsck_clean "the kernel mount"

note "blkstack still opens it after the kernel"
run_bs 0 fs ls "$DEV" /
grep -qx f <<<"$OUT" || fail "fs ls lost /f: $OUT"
echo "PASS"
