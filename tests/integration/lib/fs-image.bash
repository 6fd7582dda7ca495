# Helpers for tests of an ext4 image made by `blkstack fs` that the
# kernel loop-mounts: source after cli-common.bash, then call
# fs_image_setup (after make_tmp) to get IMG ($T/fs.img), DEV (file:IMG)
# and MNT ($T/mnt), with the mount undone and $T removed at exit (set
# mounted=1 while mounted).

fs_image_setup() {
	IMG="$T/fs.img"
	DEV="file:$IMG"
	MNT="$T/mnt"
	mounted=0
	trap fs_image_cleanup EXIT
}

fs_image_cleanup() {
	if ((mounted)); then umount "$MNT" 2>/dev/null || umount -l "$MNT" || true; fi
	rm -rf "$T"
}

# fsck_clean WHAT: e2fsck -fn of IMG is clean, else its output and fail
fsck_clean() {
	local out rc=0
	out=$(e2fsck -fn "$IMG" 2>&1) || rc=$?
	((rc == 0)) || { echo "$out" >&2; fail "e2fsck -fn after $1: exit $rc"; }
}
