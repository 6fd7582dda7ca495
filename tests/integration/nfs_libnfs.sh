#!/usr/bin/env bash
# A foreign NFS 4.0 client against blkstackd's nfs export of a host
# directory: libnfs's nfs-ls and nfs-cat (libnfs-utils), byte-exact.
# nfs-cp is not tested: its writes of 4 KiB and more fail here (cause
# not found yet, see docs/nfs.md "Other clients").
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need nfs-ls nfs-cat
[[ $EUID == 0 ]] || skip "the directory backend needs CAP_DAC_READ_SEARCH (run as root)"
daemon_setup
DIR=$T/dir
mkdir -p "$DIR/sub"
cat >>"$T/d.ini" <<EOC
[export e]
type = nfs
path = $DIR
listen = 127.0.0.1:$PORT
lease = 5
grace = 0
EOC
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

stop_daemon
echo "PASS: nfs_libnfs"
