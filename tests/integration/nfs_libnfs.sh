#!/usr/bin/env bash
# A foreign NFS 4.0 client against blkstackd's nfs export of a host
# directory: libnfs's nfs-ls and nfs-cat (libnfs-utils), byte-exact; and
# bench/tools/nfsio (libnfs's async API, when libnfs-dev is there):
# verified random 4 KiB writes and reads with 16 in flight, 1 MiB
# sequential ones. nfs-cp is not tested: libnfs 4.0 cannot send a v4
# WRITE of 4 KiB or more (docs/nfs.md "Other clients").
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
source "$(dirname "$0")/lib/nfs.bash"
need nfs-ls nfs-cat
[[ $EUID == 0 ]] || skip "the directory backend needs CAP_DAC_READ_SEARCH (run as root)"
daemon_setup
DIR=$T/dir
mkdir -p "$DIR/sub"
nfs_dir_export "$T/d.ini" e "$DIR" "$PORT"
head -c 1500000 /dev/urandom >"$DIR/big"
cp "$DIR/big" "$DIR/sub/big"
echo hello >"$DIR/sub/small"
start_daemon "$T/d.ini"
U="nfs://127.0.0.1"
Q="?version=4&nfsport=$PORT"

timeout 30 nfs-ls "$U/$Q" >"$T/ls" 2>"$T/ls.err" ||
	{ cat "$T/ls.err" >&2; fail "nfs-ls exited $?"; }
grep -Eq ' 1500000 .*big$' "$T/ls" || { cat "$T/ls" >&2; fail "nfs-ls: no big"; }
grep -Eq 'sub$' "$T/ls" || { cat "$T/ls" >&2; fail "nfs-ls: no sub"; }
timeout 30 nfs-ls "$U/sub$Q" >"$T/ls2" 2>&1 || fail "nfs-ls sub: $(cat "$T/ls2")"
grep -q 'small$' "$T/ls2" || fail "nfs-ls sub: $(cat "$T/ls2")"
note "nfs-ls lists the root and a subdirectory"

# nfs-cat mounts the URL's directory: a file in the root has an empty
# export path, which libnfs refuses; files in sub/ it reads
timeout 60 nfs-cat "$U/sub/big$Q" >"$T/back" 2>"$T/cat.err" ||
	{ cat "$T/cat.err" >&2; fail "nfs-cat exited"; }
cmp "$DIR/big" "$T/back" || fail "nfs-cat: bytes differ"
timeout 30 nfs-cat "$U/sub/small$Q" >"$T/back2" 2>&1 || fail "nfs-cat small"
cmp "$DIR/sub/small" "$T/back2" || fail "nfs-cat small: bytes differ"
note "nfs-cat byte-exact (1.5 MB and 6 bytes)"

# nfsio: the pattern depends on the offset only, and the same seed draws
# the same offsets, so a read pass checks exactly what was written
if nfsio_build; then
	N="$U/sub/io$Q"
	run_nfsio() {
		timeout 120 "$NFSIO" "$@" "$N" >>"$T/nfsio.out" 2>&1 ||
			{ cat "$T/nfsio.out" >&2; fail "nfsio $*"; }
	}
	run_nfsio -m seq -o write -b 1M -q 4 -s 8M -C -V
	[[ $(stat -c %s "$DIR/sub/io") == 8388608 ]] || fail "nfsio: the file is not 8 MiB"
	run_nfsio -m seq -o read -b 1M -q 4 -s 8M -C -V
	run_nfsio -m rand -o write -b 4k -q 16 -s 8M -n 100 -S 5 -V
	run_nfsio -m rand -o read -b 4k -q 16 -s 8M -n 100 -S 5 -V
	run_nfsio -m rand -o read -b 4k -q 1 -s 8M -n 100 -S 6 -V
	grep -c ' errors=0 verified=yes' "$T/nfsio.out" | grep -qx 5 ||
		{ cat "$T/nfsio.out" >&2; fail "nfsio: a run was not verified"; }
	# a second reader sees the same bytes as the host file
	timeout 60 nfs-cat "$N" >"$T/io.back" 2>/dev/null || fail "nfs-cat of nfsio's file"
	cmp "$DIR/sub/io" "$T/io.back" || fail "nfs-cat: nfsio's file differs"
	note "nfsio: 1 MiB sequential and 100+100 random 4 KiB (qd 16) verified writes and reads"
else
	note "nfsio not built ($(nfsio_why)): its checks are left out"
fi

# the directory backend keeps files it serves open (a cache of fds by
# handle), closing what nobody used for 2 s: then the host may run a
# file written over NFS (no ETXTBSY) and a deleted file frees its space
open_files() { ls -l "/proc/$DPID/fd" 2>/dev/null | grep -c " $DIR/" || true; }
n=$(open_files)
((n > 0)) || fail "no file held open right after the last call (the fd cache)"
sleep 3.5
(($(open_files) == 0)) ||
	fail "files still open 3.5 s after the last call: $(ls -l "/proc/$DPID/fd" | grep " $DIR/")"
note "the $n files the backend kept open are closed once idle"

stop_daemon
echo "PASS: nfs_libnfs"
