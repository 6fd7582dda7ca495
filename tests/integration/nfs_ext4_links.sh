#!/usr/bin/env bash
# Symbolic links, hard links, a device node, SETATTR of mode / owner /
# times and EXCLUSIVE4 OPEN over NFS on the ext4 backend (issue 15),
# sent by the vendored pynfs's client library (lib/nfs42_links.py: every
# result and GETATTR checked); then, with the daemon stopped, the image:
# e2fsck -fn clean, `blkstack fs` reads the links and times, and the
# kernel's ext4 (loop, read-only; root only) reads the same targets, link
# counts, modes, owner, mtime to the nanosecond and device number.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/pynfs.bash"
source "$(dirname "$0")/lib/daemon.bash"
need python3 e2fsck

pynfs_ready || skip "$PYNFS_WHY"

need_export_type nfs
daemon_setup
has_type file || skip "no file driver"
IMG=$T/fs.img
truncate -s 64M "$IMG"
run_bs 0 fs mkfs "file:$IMG"
# devices = 1: the CREATE NF4CHR case below (the default refuses it)
cat >>"$T/d.ini" <<EOC
[device fsdev]
type = file
path = $IMG
[export e4]
type = nfs
device = fsdev
listen = 127.0.0.1:$PORT
lease = 5
grace = 0
devices = 1
EOC
start_daemon "$T/d.ini"
pynfs_py "links, SETATTR, device nodes" nfs42_links.py "$PORT"
stop_daemon

note "the image: e2fsck, blkstack fs"
e2fsck -fn "$IMG" >"$T/fsck" 2>&1 || { cat "$T/fsck" >&2; fail "e2fsck -fn"; }
LONG=$(python3 -c 'print("".join("/" if i % 8 == 7 else chr(97 + i % 7) for i in range(4095)), end="")')
run_bs 0 fs readlink "file:$IMG" /sl
[[ $OUT == f ]] || fail "fs readlink /sl: $OUT"
run_bs 0 fs readlink "file:$IMG" /slong
[[ $OUT == "$LONG" ]] || fail "fs readlink /slong differs"
run_bs 0 fs stat "file:$IMG" /d/h
grep -Eq '^  links +3$' <<<"$OUT" || fail "fs stat /d/h: $OUT"
grep -q '(0640)' <<<"$OUT" || fail "fs stat /d/h: mode: $OUT"
grep -q '(1500000000.123456789)' <<<"$OUT" || fail "fs stat /d/h: mtime: $OUT"
run_bs 0 fs cat "file:$IMG" /g
[[ $OUT == "nfs data" ]] || fail "fs cat /g: $OUT"

note "the kernel's ext4 reads them (loop, read-only)"
[[ $(id -u) == 0 ]] || { echo "PASS (not root: no loop mount)"; exit 0; }
MNT=$T/mnt
mkdir -p "$MNT"
if ! mount -t ext4 -o loop,ro "$IMG" "$MNT" 2>"$T/mount.err"; then
	echo "PASS (mount -o loop failed: $(head -1 "$T/mount.err"))"
	exit 0
fi
trap 'umount "$MNT" 2>/dev/null || umount -l "$MNT"; rm -rf "$T"' EXIT
[[ $(readlink "$MNT/sl") == f ]] || fail "kernel readlink /sl"
[[ $(readlink "$MNT/slong") == "$LONG" ]] || fail "kernel readlink /slong"
got=$(stat -c '%h %a %u %.9Y' "$MNT/f" "$MNT/g" "$MNT/d/h" | sort -u)
[[ $got == "3 640 1234 1500000000.123456789" ]] || fail "kernel stat f/g/d/h: '$got'"
[[ $(cat "$MNT/d/h") == "nfs data" ]] || fail "kernel: /d/h data"
got=$(stat -c '%a %F %t:%T' "$MNT/d" "$MNT/c" | paste -sd,)
[[ $got == "750 directory 0:0,644 character special file 1:3" ]] ||
	fail "kernel stat d, c: '$got'"
[[ -f $MNT/x ]] || fail "kernel: no /x"
echo "kernel: the same targets, counts, mode, owner, mtime and device"
echo "PASS: nfs_ext4_links"
