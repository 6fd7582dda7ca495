#!/usr/bin/env bash
# `blkstack nfs` against nfs-ganesha (VFS export of a temp dir, NFSv4 only,
# no rpcbind, 127.0.0.1 on a free port, everything under the test's temp
# dir, stopped by PID): put / cat / ls / rm byte-exact, ALLOCATE and
# DEALLOCATE, and WRITE_SAME, which ganesha answers NFS4ERR_NOTSUPP: the
# client falls back to bs_write_same() with WRITEs, says so, and the bytes
# on the host directory are right.
source "$(dirname "$0")/lib/cli-common.bash"

command -v ganesha.nfsd >/dev/null || skip "nfs-ganesha not installed (scripts/deps.sh)"
[[ -e /usr/lib/x86_64-linux-gnu/ganesha/libfsalvfs.so ]] ||
	ls /usr/lib/*/ganesha/libfsalvfs.so >/dev/null 2>&1 ||
	skip "nfs-ganesha-vfs not installed (scripts/deps.sh)"
((EUID == 0)) || skip "ganesha's VFS backend needs root (open_by_handle_at)"

make_tmp
GPID=
cleanup() {
	local i
	if [[ -n $GPID ]]; then
		kill -TERM "$GPID" 2>/dev/null || true
		for ((i = 0; i < 100; i++)); do
			kill -0 "$GPID" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$GPID" 2>/dev/null || true
		wait "$GPID" 2>/dev/null || true
	fi
	rm -rf "$T"
}
trap cleanup EXIT

PORT=$(free_port)
E=$T/export
mkdir -p "$E" "$T/recovery"
cat >"$T/ganesha.conf" <<EOF
NFS_CORE_PARAM {
	Protocols = 4;
	NFS_Port = $PORT;
	Bind_addr = 127.0.0.1;
	Enable_NLM = false;
	Enable_RQUOTA = false;
}
NFSv4 {
	Graceless = true;
	Lease_Lifetime = 10;
	RecoveryBackend = fs;
	RecoveryRoot = $T/recovery;
	Minor_Versions = 1, 2;
}
EXPORT {
	Export_Id = 1;
	Path = $E;
	Pseudo = /export;
	Protocols = 4;
	Access_Type = RW;
	Squash = No_Root_Squash;
	SecType = sys;
	FSAL { Name = VFS; }
}
LOG { Default_Log_Level = EVENT; }
EOF
ganesha.nfsd -F -f "$T/ganesha.conf" -L "$T/ganesha.log" -p "$T/ganesha.pid" \
	-N NIV_EVENT >"$T/ganesha.out" 2>&1 &
GPID=$!
for ((i = 0; i < 200; i++)); do
	kill -0 "$GPID" 2>/dev/null || { cat "$T/ganesha.log" >&2; GPID=; fail "ganesha.nfsd exited"; }
	grep -q "NFS SERVER INITIALIZED" "$T/ganesha.log" 2>/dev/null &&
		ss -ltn | grep -q "127.0.0.1\]*:$PORT " && break
	sleep 0.1
done
((i < 200)) || fail "ganesha.nfsd not listening on $PORT after 20 s"
U=nfs://127.0.0.1:$PORT/export
note "ganesha on 127.0.0.1:$PORT, exporting $E as /export"

# ---- put / cat / ls / rm -------------------------------------------------
head -c 3000001 /dev/urandom >"$T/big"
printf 'hello, nfs\n' >"$T/small"
: >"$T/empty"
run_bs 0 nfs put "$T/big" "$U/big"
run_bs 0 nfs put "$T/small" "$U/small"
run_bs 0 nfs put "$T/empty" "$U/empty"
cmp "$T/big" "$E/big" || fail "put: the host file differs"
cmp "$T/small" "$E/small" || fail "put: small file differs"
[[ -f $E/empty && ! -s $E/empty ]] || fail "put: empty file"
"$BS" nfs cat "$U/big" >"$T/big.back" || fail "cat failed"
cmp "$T/big" "$T/big.back" || fail "cat: bytes differ"
run_bs 0 nfs cat "$U/small"
[[ $OUT == "hello, nfs" ]] || fail "cat small: '$OUT'"
# put replaces (truncates) an existing file
run_bs 0 nfs put "$T/small" "$U/big"
cmp "$T/small" "$E/big" || fail "put over a longer file did not truncate"
printf 'from stdin' | "$BS" nfs put - "$U/stdin" || fail "put - failed"
[[ $(cat "$E/stdin") == "from stdin" ]] || fail "put from stdin"
run_bs 0 nfs ls "$U"
for n in big small empty stdin; do
	grep -Eq "^file .* $n\$" <<<"$OUT" || fail "ls lacks $n: $OUT"
done
grep -Eq "^file +0644 +11 .* big\$" <<<"$OUT" || fail "ls size of big: $OUT"
run_bs 0 nfs ls "$U/small"
grep -Eq "^file +0644 +11 " <<<"$OUT" || fail "ls of a file: $OUT"
run_bs 0 nfs rm "$U/stdin"
[[ ! -e $E/stdin ]] || fail "rm left the file"
run_bs 1 nfs cat "$U/stdin"
expect_err "nfs cat" "No such file or directory" "NFS4ERR_NOENT"
run_bs 2 nfs cat "http://x/y"
note "put/cat/ls/rm byte-exact"

# ---- ALLOCATE / DEALLOCATE ----------------------------------------------
run_bs 0 nfs fallocate -a -l 4M "$U/alloc"
[[ $(stat -c %s "$E/alloc") -eq $((4 << 20)) ]] || fail "ALLOCATE size"
(($(allocated "$E/alloc") >= 4 << 20)) || fail "ALLOCATE did not allocate"
head -c $((1 << 20)) /dev/urandom >"$T/m"
run_bs 0 nfs put "$T/m" "$U/punch"
run_bs 0 nfs fallocate -p -o 256K -l 512K "$U/punch"
is_zero "$E/punch" $((256 << 10)) $((512 << 10)) || fail "DEALLOCATE: not zero"
cmp -n $((256 << 10)) "$T/m" "$E/punch" || fail "DEALLOCATE touched the head"
(($(allocated "$E/punch") <= 512 << 10)) || fail "DEALLOCATE freed nothing"
note "ALLOCATE and DEALLOCATE"

# ---- WRITE_SAME: ganesha says NOTSUPP, the client falls back -------------
head -c $((8 << 20)) /dev/urandom >"$T/r"
cp "$T/r" "$T/want"
run_bs 0 nfs put "$T/r" "$U/ws"
run_bs 0 nfs write-same -o 1M -b 4K -n 1024 --zero "$U/ws"
[[ $OUT == *"fallback (NFS4ERR_NOTSUPP)"* && $OUT == *"zero-writes by WRITE + COMMIT"* &&
	$OUT == *"4194304 bytes at 1048576"* ]] || fail "write-same --zero: '$OUT'"
is_zero "$E/ws" $((1 << 20)) $((4 << 20)) || fail "write-same --zero: not zero"
cmp -n $((1 << 20)) "$T/r" "$E/ws" || fail "write-same --zero: head changed"
cmp -i $((5 << 20)) "$T/r" "$E/ws" || fail "write-same --zero: tail changed"

# a pattern at an offset inside 1000-byte blocks, numbered from 2^32 - 2
run_bs 0 nfs write-same -o 12345 -b 1000 -n 3000 --pattern a1b2c3 \
	--pattern-offset 10 --block-number-offset 992 --first-block 4294967294 \
	"$U/pat"
[[ $OUT == *"fallback (NFS4ERR_NOTSUPP)"* && $OUT == *"pattern by WRITE"* ]] ||
	fail "write-same pattern: '$OUT'"
python3 - "$E/pat" <<'EOF' || fail "write-same pattern: bytes differ"
import sys
d = open(sys.argv[1], "rb").read()
assert len(d) == 12345 + 3000 * 1000, len(d)
assert d[:12345] == bytes(12345)
pat = bytes.fromhex("a1b2c3")
for i in range(3000):
    b = d[12345 + i * 1000: 12345 + (i + 1) * 1000]
    want = bytearray(10) + bytearray((pat * 400)[:990])
    want[992:1000] = (4294967294 + i).to_bytes(8, "big")
    assert b == bytes(want), i
EOF

# the same description forced onto the fallback gives the same bytes
cp "$E/pat" "$T/pat.1"
run_bs 0 nfs rm "$U/pat"	# through ganesha: its cache would keep the old inode
run_bs 0 nfs write-same --fallback -o 12345 -b 1000 -n 3000 --pattern a1b2c3 \
	--pattern-offset 10 --block-number-offset 992 --first-block 4294967294 \
	"$U/pat"
[[ $OUT == *"fallback (--fallback)"* ]] || fail "--fallback: '$OUT'"
cmp "$T/pat.1" "$E/pat" || fail "--fallback: different bytes"

# --no-fallback: the server's answer, nothing written
cp "$E/ws" "$T/ws.before"
run_bs 1 nfs write-same --no-fallback -b 4K -n 1 --pattern ff "$U/ws"
expect_err "Operation not supported" "NFS4ERR_NOTSUPP"
cmp "$T/ws.before" "$E/ws" || fail "--no-fallback wrote"

# malformed descriptions: refused before anything is sent
run_bs 1 nfs write-same -b 0 -n 1 --zero "$U/ws"
expect_err "Invalid argument" "block size 0"
run_bs 1 nfs write-same -b 2 -n 1 --pattern 010203 "$U/ws"
expect_err "Invalid argument" "longer than the block"
run_bs 1 nfs write-same -b 16 -n 1 --zero --block-number-offset 9 "$U/ws"
expect_err "Invalid argument" "does not fit"
run_bs 1 nfs write-same -o 8E -b 4K -n 1 --zero "$U/ws"
expect_err "File too large"
run_bs 2 nfs write-same -b 4K -n 1 --pattern xyz "$U/ws"
run_bs 2 nfs write-same -b 4K -n 1 "$U/ws"
cmp "$T/ws.before" "$E/ws" || fail "a refused description wrote"

# fallocate -w: written zeroes (allocated, no holes) by the fallback
run_bs 0 nfs fallocate -w -l 16M "$U/wz"
[[ $OUT == *"fallocate -w: fallback (NFS4ERR_NOTSUPP)"* ]] || fail "fallocate -w: '$OUT'"
[[ $(stat -c %s "$E/wz") -eq $((16 << 20)) ]] || fail "fallocate -w size"
is_zero "$E/wz" 0 $((16 << 20)) || fail "fallocate -w: not zero"
(($(allocated "$E/wz") >= 16 << 20)) || fail "fallocate -w: holes left"
note "write-same falls back on ganesha, bytes right"

# ---- minor version 1: v4.2 ops are not sent ------------------------------
run_bs 0 nfs --minor 1 write-same -b 4K -n 2 --pattern 55 "$U/v41"
[[ $OUT == *"fallback (minor version 2 refused)"* ]] || fail "--minor 1: '$OUT'"
[[ $(od -An -tx1 -N1 "$E/v41" | tr -d ' ') == 55 ]] || fail "--minor 1 bytes"
run_bs 1 nfs --minor 1 fallocate -a -l 1M "$U/v41"
expect_err "Operation not supported" "minor version 2"

grep -q "NFS SERVER INITIALIZED" "$T/ganesha.log" || fail "ganesha log"
echo "PASS: nfs_client_ganesha"
