#!/usr/bin/env bash
# fallocate and zeroout through the blkstack CLI on a file device over a
# file of random data on a disk filesystem: bytes read back, blocks freed
# or kept (du, SEEK_DATA), refusals that change nothing (sha256).
source "$(dirname "$0")/lib/cli-common.bash"
has_type file || skip "no 'file' device type in this build (blkstack --help)"
make_tmp

IMG="$T/disk.img"
MiB=$((1024 * 1024))
fresh() {
	dd if=/dev/urandom of="$IMG" bs=1M count=96 status=none
	sync "$IMG"
}
DEV="file:$IMG"

note "fallocate -w -l 64M: zeroes, blocks freed"
fresh
before=$(allocated "$IMG")
run_bs 0 info --json "$DEV"
jq -e '.write_zeroes_unmap == true and .size == 100663296' <<<"$OUT" \
	>/dev/null || fail "file on this filesystem should zero by unmapping: $OUT"
run_bs 0 fallocate -w -l 64M "$DEV"
is_zero "$IMG" 0 $((64 * MiB)) || fail "-w: range does not read back as zeroes"
cmp -s <(tail -c +$((64 * MiB + 1)) "$IMG") /dev/null && fail "tail lost"
after=$(allocated "$IMG")
((before - after >= 63 * MiB)) || fail "-w freed only $((before - after)) bytes"
[[ $(data_bytes "$IMG" 0 $((64 * MiB))) == 0 ]] ||
	fail "-w: SEEK_DATA still finds data in the range"
[[ $(data_bytes "$IMG" $((64 * MiB)) $((32 * MiB))) == $((32 * MiB)) ]] ||
	fail "-w: data after the range was touched"

note "fallocate -z: zeroes, blocks stay allocated"
fresh
before=$(allocated "$IMG")
tail_sha=$(tail -c +$((32 * MiB + 1)) "$IMG" | sha256sum)
run_bs 0 fallocate -z -l 32M "$DEV"
is_zero "$IMG" 0 $((32 * MiB)) || fail "-z: range does not read back as zeroes"
[[ $(tail -c +$((32 * MiB + 1)) "$IMG" | sha256sum) == "$tail_sha" ]] ||
	fail "-z: bytes after the range changed"
after=$(allocated "$IMG")
((after >= before - MiB)) || fail "-z freed blocks: $before -> $after"

note "refusals leave every byte: -w -k, misaligned, out of range"
fresh
sum=$(sha "$IMG")
run_bs 1 fallocate -w -k -l 64M "$DEV"
expect_err "Operation not supported"
run_bs 1 fallocate -z -o 100 -l 1M "$DEV"
expect_err "Invalid argument"
run_bs 1 fallocate -w -o 1M -l 1000 "$DEV"
expect_err "Invalid argument"
run_bs 1 fallocate -z -o 96M -l 1M "$DEV"
expect_err "Invalid argument"
run_bs 1 fallocate -w -o 95M -l 2M "$DEV"
expect_err "Invalid argument"
run_bs 1 zeroout -o 100 -l 1M "$DEV"
expect_err "Invalid argument"
run_bs 1 zeroout -o 95M -l 2M "$DEV"
expect_err "Invalid argument"
[[ $(sha "$IMG") == "$sum" ]] || fail "a refused request changed data"

note "write_zeroes_unmap = 0 in a config: -w refused naming the knob"
cat >"$T/c.ini" <<INI
[device disk]
type = file
path = $IMG
write_zeroes_unmap = 0
INI
run_bs 1 -c "$T/c.ini" fallocate -w -l 64M disk
expect_err "blkstack: disk: fallocate: Operation not supported" \
	"queue/write_zeroes_unmap=0"
[[ $(sha "$IMG") == "$sum" ]] || fail "refused -w changed data"
run_bs 1 -c "$T/c.ini" attr disk queue/write_zeroes_unmap 2
expect_err "Invalid argument"
run_bs 0 -c "$T/c.ini" attr disk queue/write_zeroes_unmap
[[ $OUT == 0 ]] || fail "knob should read 0: $OUT"
# the knob set back to 1 restores -w (same process: a spec option)
run_bs 0 fallocate -w -l 1M "file:$IMG,write_zeroes_unmap=1"
is_zero "$IMG" 0 $MiB || fail "-w after re-enabling did not zero"

note "zeroout: --no-unmap keeps blocks, plain zeroout zeroes"
fresh
before=$(allocated "$IMG")
run_bs 0 zeroout --no-unmap -o 8M -l 8M "$DEV"
is_zero "$IMG" $((8 * MiB)) $((8 * MiB)) || fail "zeroout --no-unmap"
((before - $(allocated "$IMG") < MiB)) || fail "--no-unmap freed blocks"
run_bs 0 zeroout -o 16M -l 16M "$DEV"
is_zero "$IMG" $((16 * MiB)) $((16 * MiB)) || fail "zeroout"

note "a file device that cannot zero: zeroes = none"
run_bs 1 zeroout --no-fallback -l 1M "file:$IMG,zeroes=none"
expect_err "Operation not supported"
run_bs 1 fallocate -w -l 1M "file:$IMG,zeroes=none"
expect_err "Operation not supported"
echo "ok"
