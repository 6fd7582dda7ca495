#!/usr/bin/env bash
# Damaged ext4 images (issue 10 items 2 and 15): a read-write `fs` command
# refuses each with one line "DEV: filesystem needs checking (run e2fsck):
# REASON" and leaves the image byte for byte as it was; read-only commands
# (ls, stat, cat) never write either. The corruptions are made the way a
# user meets them: a stray byte (checksums then disagree) and debugfs edits
# that keep every checksum valid, so the location and count checks
# themselves are what refuses. Then item 15: "/d/f/" of a file is ENOTDIR,
# an inode claiming 2^48 bytes is EFBIG.
source "$(dirname "$0")/lib/cli-common.bash"
has_type file || skip "no 'file' device type in this build"
command -v debugfs >/dev/null || skip "debugfs not installed"
command -v e2fsck >/dev/null || skip "e2fsck not installed"
make_tmp

echo hello >"$T/h.txt"

# base IMG MKFS-ARGS...: a filesystem with /d/f in it
base() {
	local img=$1
	shift
	truncate -s 32M "$img"
	run_bs 0 fs mkfs "$@" "file:$img"
	run_bs 0 fs mkdir "file:$img" /d
	run_bs 0 fs put "file:$img" "$T/h.txt" /d/f
	e2fsck -fn "$img" >/dev/null 2>&1 || fail "base image $img not clean"
}
base "$T/b4.img"
base "$T/b1.img" -b 1024	# 4 groups: descriptors that can collide

# refused IMG WHAT REASON: rw refused naming REASON, nothing written by it
# or by the read-only commands after it
refused() {
	local img=$1 what=$2 reason=$3 before
	before=$(sha "$img")
	run_bs 1 fs put "file:$img" "$T/h.txt" /new
	expect_err "${img##*/}: fs put /new" \
		"filesystem needs checking (run e2fsck): $reason"
	run_bs 1 fs mkdir "file:$img" /e
	expect_err "filesystem needs checking (run e2fsck)"
	[[ $(sha "$img") == "$before" ]] || fail "$what: the refused open wrote"
	local sub opt path
	for args in "ls - /" "ls -l /d" "stat - -" "stat - /d/f" "cat - /d/f"; do
		local rc=0 cmd
		read -r sub opt path <<<"$args"
		cmd=(fs "$sub")
		[[ $opt == - ]] || cmd+=("$opt")
		cmd+=("file:$img")
		[[ $path == - ]] || cmd+=("$path")
		"$BS" "${cmd[@]}" >"$T/out" 2>"$T/err" || rc=$?
		grep -Eq "Sanitizer|runtime error" "$T/err" &&
			fail "$what: ${cmd[*]}: sanitizer report"
		((rc <= 1)) || fail "$what: ${cmd[*]} exited $rc"
		[[ $(sha "$img") == "$before" ]] ||
			fail "$what: read-only ${cmd[*]} wrote"
	done
	note "$what: refused ($reason), unchanged"
}

# debugfs_edit BASE WHAT REASON COMMAND...: a copy of BASE edited by debugfs
debugfs_edit() {
	local img="$T/t.img" what=$2 reason=$3
	cp "$1" "$img"
	shift 3
	printf '%s\n' "$@" >"$T/cmds"
	debugfs -w -f "$T/cmds" "$img" >"$T/dbg" 2>&1 ||
		{ cat "$T/dbg" >&2; fail "$what: debugfs failed"; }
	refused "$img" "$what" "$reason"
}

note "a clean image opens read-write (no false alarm) at 4 KiB and 1 KiB"
for b in b4 b1; do
	cp "$T/$b.img" "$T/ok.img"
	run_bs 0 fs put "file:$T/ok.img" "$T/h.txt" /new
	run_bs 0 fs stat "file:$T/ok.img"
	[[ $OUT == *"state        clean"* ]] || fail "stat of a clean image: $OUT"
	e2fsck -fn "$T/ok.img" >/dev/null 2>&1 || fail "$b: put made it unclean"
done

note "the issue's byte: group 0's block bitmap location, high byte"
cp "$T/b4.img" "$T/t.img"
printf '\x80' | dd of="$T/t.img" bs=1 seek=4099 conv=notrunc 2>/dev/null
refused "$T/t.img" "bitmap location byte" "group 0: descriptor checksum"
run_bs 0 fs stat "file:$T/t.img"
[[ $OUT == *"needs checking (run e2fsck): group 0"* ]] ||
	fail "read-only stat does not say the image needs checking: $OUT"

debugfs_edit "$T/b1.img" "block bitmap on the superblock" \
	"group 0: block bitmap at block 1 overlaps" \
	"set_bg 0 block_bitmap 1" "set_bg 0 checksum calc"
debugfs_edit "$T/b1.img" "inode table past the end" \
	"group 3: inode table at block 40000 is outside" \
	"set_bg 3 inode_table 40000" "set_bg 3 checksum calc"
debugfs_edit "$T/b1.img" "two groups share an inode table" \
	"group 2: inode table at block" \
	"set_bg 2 inode_table $(dumpe2fs "$T/b1.img" 2>/dev/null |
		awk '/Inode table at/ { split($4, a, "-"); print a[1]; exit }')" \
	"set_bg 2 checksum calc"
debugfs_edit "$T/b1.img" "group free count" \
	"group 1: 60000 free blocks of 8192" \
	"set_bg 1 free_blocks_count 60000" "set_bg 1 checksum calc"
debugfs_edit "$T/b1.img" "superblock free count" \
	"99999999 free blocks of 32768" "ssv free_blocks_count 99999999"
debugfs_edit "$T/b1.img" "first inode" "first non-reserved inode 3" \
	"ssv first_ino 3"
debugfs_edit "$T/b1.img" "inode table free in the bitmap" \
	"metadata block 300 (group 0) is free in the block bitmap" "freeb 300"
debugfs_edit "$T/b1.img" "root not a directory" \
	"the root inode is not a directory" "sif <2> mode 0100644"
debugfs_edit "$T/b4.img" "orphan list" "orphan inodes to be freed" \
	"ssv last_orphan 12"
debugfs_edit "$T/b4.img" "errors recorded" "errors recorded" "ssv state 3"
debugfs_edit "$T/b4.img" "journal needs recovery" \
	"the journal needs recovery" "feature needs_recovery"

note "a truncated image: refused read-only too, untouched"
cp "$T/b4.img" "$T/t.img"
truncate -s 16M "$T/t.img"
before=$(sha "$T/t.img")
run_bs 1 fs ls "file:$T/t.img" /
expect_err "filesystem needs checking (run e2fsck): the superblock says 8192 blocks of 4096 bytes, the device holds 4096"
run_bs 1 fs put "file:$T/t.img" "$T/h.txt" /new
[[ $(sha "$T/t.img") == "$before" ]] || fail "truncated image written"

note "issue 10 item 15: a file named with a trailing '/', a 2^48-byte inode"
cp "$T/b4.img" "$T/t.img"
run_bs 1 fs cat "file:$T/t.img" /d/f/
expect_err "fs cat /d/f/" "Not a directory"
run_bs 1 fs cat "file:$T/t.img" /d/f/x
expect_err "Not a directory"
run_bs 1 fs put "file:$T/t.img" "$T/h.txt" /d/new/
expect_err "Is a directory"
run_bs 0 fs ls "file:$T/t.img" /d/
debugfs -w -R "sif /d/f size 281474976710656" "$T/t.img" >/dev/null 2>&1 ||
	fail "debugfs sif size"
run_bs 1 fs cat "file:$T/t.img" /d/f
expect_err "File too large" "claims 281474976710656 bytes"
run_bs 0 fs stat "file:$T/t.img" /d/f
[[ $OUT == *281474976710656* ]] || fail "stat hides the size: $OUT"
run_bs 0 fs rm "file:$T/t.img" /d/f

echo "PASS fs_corrupt"
