#!/usr/bin/env bash
# `blkstack nfs` against blkstackd's own NFS export (`type = nfs` on a host
# directory): put / cat / ls / rm byte-exact, and write-same / fallocate -w
# with the bytes checked on the host directory. The server serves
# WRITE_SAME, so the command must say "server WRITE_SAME" every time.
# Skips when this build has no nfs export type.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
source "$(dirname "$0")/lib/nfs.bash"
need python3
need_export_type nfs
daemon_setup
DIR=$T/dir
mkdir -p "$DIR"
nfs_dir_export "$T/d.ini" e "$DIR" "$PORT"
# a build without the nfs export type refuses the config at once
start_daemon "$T/d.ini"
U=nfs://127.0.0.1:$PORT

head -c 2500000 /dev/urandom >"$T/big"
run_bs 0 nfs put "$T/big" "$U/big"
cmp "$T/big" "$DIR/big" || fail "put: host bytes differ"
"$BS" nfs cat "$U/big" >"$T/back" || fail "cat"
cmp "$T/big" "$T/back" || fail "cat: bytes differ"
run_bs 0 nfs ls "$U/"
grep -Eq "^file +0644 +2500000 .* big\$" <<<"$OUT" || fail "ls: $OUT"
run_bs 0 nfs rm "$U/big"
[[ ! -e $DIR/big ]] || fail "rm"
note "put/cat/ls/rm byte-exact"

# write-same: a pattern with block numbers, then zeroes over part of it
run_bs 0 nfs write-same -b 4K -n 64 --pattern 0102030405 \
	--block-number-offset 4088 --first-block 7 "$U/ws"
[[ $OUT == *"server WRITE_SAME: 262144 bytes at 0"* ]] ||
	fail "write-same: not the server path: '$OUT'"
python3 - "$DIR/ws" <<'EOF' || fail "write-same: bytes differ"
import sys
d = open(sys.argv[1], "rb").read()
assert len(d) == 64 * 4096, len(d)
pat = bytes.fromhex("0102030405")
for i in range(64):
    b = bytearray((pat * 820)[:4096])
    b[4088:4096] = (7 + i).to_bytes(8, "big")
    assert d[i * 4096:(i + 1) * 4096] == bytes(b), i
EOF
run_bs 0 nfs write-same -o 8K -b 4K -n 16 --zero "$U/ws"
[[ $OUT == *"server WRITE_SAME: 65536 bytes at 8192"* ]] || fail "zero write-same: '$OUT'"
is_zero "$DIR/ws" 8192 65536 || fail "zero write-same: not zero"
run_bs 0 nfs fallocate -w -l 8M "$U/wz"
[[ $OUT == *"server WRITE_SAME"* ]] || fail "fallocate -w: '$OUT'"
is_zero "$DIR/wz" 0 $((8 << 20)) || fail "fallocate -w: not zero"
(($(allocated "$DIR/wz") >= 8 << 20)) || fail "fallocate -w: holes"
stop_daemon
echo "PASS: nfs_client_blkstack (WRITE_SAME served by the server)"
