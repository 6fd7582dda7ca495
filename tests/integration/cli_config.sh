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
bad_config missing_comp 5 "[device a]" "type = mem" "size = 1M" "[device b]" \
	"devices = a nope" "type = mem"
[[ $ERR == *nope* ]] || fail "missing component: $ERR"
bad_config bad_value 3 "[device a]" "type = mem" "size = lots"
bad_config bad_section 1 "[disk a]" "type = mem"

run_bs 1 -c "$T/does-not-exist.ini" ls
expect_err "does-not-exist.ini" "No such file"
echo "ok"
