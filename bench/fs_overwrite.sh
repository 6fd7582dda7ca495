#!/usr/bin/env bash
# Table 3 of the cover letter on blkstack's ext4, read by the kernel: 4 KiB
# O_DSYNC random overwrites (fio, direct I/O, one job, queue depth 1) of
#
#   (a) a file made by `blkstack fs fallocate -w`   written extents of zeroes
#   (b) a file made by plain fallocate              unwritten extents: every
#                                                   first write converts
#   (c) a file filled by dd in the kernel mount     written extents of data
#
# with the image mounted by the kernel's ext4 through a loop device. Then the
# cost of making WZ_GIB of zeroes: `blkstack fs fallocate -w` against
# writing them with dd (and the kernel's plain, unwritten fallocate).
# Needs root (losetup, mount); prints a note and exits 0 otherwise.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

FILE_GIB=${FS_FILE_GIB:-1}	# size of each overwrite target
WZ_GIB=${WZ_GIB:-$(pick 1 10)}	# the zeroes-making comparison
IMG_GIB=$((3 * FILE_GIB + 2))

echo "### ext4: overwriting a WRITE_ZEROES file vs unwritten vs written"
echo
if [ "$(id -u)" != 0 ]; then
	echo "skipped: needs root for losetup and mount"
	exit 0
fi
bench_dir
IMG=$BENCH_DIR/fs.img
MNT=$BENCH_DIR/mnt
LOOP=
mkdir -p "$MNT"
fs_cleanup() {
	mountpoint -q "$MNT" && umount "$MNT"
	[ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null
	bench_cleanup
}
trap fs_cleanup EXIT

mount_img() {
	LOOP=$(losetup -f --show --direct-io=on "$IMG")
	mount -t ext4 "$LOOP" "$MNT"
}
umount_img() {
	umount "$MNT"
	losetup -d "$LOOP"
	LOOP=
}

truncate -s "${IMG_GIB}G" "$IMG"
"$BLKSTACK" fs mkfs "file:$IMG" >/dev/null
"$BLKSTACK" fs fallocate -w -l "${FILE_GIB}G" "file:$IMG" /wz
"$BLKSTACK" fs fallocate -l "${FILE_GIB}G" "file:$IMG" /unwritten
mount_img
dd if=/dev/zero of="$MNT/dd" bs=2M count=$((FILE_GIB * 512)) oflag=direct \
	conv=fsync status=none

extents() {	# FILE -> "N extents, M unwritten"
	filefrag -v "$1" | awk '/^ +[0-9]+:/ {n++; if (/unwritten/) u++}
		END {printf "%d extents, %d unwritten", n, u}'
}

iops() {	# FILE -> IOPS of 4 KiB O_DSYNC random overwrites
	fio --name=ow --filename="$1" --direct=1 --sync=dsync --rw=randwrite \
		--bs=4k --ioengine=psync --iodepth=1 --numjobs=1 \
		--size="${FILE_GIB}G" --fallocate=none --time_based \
		--runtime="$JOB_SECONDS" --output-format=json 2>/dev/null |
		jq '.jobs[0].write.iops | floor'
}

echo "fio: 4 KiB random writes, direct, O_DSYNC, psync, depth 1, ${JOB_SECONDS} s"
echo "each, ${FILE_GIB} GiB files, image on $(df -T "$BENCH_DIR" | awk 'NR==2 {print $2}')"
echo "through a direct-I/O loop device."
echo
echo "| file | made by | extents before | IOPS | vs unwritten |"
echo "|---|---|---|---:|---:|"
e_wz=$(extents "$MNT/wz")
e_un=$(extents "$MNT/unwritten")
e_dd=$(extents "$MNT/dd")
i_wz=$(iops "$MNT/wz")
i_un=$(iops "$MNT/unwritten")
i_dd=$(iops "$MNT/dd")
echo "| (a) written zeroes | blkstack fs fallocate -w | $e_wz | $i_wz | $(ratio "$i_wz" "$i_un") |"
echo "| (b) unwritten | blkstack fs fallocate | $e_un | $i_un | 1.00 |"
echo "| (c) written data | dd in the kernel mount | $e_dd | $i_dd | $(ratio "$i_dd" "$i_un") |"
echo
umount_img
rm -f "$IMG"

# A fresh image, as the cover letter's table 1 (a new file): on blocks that
# once held data the host's punch hole can cost more (see the note below).
IMG_GIB=$((WZ_GIB * 2 + 2))
truncate -s "${IMG_GIB}G" "$IMG"
"$BLKSTACK" fs mkfs "file:$IMG" >/dev/null

echo "### ext4: making ${WZ_GIB} GiB of zeroes in a file"
echo
echo "| method | seconds | vs dd | image grew by | extents |"
echo "|---|---:|---:|---:|---|"
grew() {	# BEFORE -> MiB the image's allocation grew by
	echo $(( ($(allocated) - $1) / 1048576 ))" MiB"
}
allocated() { du --block-size=1 "$IMG" | cut -f1; }
a0=$(allocated)
t_wz=$(time_cmd "$BLKSTACK" fs fallocate -w -l "${WZ_GIB}G" "file:$IMG" /wz)
g_wz=$(grew "$a0")
mount_img
e_wz=$(extents "$MNT/wz")
a0=$(allocated)
t_dd=$(time_cmd dd if=/dev/zero of="$MNT/zeroes" bs=2M count=$((WZ_GIB * 512)) \
	oflag=direct conv=fsync)
g_dd=$(grew "$a0")
e_dd=$(extents "$MNT/zeroes")
rm -f "$MNT/zeroes"
a0=$(allocated)
t_fa=$(time_cmd fallocate -l "${WZ_GIB}G" "$MNT/unwritten")
g_fa=$(grew "$a0")
e_fa=$(extents "$MNT/unwritten")
umount_img
echo "| blkstack fs fallocate -w (written zeroes, unmapped) | $t_wz | $(ratio "$t_dd" "$t_wz")x faster | $g_wz | $e_wz |"
echo "| dd if=/dev/zero bs=2M direct + fsync (kernel) | $t_dd | 1.00 | $g_dd | $e_dd |"
echo "| fallocate(1) (kernel, unwritten: not comparable) | $t_fa | $(ratio "$t_dd" "$t_fa")x | $g_fa | $e_fa |"
echo
if e2fsck -fn "$IMG" >/dev/null 2>&1; then
	echo "e2fsck -fn: clean afterwards."
else
	echo "**e2fsck -fn reports problems afterwards**"
fi
host_opts=$(findmnt -n -o OPTIONS --target "$BENCH_DIR" 2>/dev/null || true)
case ",$host_opts," in
*,discard,*)
	echo
	echo "Note: the host filesystem is mounted with 'discard', so the file"
	echo "device's unmap zeroing (punch hole) of blocks that held data also"
	echo "discards them synchronously on the disk below: zeroing over old"
	echo "data costs more than over never-written blocks as above."
	;;
esac
