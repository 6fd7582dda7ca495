#!/usr/bin/env bash
# blkstack CLI on mem devices: exit codes, one-line errors, JSON, help.
source "$(dirname "$0")/lib/cli-common.bash"
make_tmp

note "info --json parses and carries the capability"
run_bs 0 info --json mem:64M
jq -e '.write_zeroes_unmap == true and .size == 67108864 and
       .limits.logical_block_size == 512 and .type == "mem"' \
	<<<"$OUT" >/dev/null || fail "info --json: $OUT"
run_bs 0 info --json mem:64M,write_zeroes_unmap=0
jq -e '.write_zeroes_unmap == false and .write_zeroes_unmap_knob == 0 and
       .features.write_zeroes_unmap_feature == true' <<<"$OUT" >/dev/null ||
	fail "info --json with knob 0: $OUT"
run_bs 0 info mem:64M
[[ $OUT == *"write_zeroes_unmap "*yes* ]] || fail "info table: $OUT"

note "attr: list, read, refuse bad stores with one line"
run_bs 0 attr mem:64M
grep -Eq '^queue/write_zeroes_unmap +RW +1$' <<<"$OUT" || fail "attr list: $OUT"
grep -Eq '^size +RO +131072$' <<<"$OUT" || fail "attr list size: $OUT"
run_bs 0 attr mem:64M queue/write_zeroes_unmap
[[ $OUT == 1 ]] || fail "attr read: $OUT"
run_bs 0 attr mem:64M queue/write_zeroes_unmap 0
run_bs 0 attr mem:64M queue/write_zeroes_unmap " 1"
run_bs 1 attr mem:64M queue/write_zeroes_unmap 2
expect_err "blkstack: mem: queue/write_zeroes_unmap: Invalid argument"
run_bs 1 attr mem:64M size 1
expect_err "Permission denied" "read-only"
run_bs 1 attr mem:64M no/such
expect_err "No such file or directory" "no/such"

note "explain names the reason"
run_bs 0 explain mem:64M,zeroes=write
[[ $OUT == *"write_zeroes_unmap no"*"zeroes = write"* ]] || fail "explain: $OUT"

note "zeroout --no-fallback without write-zeroes: EOPNOTSUPP"
run_bs 1 zeroout --no-fallback -l 1M mem:64M,zeroes=none
expect_err "blkstack: mem: zeroout: Operation not supported" "no write-zeroes"
run_bs 0 zeroout -l 1M mem:64M,zeroes=none

note "fallocate -w refused by the knob names it; -w -k refused"
run_bs 1 fallocate -w -l 1M mem:64M,write_zeroes_unmap=0
expect_err "Operation not supported" "queue/write_zeroes_unmap=0"
run_bs 1 fallocate -w -l 1M mem:64M,zeroes=write
expect_err "Operation not supported" "cannot zero by unmapping: mem: zeroes = write"
run_bs 1 fallocate -w -k -l 1M mem:64M
expect_err "Operation not supported" "keep-size"
run_bs 0 fallocate -w -l 1M mem:64M
run_bs 1 fallocate -z -o 100 -l 1M mem:64M
expect_err "Invalid argument" "aligned"
run_bs 1 fallocate -z -o 64M -l 1M mem:64M
expect_err "Invalid argument"
run_bs 0 fallocate -z -k -o 63M -l 2M mem:64M

note "progress bar on a terminal only, when zero buffers are written"
# big enough to last over a second (the bar waits 300 ms before drawing)
slow=mem:64G,zeroes=none
[[ $BUILD == *asan* ]] && slow=mem:8G,zeroes=none
run_bs 0 zeroout "$slow"
[[ -z $ERR ]] || fail "no tty, yet stderr got: $ERR"
if command -v script >/dev/null; then
	script -qec "$BS zeroout $slow" "$T/typescript" \
		</dev/null >/dev/null || fail "zeroout under script failed"
	grep -q 'writing zeroes \[#*\.*\] *[0-9.]*%' "$T/typescript" ||
		fail "no progress bar on a terminal: $(tr '\r' '\n' <"$T/typescript" | tail -3)"
	grep -q $'\r\e\[K' "$T/typescript" || fail "progress bar not cleared"
fi

note "usage errors exit 2"
run_bs 2 fallocate -z -p -l 1M mem:64M
run_bs 2 fallocate -l 1Q mem:64M
run_bs 2 fallocate --bogus mem:64M
run_bs 2 info
run_bs 2 no-such-command
run_bs 2
run_bs 1 info no-such-device
expect_err "no-such-device" "No such file or directory"
run_bs 1 -s "$T/nosock" info x
expect_err "$T/nosock" "cannot reach blkstackd"

note "help: the overview and a manual per command"
run_bs 0 --help
for w in "DEVICE SPECS" "DEVICE TYPES" "  mem - " "file:PATH" "EXIT STATUS"; do
	[[ $OUT == *"$w"* ]] || fail "--help lacks '$w'"
done
for c in attr explain fallocate help info ls zeroout; do
	run_bs 0 help "$c"
	for w in NAME SYNOPSIS DESCRIPTION "EXIT STATUS" EXAMPLES; do
		[[ $OUT == *"$w"* ]] || fail "help $c lacks $w"
	done
	run_bs 0 "$c" --help
done
run_bs 0 -V

note "a spec's bare argument is the size for mem, zero and error"
for t in mem zero error; do
	run_bs 0 info --json "$t:3M"
	[[ $(jq -r .size <<<"$OUT") == 3145728 ]] || fail "$t:3M: size $(jq -r .size <<<"$OUT")"
done
echo "ok"
