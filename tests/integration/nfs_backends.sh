#!/usr/bin/env bash
# What must hold on both blkstackd nfs backends, a host directory and
# ext4 on a file device, seen through NFS only (lib/nfs42_backend.py,
# sent by the vendored pynfs's client library):
# - v4.2 sparse ops on a known layout: SEEK DATA and HOLE in data, in a
#   hole, in the trailing hole (NFS4_OK with sr_eof: not found), at and
#   past EOF (NFS4ERR_NXIO); READ_PLUS with hole segments where the holes
#   are and the right bytes; an unaligned DEALLOCATE; ALLOCATE past EOF;
# - a restart: a file handle from before blkstackd restarted still works
#   (PUTFH + GETATTR, READ, WRITE; LOOKUP gives the same handle), and the
#   WRITE / COMMIT verifier is another one.
# Then e2fsck -fn of the ext4 image is clean.
# SKIP without pynfs (or python3-ply), or without the nfs export type.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/pynfs.bash"
source "$(dirname "$0")/lib/daemon.bash"
need python3 e2fsck
((EUID == 0)) || skip "the directory backend needs CAP_DAC_READ_SEARCH (root)"
pynfs_ready || skip "$PYNFS_WHY"
export PYNFS=$(cd "$PY" && pwd)
need_export_type nfs
daemon_setup
has_type file || skip "no file driver"
mkdir -p "$T/share"
truncate -s 64M "$T/fs.img"
run_bs 0 fs mkfs "file:$T/fs.img"
PE=$(free_port)
cat >>"$T/d.ini" <<EOC
[device fsdev]
type = file
path = $T/fs.img
[export d]
type = nfs
path = $T/share
listen = 127.0.0.1:$PORT
lease = 5
grace = 0
[export e]
type = nfs
device = fsdev
listen = 127.0.0.1:$PE
lease = 5
grace = 0
EOC
start_daemon "$T/d.ini"

# py WHAT ARGS...: lib/nfs42_backend.py ARGS, its ok lines shown
py() {
	local what=$1 out
	shift
	out=$(PATH=/usr/bin:/bin timeout 120 python3 \
		"$(dirname "$0")/lib/nfs42_backend.py" "$@" 2>&1) ||
		{ echo "$out" >&2; fail "$what (nfs42_backend.py $*)"; }
	grep '^ok' <<<"$out" | sed 's/^/   /'
	grep -qx PASS <<<"$out" || { echo "$out" >&2; fail "$what: no PASS"; }
}

for b in "d $PORT" "e $PE"; do
	set -- $b
	note "backend $1: SEEK, READ_PLUS, DEALLOCATE, ALLOCATE"
	py "sparse ops ($1)" sparse "$2" sp
	py "save ($1)" save "$2" keep "$T/$1.json"
done

note "blkstackd restarted on the same configuration"
stop_daemon
start_daemon "$T/d.ini"
for b in "d $PORT" "e $PE"; do
	set -- $b
	note "backend $1: the handle from before the restart"
	py "restart ($1)" check "$2" "$T/$1.json"
done
stop_daemon
e2fsck -fn "$T/fs.img" >"$T/fsck" 2>&1 || { cat "$T/fsck" >&2; fail "e2fsck -fn"; }
echo "PASS: nfs_backends"
