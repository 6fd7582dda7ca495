#!/usr/bin/env bash
# Symbolic links, hard links, modes, owners and times made by `blkstack
# fs` read by the kernel's own ext4, and the other way round:
# - blkstack makes a fast symlink (in the inode), block symlinks of 60
#   and 4095 bytes, a dangling one, hard links (3 names, one in a
#   subdirectory), chmod 4755 / 1777 / 600, chown 100000:70001, times
#   with nanoseconds (also before 1970 and after 2038), device nodes (old
#   and new number encodings), a fifo and a socket, removes one name of a
#   linked file; e2fsck -fn is clean;
# - the kernel (loop, read-only) reads the same targets (readlink), link
#   counts and inode numbers, modes, owners and times to the nanosecond;
# - the kernel (loop, read-write) makes a fast and a block symlink, a hard
#   link and sets a mode and times; blkstack reads them back (readlink,
#   stat), removes the names (inode freed only with the last one) and
#   e2fsck -fn is clean again.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/fs-image.bash"
has_type file || skip "no 'file' device type in this build"
command -v e2fsck >/dev/null || skip "e2fsck not installed"
make_tmp

fs_image_setup

# a 4095-byte target: a path of many components
LONG=$(python3 -c 'print("".join("/" if i % 8 == 7 else chr(97 + i % 7) for i in range(4095)), end="")')
L60=$(printf 'b%.0s' $(seq 60))

truncate -s 64M "$IMG"
run_bs 0 fs mkfs "$DEV"
printf 'linked data\n' >"$T/data"
run_bs 0 fs put "$DEV" "$T/data" /f
run_bs 0 fs mkdir "$DEV" /d
note "blkstack: symlinks (fast, 60 and 4095 bytes, dangling), links, modes, owners, times"
run_bs 0 fs ln -s "$DEV" f /s
run_bs 0 fs ln -s "$DEV" "$L60" /s60
run_bs 0 fs ln -s "$DEV" "$LONG" /d/slong
run_bs 0 fs ln -s "$DEV" ../nowhere /d/dangling
run_bs 0 fs ln "$DEV" /f /d/g
run_bs 0 fs ln "$DEV" /f /h
run_bs 0 fs ln "$DEV" /f /gone
run_bs 0 fs rm "$DEV" /gone
run_bs 1 fs ln "$DEV" /d /d2
expect_err "fs ln /d2" "Operation not permitted"
run_bs 0 fs chmod "$DEV" 4755 /f
run_bs 0 fs chmod "$DEV" 1777 /d
run_bs 0 fs put "$DEV" "$T/data" /p
run_bs 0 fs chmod "$DEV" 600 /p
run_bs 0 fs chown "$DEV" 100000:70001 /p
run_bs 0 fs chown "$DEV" :42 /d
run_bs 0 fs touch -d 1234567890.123456789 "$DEV" /p
run_bs 0 fs touch -a -d 4102444800.5 "$DEV" /f
run_bs 0 fs touch -m -d -86400.25 "$DEV" /f
run_bs 1 fs chmod "$DEV" 644 /s
expect_err "fs chmod /s" "Operation not supported"
run_bs 0 fs mknod "$DEV" /d/c c 1 3
run_bs 0 fs mknod "$DEV" /d/b b 300 70000
run_bs 0 fs mknod "$DEV" /d/fifo p
run_bs 0 fs mknod "$DEV" /d/sock s
run_bs 0 fs readlink "$DEV" /d/slong
[[ $OUT == "$LONG" ]] || fail "fs readlink /d/slong: ${#OUT} bytes differ"
run_bs 0 fs ls -l "$DEV" /
grep -q ' s -> f$' <<<"$OUT" || fail "fs ls -l: no 's -> f': $OUT"
grep -Eq '^-rwsr-xr-x +3 ' <<<"$OUT" || fail "fs ls -l: /f not 4755 with 3 links: $OUT"
run_bs 0 fs stat "$DEV" /f
fino=$(awk '$1 == "inode" {print $2}' <<<"$OUT")
fsck_clean "blkstack's links"

note "the kernel's ext4 reads them (loop, read-only)"
[[ $(id -u) == 0 ]] || skip "not root: cannot loop-mount (blkstack side passed)"
mkdir -p "$MNT"
if ! mount -t ext4 -o loop,ro "$IMG" "$MNT" 2>"$T/mount.err"; then
	skip "mount -o loop failed: $(head -1 "$T/mount.err")"
fi
mounted=1
[[ $(readlink "$MNT/s") == f ]] || fail "kernel readlink /s: $(readlink "$MNT/s")"
[[ $(readlink "$MNT/s60") == "$L60" ]] || fail "kernel readlink /s60"
[[ $(readlink "$MNT/d/slong") == "$LONG" ]] || fail "kernel readlink /d/slong"
[[ $(readlink "$MNT/d/dangling") == ../nowhere ]] || fail "kernel readlink /d/dangling"
[[ $(cat "$MNT/s") == "linked data" ]] || fail "kernel: /s does not lead to /f"
[[ $(stat -c %s "$MNT/d/slong") == 4095 ]] || fail "kernel: /d/slong size"
want="3 $fino 4755"
for n in f h d/g; do
	got=$(stat -c '%h %i %a' "$MNT/$n")
	[[ $got == "$want" ]] || fail "kernel stat /$n: '$got', want '$want'"
done
[[ $(cat "$MNT/d/g") == "linked data" ]] || fail "kernel: /d/g data"
[[ -e $MNT/gone ]] && fail "kernel: the removed name /gone is there"
got=$(stat -c '%a %g' "$MNT/d")
[[ $got == "1777 42" ]] || fail "kernel stat /d: '$got'"
got=$(stat -c '%a %u %g %.9Y' "$MNT/p")
[[ $got == "600 100000 70001 1234567890.123456789" ]] || fail "kernel stat /p: '$got'"
got=$(stat -c '%.9X %.9Y' "$MNT/f")
[[ $got == "4102444800.500000000 -86400.250000000" ]] || fail "kernel stat /f times: '$got'"
got=$(stat -c '%F %t:%T' "$MNT/d/c" "$MNT/d/b" "$MNT/d/fifo" "$MNT/d/sock" | paste -sd,)
want="character special file 1:3,block special file 12c:11170,fifo 0:0,socket 0:0"
[[ $got == "$want" ]] || fail "kernel stat of the nodes: '$got', want '$want'"
got=$(stat -c '%A %h' "$MNT/s")
[[ $got == "lrwxrwxrwx 1" ]] || fail "kernel stat /s: '$got'"
echo "kernel: targets, counts, inode $fino, modes, owners, nanosecond times as made"
umount "$MNT"
mounted=0
fsck_clean "the read-only mount"

note "the kernel makes links (loop, read-write); blkstack reads them"
mount -t ext4 -o loop "$IMG" "$MNT" || fail "mount read-write"
mounted=1
ln -s f "$MNT/ks"
ln -s "$LONG" "$MNT/kslong"
ln "$MNT/p" "$MNT/d/kp"
chmod 2750 "$MNT/h"
touch -m -d @1600000000.987654321 "$MNT/h"
pino=$(stat -c %i "$MNT/p")
umount "$MNT"
mounted=0
fsck_clean "the read-write mount"
run_bs 0 fs readlink "$DEV" /ks
[[ $OUT == f ]] || fail "fs readlink /ks (kernel's fast link): $OUT"
run_bs 0 fs readlink "$DEV" /kslong
[[ $OUT == "$LONG" ]] || fail "fs readlink /kslong (kernel's block link)"
run_bs 0 fs stat "$DEV" /d/kp
grep -Eq "^  inode +$pino\$" <<<"$OUT" || fail "fs stat /d/kp: not inode $pino: $OUT"
grep -Eq '^  links +2$' <<<"$OUT" || fail "fs stat /d/kp: not 2 links: $OUT"
run_bs 0 fs stat "$DEV" /h
grep -q '(02750)' <<<"$OUT" || fail "fs stat /h: mode: $OUT"
grep -q '(1600000000.987654321)' <<<"$OUT" || fail "fs stat /h: mtime: $OUT"
note "blkstack removes every name; the inodes go with the last ones"
free0=$("$BS" fs stat "$DEV" | awk '$1 == "free" && $2 == "inodes" {print $3}')
for n in /ks /kslong /s /s60 /d/slong /d/dangling /d/kp /p /h /d/g /d/c \
	/d/b /d/fifo /d/sock; do
	run_bs 0 fs rm "$DEV" "$n"
done
run_bs 0 fs cat "$DEV" /f
[[ $OUT == "linked data" ]] || fail "/f lost its data with its other names"
run_bs 0 fs rm "$DEV" /f
free1=$("$BS" fs stat "$DEV" | awk '$1 == "free" && $2 == "inodes" {print $3}')
((free1 == free0 + 12)) || fail "free inodes $free0 -> $free1, want +12"
fsck_clean "removing everything"
echo "PASS"
