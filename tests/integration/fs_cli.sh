#!/usr/bin/env bash
# `blkstack fs ...` end to end on a file device: every subcommand, the
# one-line errors naming device, path and reason, usage errors (exit 2),
# the WRITE_ZEROES refusals that change nothing, e2fsck -fn clean at the end.
source "$(dirname "$0")/lib/cli-common.bash"
has_type file || skip "no 'file' device type in this build"
command -v e2fsck >/dev/null || skip "e2fsck not installed"
make_tmp

IMG="$T/fs.img"
DEV="file:$IMG"
truncate -s 128M "$IMG"

fsck_clean() {
	local out rc=0
	out=$(e2fsck -fn "$IMG" 2>&1) || rc=$?
	((rc == 0)) || { echo "$out" >&2; fail "e2fsck -fn after $1: exit $rc"; }
}

note "help and usage"
run_bs 0 help fs
for s in mkfs ls stat put cat rm mkdir ln readlink chmod chown touch mknod \
	fallocate map getfattr setfattr ea_inode EXIT; do
	grep -q "$s" <<<"$OUT" || fail "help fs lacks '$s'"
done
run_bs 0 fs --help
run_bs 2 fs
run_bs 2 fs frobnicate "$DEV"
run_bs 2 fs cat "$DEV"
run_bs 2 fs fallocate "$DEV" /f
[[ $ERR == *"-l LENGTH is missing"* ]] || fail "usage error: $ERR"
run_bs 2 fs fallocate -w -z -l 1M "$DEV" /f
run_bs 2 fs ls -q "$DEV"

note "no filesystem yet"
run_bs 1 fs ls "$DEV"
expect_err "fs.img" "fs ls /" "no ext2/3/4 filesystem"

note "mkfs, mkdir, put, cat, ls, stat"
run_bs 0 fs mkfs -L test "$DEV"
grep -q "ext4, 128 MiB" <<<"$OUT" || fail "mkfs said: $OUT"
fsck_clean mkfs
run_bs 0 fs mkdir "$DEV" /d
run_bs 1 fs mkdir "$DEV" /d
expect_err "fs.img" "fs mkdir /d" "File exists"
head -c 300000 /dev/urandom >"$T/data"
run_bs 0 fs put "$DEV" "$T/data" /d/data
"$BS" fs cat "$DEV" /d/data | cmp - "$T/data" || fail "cat differs from put"
run_bs 0 fs ls "$DEV" /
[[ $OUT == *"d/"* && $OUT == *"lost+found/"* ]] || fail "ls /: $OUT"
run_bs 0 fs ls -l "$DEV" /d
grep -Eq '^-rw.* 300000 .* data$' <<<"$OUT" || fail "ls -l /d: $OUT"
run_bs 0 fs stat "$DEV" /d/data
grep -Eq 'size +300000' <<<"$OUT" || fail "stat: $OUT"
run_bs 0 fs stat "$DEV"
grep -Eq 'label +test' <<<"$OUT" && grep -Eq 'state +clean' <<<"$OUT" ||
	fail "stat of the filesystem: $OUT"
run_bs 1 fs cat "$DEV" /d/nope
expect_err "fs cat /d/nope" "No such file or directory"
run_bs 1 fs put "$DEV" "$T/missing" /x
expect_err "fs put /x" "$T/missing"

note "mv, truncate, rm"
run_bs 0 fs mv "$DEV" /d/data /data
run_bs 1 fs mv "$DEV" / /d/x
run_bs 0 fs truncate -s 1000 "$DEV" /data
[[ $("$BS" fs cat "$DEV" /data | wc -c) == 1000 ]] || fail "truncate -s 1000"
cmp -s <("$BS" fs cat "$DEV" /data) <(head -c 1000 "$T/data") || fail "truncate kept wrong bytes"
run_bs 1 fs rm "$DEV" /
run_bs 0 fs rm "$DEV" /d
run_bs 1 fs ls "$DEV" /d
expect_err "fs ls /d" "No such file"

note "ln, ln -s, readlink, chmod, chown, touch, mknod"
run_bs 0 fs ln -s "$DEV" data /l
run_bs 0 fs readlink "$DEV" /l
[[ $OUT == data ]] || fail "readlink /l: $OUT"
run_bs 1 fs readlink "$DEV" /data
expect_err "fs readlink /data" "Invalid argument" "not a symbolic link"
run_bs 1 fs ln -s "$DEV" "" /l2
expect_err "fs ln /l2" "No such file or directory" "empty target"
run_bs 1 fs ln -s "$DEV" "$(printf 'x%.0s' $(seq 4096))" /l2
expect_err "fs ln /l2" "File name too long"
run_bs 0 fs ln "$DEV" /data /data2
run_bs 1 fs ln "$DEV" /data /l
expect_err "fs ln /l" "File exists"
run_bs 1 fs ln "$DEV" /lost+found /lf
expect_err "fs ln /lf" "Operation not permitted" "directories"
run_bs 0 fs chmod "$DEV" 4755 /data
run_bs 0 fs chown "$DEV" 7:8 /data2   # chown(2) clears set-user-ID
run_bs 0 fs stat "$DEV" /data
grep -q '(0755)' <<<"$OUT" || fail "chown kept set-user-ID: $OUT"
run_bs 0 fs chmod "$DEV" 2755 /data
run_bs 0 fs touch -d 86400.000000001 "$DEV" /data
run_bs 0 fs touch "$DEV" /new
run_bs 0 fs mknod "$DEV" /null c 1 3
run_bs 0 fs stat "$DEV" /data
for w in '(02755)' 'links +2' 'uid / gid +7 / 8' \
	'atime +1970-01-02 00:00:00.000000001 UTC' 'mtime +1970-01-02 00:00:00.000000001'; do
	grep -Eq -- "$w" <<<"$OUT" || fail "stat /data lacks '$w': $OUT"
done
run_bs 0 fs stat "$DEV" /null
grep -Eq 'device +1:3' <<<"$OUT" || fail "stat /null: $OUT"
run_bs 0 fs ls -l "$DEV" /
grep -q ' l -> data$' <<<"$OUT" || fail "ls -l: no 'l -> data': $OUT"
grep -Eq '^-rwxr-sr-x +2 +7 +8 ' <<<"$OUT" || fail "ls -l: /data: $OUT"
run_bs 1 fs chmod "$DEV" 644 /l
expect_err "fs chmod /l" "Operation not supported"
run_bs 2 fs chmod "$DEV" 8 /data
run_bs 2 fs chown "$DEV" x /data
run_bs 2 fs touch -d yesterday "$DEV" /data
run_bs 2 fs mknod "$DEV" /x c
run_bs 2 fs mknod "$DEV" /x q
for n in /l /data2 /new /null; do run_bs 0 fs rm "$DEV" "$n"; done
fsck_clean "links and attributes"

note "fallocate modes and map"
run_bs 0 fs fallocate -l 8M "$DEV" /u
run_bs 0 fs map "$DEV" /u
grep -q unwritten <<<"$OUT" || fail "map /u: $OUT"
run_bs 0 fs fallocate -w -o 100 -l 8M "$DEV" /w
run_bs 0 fs map "$DEV" /w
grep -q ' written' <<<"$OUT" || fail "map /w: $OUT"
[[ $("$BS" fs cat "$DEV" /w | wc -c) == $((8 * 1024 * 1024 + 100)) ]] || fail "size of /w"
cmp -s <("$BS" fs cat "$DEV" /w) <(head -c $((8 * 1024 * 1024 + 100)) /dev/zero) ||
	fail "/w does not read zeroes"
run_bs 1 fs fallocate -w -k -l 1M "$DEV" /w
expect_err "fs fallocate /w" "Operation not supported" "keep the size"
run_bs 0 fs fallocate -p -o 4096 -l 8192 "$DEV" /data
cmp -s <("$BS" fs cat "$DEV" /data) <(head -c 1000 "$T/data") || fail "punch past EOF changed data"
run_bs 0 fs fallocate -z -o 10 -l 20 "$DEV" /data
cmp -s <("$BS" fs cat "$DEV" /data | head -c 10) <(head -c 10 "$T/data") || fail "zero range head"
[[ $("$BS" fs cat "$DEV" /data | tail -c +11 | head -c 20 | tr -d '\0' | wc -c) == 0 ]] ||
	fail "zero range did not zero"

note "getfattr, setfattr"
run_bs 0 fs setfattr "$DEV" /data user.text "hello world"
run_bs 0 fs setfattr "$DEV" /data user.bin 0x00ff2241
run_bs 0 fs setfattr "$DEV" /data trusted.t 'q"b\s'
run_bs 0 fs getfattr "$DEV" /data
[[ $OUT == *'user.text="hello world"'* && $OUT == *'user.bin=0x00ff2241'* &&
   $OUT == *'trusted.t="q\042b\134s"'* ]] || fail "getfattr /data: $OUT"
run_bs 0 fs getfattr "$DEV" /data user.text
[[ $OUT == 'user.text="hello world"' ]] || fail "getfattr NAME: $OUT"
run_bs 0 fs getfattr -e hex "$DEV" /data user.text
[[ $OUT == 'user.text=0x68656c6c6f20776f726c64' ]] || fail "getfattr -e hex: $OUT"
run_bs 0 fs getfattr -e text "$DEV" /data user.bin
[[ $OUT == 'user.bin="\000\377\042A"' ]] || fail "getfattr -e text: $OUT"
"$BS" fs getfattr --only-values "$DEV" /data user.bin | cmp - <(printf '\000\377"A') ||
	fail "getfattr --only-values"
head -c 4040 /dev/zero | tr '\0' v >"$T/v4040"
run_bs 0 fs setfattr "$DEV" /data user.big "$(cat "$T/v4040")"
run_bs 1 fs setfattr "$DEV" /data user.big "$(cat "$T/v4040")vvvv"
expect_err "fs setfattr /data" "No space left" "ea_inode"
run_bs 1 fs getfattr "$DEV" /data user.nope
expect_err "fs getfattr /data" "No data available"
run_bs 1 fs setfattr "$DEV" /data other.x v
expect_err "fs setfattr /data" "Operation not supported" "user., trusted., security."
run_bs 0 fs ln -s "$DEV" data /xl
run_bs 1 fs setfattr "$DEV" /xl user.x v
expect_err "fs setfattr /xl" "Operation not permitted"
run_bs 0 fs setfattr "$DEV" /xl trusted.x v
run_bs 0 fs rm "$DEV" /xl
run_bs 0 fs setfattr -x user.big "$DEV" /data
run_bs 1 fs setfattr -x user.big "$DEV" /data
expect_err "fs setfattr /data" "No data available"
run_bs 2 fs setfattr "$DEV" /data user.x
run_bs 2 fs setfattr "$DEV" /data user.x 0x123
run_bs 2 fs getfattr --only-values "$DEV" /data
run_bs 2 fs getfattr -e base64 "$DEV" /data
fsck_clean "setfattr"

note "write zeroes refused with the knob off: nothing changes"
before=$("$BS" fs map "$DEV" /data; "$BS" fs cat "$DEV" /data | sha256sum)
run_bs 1 fs fallocate -w -l 1M "$DEV,write_zeroes_unmap=0" /data
expect_err "fs fallocate /data" "Operation not supported" "write zeroes"
after=$("$BS" fs map "$DEV" /data; "$BS" fs cat "$DEV" /data | sha256sum)
[[ $before == "$after" ]] || fail "a refused write zeroes changed /data"
note "a device of a config file"
cat >"$T/bs.ini" <<EOF2
[device vol0]
type = file
path = $IMG
EOF2
run_bs 0 -c "$T/bs.ini" fs ls vol0 /
grep -qx data <<<"$OUT" || fail "fs ls vol0 /: $OUT"
run_bs 1 -c "$T/bs.ini" fs cat vol0 /nope
expect_err "vol0: fs cat /nope" "No such file"
fsck_clean "the fs commands"
echo "PASS"
