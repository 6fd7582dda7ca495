#!/usr/bin/env bash
# blkstack -c FILE: devices from the INI config, and one-line errors
# naming FILE:LINE for bad ones.
source "$(dirname "$0")/lib/cli-common.bash"
make_tmp

cat >"$T/good.ini" <<'INI'
[device fast]
type = mem
size = 64M

[device slow]
type = mem
size = 64M
write_zeroes_unmap = 0
INI
run_bs 0 -c "$T/good.ini" ls
grep -Eq '^fast +mem +64 MiB +yes' <<<"$OUT" || fail "ls: $OUT"
grep -Eq '^slow +mem +64 MiB +no' <<<"$OUT" || fail "ls: $OUT"
run_bs 0 -c "$T/good.ini" fallocate -w -l 1M fast
run_bs 1 -c "$T/good.ini" fallocate -w -l 1M slow
expect_err "blkstack: slow: fallocate: Operation not supported" \
	"queue/write_zeroes_unmap=0"
run_bs 0 -c "$T/good.ini" attr slow queue/write_zeroes_unmap
[[ $OUT == 0 ]] || fail "knob from config: $OUT"

# bad_config NAME LINE TEXT...: blkstack must print one FILE:LINE line, exit 1
bad_config() {
	local name=$1 line=$2 f="$T/$1.ini"
	shift 2
	printf '%s\n' "$@" >"$f"
	run_bs 1 -c "$f" ls
	expect_err "blkstack: $f:$line: "
	[[ -z $OUT ]] || fail "$name: printed output: $OUT"
}
bad_config unknown_key 4 "[device a]" "type = mem" "size = 1M" "colour = blue"
[[ $ERR == *"unknown key 'colour'"* ]] || fail "unknown key: $ERR"
bad_config syntax 3 "[device a]" "type = mem" "this is not ini"
if has_type linear; then
	bad_config missing_comp 5 "[device a]" "type = mem" "size = 1M" \
		"[device b]" "devices = a nope" "type = linear"
	[[ $ERR == *nope* ]] || fail "missing component: $ERR"
fi
bad_config bad_value 3 "[device a]" "type = mem" "size = lots"
bad_config bad_section 1 "[disk a]" "type = mem"

note "a misspelled key is named before the missing required one"
bad_config misspelled 3 "[device a]" "type = mem" "sise = 1G"
[[ $ERR == *"unknown key 'sise'"* ]] || fail "misspelled key: $ERR"

note "long lines are read whole; errors after them name the right line"
long=$T/$(printf 'd%.0s' {1..150})
mkdir "$long"
long=$long/$(printf 'f%.0s' {1..150}).img
bad_config long_line 5 "[device a]" "type = file" "path = $long" \
	"size = 1M" "this is not ini"
[[ ! -e $long ]] || fail "long_line: $long created"
printf '%s\n' "[device a]" "type = file   # a file" "path = $long ; 300 chars" \
	"size = 1M" "description = x" >"$T/long.ini"
run_bs 1 -c "$T/long.ini" ls
expect_err "long.ini:5: a: unknown key 'description'"
[[ ! -e $long ]] || fail "unknown key: $long created"
printf '%s\n' "[device a]" "type = file   # a file" "path = $long ; 300 chars" \
	"size = 1M" >"$T/long.ini"
run_bs 0 -c "$T/long.ini" ls
[[ $(stat -c %s "$long") == 1048576 ]] || fail "long path: not created at 1M"

note "sizes are decimal; too large is one message everywhere"
run_bs 0 info mem:010K
[[ $OUT == *"10240 (10 KiB)"* ]] || fail "010K: $OUT"
run_bs 1 info mem:0x10M
expect_err "'0x10M': not a size"
run_bs 1 info mem:16E
expect_err "'16E': too large (the largest size is 16E - 1 bytes)"
run_bs 2 zeroout -l 16E mem:1M
[[ $ERR == *"'16E': too large (the largest size is 16E - 1 bytes)"* ]] ||
	fail "-l 16E: $ERR"

run_bs 1 -c "$T/does-not-exist.ini" ls
expect_err "does-not-exist.ini" "No such file"
echo "ok"
