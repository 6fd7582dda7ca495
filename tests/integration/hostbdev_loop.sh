#!/usr/bin/env bash
# hostbdev on a loop device over a file made here: `info --json` and `attr`
# equal the host's /sys/class/block/loopN/queue, zeroout (NOUNMAP and may
# unmap) and fallocate -z give zeroes seen through the host, fallocate -w
# follows the host's unmap capability, explain names the host attribute.
# Needs root and losetup; skips (77) with the reason otherwise.
source "$(dirname "$0")/lib/cli-common.bash"

((EUID == 0)) || skip "not root (losetup needs it)"
command -v losetup >/dev/null || skip "no losetup"
command -v jq >/dev/null || skip "no jq"
make_tmp
truncate -s 64M "$T/backing.img"
L=$(losetup -f --show "$T/backing.img" 2>"$T/losetup.err") ||
	skip "losetup failed: $(cat "$T/losetup.err")"
[[ $L == /dev/loop* ]] || skip "losetup printed '$L'"
# detach only the device made here
trap 'losetup -d "$L"; rm -rf "$T"' EXIT
N=${L#/dev/}
Q=/sys/class/block/$N/queue
q() { cat "$Q/$1"; }
DEV=hostbdev:$L
MiB=$((1 << 20))

note "info --json limits equal $Q"
run_bs 0 info --json "$DEV"
unmap_host=0
[[ -e $Q/write_zeroes_unmap_max_bytes ]] &&
	(($(q write_zeroes_unmap_max_bytes) > 0)) && unmap_host=1
[[ ! -e $Q/write_zeroes_unmap_max_bytes && -e $Q/write_zeroes_unmap ]] &&
	(($(q write_zeroes_unmap) == 1)) && unmap_host=1
jq -e --arg dev "$L" \
	--argjson lbs "$(q logical_block_size)" \
	--argjson pbs "$(q physical_block_size)" \
	--argjson iomin "$(q minimum_io_size)" \
	--argjson ioopt "$(q optimal_io_size)" \
	--argjson hwkb "$(q max_hw_sectors_kb)" \
	--argjson kb "$(q max_sectors_kb)" \
	--argjson wz "$(q write_zeroes_max_bytes)" \
	--argjson dmax "$(q discard_max_bytes)" \
	--argjson dgran "$(q discard_granularity)" \
	--argjson rot "$(q rotational)" \
	--argjson fua "$(q fua)" \
	--arg wc "$(q write_cache)" \
	--argjson unmap "$unmap_host" '
	.size == 67108864 and .type == "hostbdev" and .hostbdev.path == $dev and
	.limits.logical_block_size == $lbs and
	.limits.physical_block_size == $pbs and
	.limits.io_min == $iomin and .limits.io_opt == $ioopt and
	.limits.max_hw_sectors / 2 == $hwkb and .limits.max_sectors / 2 == $kb and
	.limits.max_write_zeroes_bytes == $wz and
	.limits.max_discard_sectors * 512 == $dmax and
	(if $dmax > 0 then .limits.discard_granularity == $dgran else true end) and
	.features.rotational == ($rot == 1) and .features.fua == ($fua == 1) and
	.features.write_cache == ($wc == "write back") and
	.write_zeroes_unmap == ($unmap == 1) and
	(.write_zeroes_unmap_reason | test("host queue/write_zeroes_unmap"))' \
	<<<"$OUT" >/dev/null || fail "info --json vs $Q: $OUT"

note "attr values equal the host's"
run_bs 0 attr "$DEV"
for a in logical_block_size physical_block_size minimum_io_size \
	optimal_io_size max_hw_sectors_kb max_sectors_kb write_zeroes_max_bytes \
	discard_max_bytes rotational fua write_cache; do
	want=$(q $a)
	got=$(awk -v n="queue/$a" '$1 == n { $1 = ""; $2 = ""; sub(/^ +/, ""); print }' <<<"$OUT")
	[[ $got == "$want" ]] || fail "queue/$a: blkstack '$got', host '$want'"
done

note "write a pattern through the host, zero parts of it through blkstack"
head -c $((16 * MiB)) /dev/urandom >"$T/pat"
dd if="$T/pat" of="$L" bs=1M oflag=direct status=none
sync "$T/backing.img"
# dev_is_zero OFFSET_MIB LEN_MIB: through the loop device and the file
dev_is_zero() {
	cmp -s <(dd if="$L" bs=1M iflag=direct skip="$1" count="$2" status=none) \
		<(head -c $(($2 * MiB)) /dev/zero) &&
		is_zero "$T/backing.img" $(($1 * MiB)) $(($2 * MiB))
}
dev_is_pat() {
	cmp -s <(dd if="$L" bs=1M iflag=direct skip="$1" count="$2" status=none) \
		<(tail -c +$(($1 * MiB + 1)) "$T/pat" | head -c $(($2 * MiB)))
}
before=$(allocated "$T/backing.img")
run_bs 0 zeroout --no-unmap --no-fallback -o 0 -l 4M "$DEV"
dev_is_zero 0 4 || fail "zeroout --no-unmap: not zeroes"
mid=$(allocated "$T/backing.img")
((mid >= before - MiB)) || fail "zeroout --no-unmap freed blocks: $before -> $mid"

run_bs 0 zeroout --no-fallback -o 4M -l 4M "$DEV"
dev_is_zero 4 4 || fail "zeroout (may unmap): not zeroes"
after=$(allocated "$T/backing.img")
if ((unmap_host)); then
	((after <= mid - 3 * MiB)) || fail "unmap zeroing kept blocks: $mid -> $after"
else
	note "host offers no unmap zeroing on $N: blocks stay ($mid -> $after)"
fi

run_bs 0 fallocate -z -o 8M -l 1M "$DEV"
dev_is_zero 8 1 || fail "fallocate -z: not zeroes"

if ((unmap_host)); then
	run_bs 0 fallocate -w -o 9M -l 1M "$DEV"
	dev_is_zero 9 1 || fail "fallocate -w: not zeroes"
else
	run_bs 1 fallocate -w -o 9M -l 1M "$DEV"
	expect_err "Operation not supported"
	dev_is_pat 9 1 || fail "refused fallocate -w changed data"
fi
dev_is_pat 10 6 || fail "bytes outside the zeroed ranges changed"

note "explain names the host attribute; discard through the host"
run_bs 0 explain "$DEV"
[[ $OUT == *"$N (hostbdev, 64 MiB): write_zeroes_unmap "*"host queue/write_zeroes_unmap"* ]] ||
	fail "explain: $OUT"
run_bs 0 explain "$DEV" discard
if (($(q discard_max_bytes) > 0)); then
	[[ $OUT == *"discard yes"* ]] || fail "explain discard: $OUT"
fi
run_bs 0 info "$DEV"
[[ $OUT == *"write_zeroes_unmap_from"*"host "* && $OUT == *"BLKZEROOUT"* ]] ||
	fail "info lacks the hostbdev facts: $OUT"

note "a regular file is refused, naming device and path"
run_bs 1 info "hostbdev:$T/pat"
expect_err "not a block device" "$T/pat"
echo ok
