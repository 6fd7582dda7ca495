#!/usr/bin/env bash
# Running out of space in the middle of an fs operation never corrupts the
# filesystem (issue 10 item 1). The report: on a 2 GiB image with a 1200M
# file, `fs fallocate -l 1G /b` (plain, -w, -z) failed with ENOSPC but left
# a 0-byte /b holding every free block, e2fsck -fn exit 4 (i_blocks wrong)
# and `fs rm /b` failing with EIO. Now: ENOSPC, e2fsck -fn clean, rm works
# and leaves it clean. Also a fallocate of exactly the free blocks (passes
# the up-front check, runs out midway for its extent-tree block), and
# `fs put` of a host file larger than the free space.
source "$(dirname "$0")/lib/cli-common.bash"
has_type file || skip "no 'file' device type in this build"
command -v e2fsck >/dev/null || skip "e2fsck not installed"
make_tmp

IMG="$T/s.img"
DEV="file:$IMG"

fsck_clean() {
	local out rc=0
	out=$(e2fsck -fn "$IMG" 2>&1) || rc=$?
	((rc == 0)) || { echo "$out" >&2; fail "e2fsck -fn after $1: exit $rc"; }
}

free_blocks() {
	run_bs 0 fs stat "$DEV"
	awk '$1 == "free" && $2 == "blocks" { print $3 }' <<<"$OUT"
}

fresh() {
	rm -f "$IMG"
	truncate -s 2G "$IMG"
	run_bs 0 fs mkfs "$DEV"
	run_bs 0 fs fallocate -w -l 1200M "$DEV" /a
}

for mode in "" -w -z; do
	note "fallocate ${mode:-(plain)} -l 1G with ~750M free"
	fresh
	before=$(free_blocks)
	run_bs 1 fs fallocate $mode -l 1G "$DEV" /b
	expect_err "s.img" "fs fallocate /b" "No space left on device"
	fsck_clean "fallocate $mode ENOSPC"
	run_bs 0 fs rm "$DEV" /b
	fsck_clean "rm /b after fallocate $mode ENOSPC"
	[[ $(free_blocks) == "$before" ]] ||
		fail "free blocks $(free_blocks) after rm, $before before"
	run_bs 0 fs ls "$DEV" /
	[[ $OUT != *" b"* && $OUT != b ]] || fail "/b still listed: $OUT"

	note "fallocate ${mode:-(plain)} of exactly the free blocks: ENOSPC midway"
	n=$(free_blocks)
	run_bs 1 fs fallocate $mode -l $((n * 4096)) "$DEV" /c
	expect_err "fs fallocate /c" "No space left on device"
	fsck_clean "fallocate $mode midway ENOSPC"
	# what was allocated is kept and accounted, unwritten (reads zeroes)
	run_bs 0 fs map "$DEV" /c
	[[ $OUT != *" written"* ]] || fail "written extents after a failed fallocate: $OUT"
	run_bs 0 fs rm "$DEV" /c
	fsck_clean "rm /c after fallocate $mode midway"
	[[ $(free_blocks) == "$before" ]] ||
		fail "free blocks $(free_blocks) after rm /c, $before before"
done

note "put of a host file larger than the free space"
rm -f "$IMG"
truncate -s 64M "$IMG"
run_bs 0 fs mkfs "$DEV"
before=$(free_blocks)
head -c 80M /dev/urandom >"$T/big"
run_bs 1 fs put "$DEV" "$T/big" /big
expect_err "fs put /big" "No space left on device"
fsck_clean "put ENOSPC"
run_bs 0 fs stat "$DEV" /big
size=$(awk '$1 == "size" { print $2 }' <<<"$OUT")
((size > 0 && size < 80 * 1024 * 1024)) || fail "size after a short put: $size"
# what reached the file is the file's first bytes; nothing allocated past it
"$BS" fs cat "$DEV" /big | cmp -s - <(head -c "$size" "$T/big") ||
	fail "the kept part of /big differs from the host file"
run_bs 0 fs map "$DEV" /big
last=$(awk '$1 ~ /^[0-9]+$/ { e = $2 + $4 } END { print e + 0 }' <<<"$OUT")
((last * 4096 <= size + 4095)) || fail "blocks past EOF after a failed put: $OUT"
run_bs 0 fs rm "$DEV" /big
fsck_clean "rm /big"
[[ $(free_blocks) == "$before" ]] ||
	fail "free blocks $(free_blocks) after rm /big, $before before"

note "create, mkdir, mv into a full directory on a full filesystem"
rm -f "$IMG"
truncate -s 16M "$IMG"
run_bs 0 fs mkfs "$DEV"
run_bs 0 fs mkdir "$DEV" /d
run_bs 0 fs fallocate -l $(($(free_blocks) * 4096)) "$DEV" /fill
[[ $(free_blocks) == 0 ]] || fail "free blocks after filling: $(free_blocks)"
: >"$T/empty"
long=$(printf 'x%.0s' {1..200})
for ((i = 1; i <= 40; i++)); do
	rc=0
	"$BS" fs put "$DEV" "$T/empty" "/d/$long$i" 2>"$T/err" || rc=$?
	((rc == 0)) || break
done
((rc == 1)) || fail "40 names of 200 bytes fit in one directory block"
ERR=$(cat "$T/err")
expect_err "fs put /d/" "No space left on device" "growing directory"
fsck_clean "create in a full directory"
run_bs 1 fs ls "$DEV" "/d/$long$i"
run_bs 1 fs mkdir "$DEV" "/d/${long}m"
expect_err "No space left on device"
fsck_clean "mkdir in a full directory"
run_bs 1 fs mv "$DEV" /fill "/d/${long}v"
expect_err "No space left on device"
fsck_clean "mv into a full directory"
run_bs 0 fs stat "$DEV" /fill

echo "PASS"
