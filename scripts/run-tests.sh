#!/usr/bin/env bash
# Run every test: unit tests of build/ and build/asan/, the integration
# scripts against the ASan build, and the fuzz smoke runs. One line per
# test (PASS/FAIL/SKIP), then "N passed, N failed, N skipped".
# Exit 1 if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."

UNIT_TIMEOUT=${UNIT_TIMEOUT:-600}
INTEG_TIMEOUT=${INTEG_TIMEOUT:-300}
FUZZ_TIMEOUT=${FUZZ_TIMEOUT:-600}
ASAN_BUILD=${ASAN_BUILD:-build/asan}

logdir=$(mktemp -d "${TMPDIR:-/tmp}/blkstack-tests.XXXXXX")
trap 'rm -rf "$logdir"' EXIT
passed=0 failed=0 skipped=0 n=0

# run NAME TIMEOUT CMD...: exit 0 pass, 77 skip, else fail
run() {
	local name=$1 secs=$2 log rc reason
	shift 2
	n=$((n + 1))
	log="$logdir/$n.log"
	timeout -k 10 "$secs" "$@" </dev/null >"$log" 2>&1
	rc=$?
	if ((rc == 0)); then
		echo "PASS $name"
		passed=$((passed + 1))
	elif ((rc == 77)); then
		reason=$(grep -m1 '^SKIP' "$log" | sed 's/^SKIP:\{0,1\} *//')
		echo "SKIP $name: ${reason:-no reason given}"
		skipped=$((skipped + 1))
	else
		if ((rc == 124 || rc == 137)); then
			echo "FAIL $name (timed out after ${secs}s)"
		else
			echo "FAIL $name (exit $rc)"
		fi
		tail -n 40 "$log" | sed 's/^/    | /'
		failed=$((failed + 1))
	fi
}

skip() {
	echo "SKIP $1: $2"
	skipped=$((skipped + 1))
}

shopt -s nullglob

for t in build/tests/test_*; do
	[[ -x $t ]] && run "unit/${t##*/}" "$UNIT_TIMEOUT" "$t"
done
if [[ -d $ASAN_BUILD/tests ]]; then
	for t in "$ASAN_BUILD"/tests/test_*; do
		[[ -x $t ]] && run "asan/unit/${t##*/}" "$UNIT_TIMEOUT" "$t"
	done
else
	skip "asan/unit" "$ASAN_BUILD not built (make asan)"
fi

for s in tests/integration/*.sh; do
	name="integration/$(basename "$s" .sh)"
	if [[ ! -x $ASAN_BUILD/blkstack ]]; then
		skip "$name" "$ASAN_BUILD/blkstack not built (make asan)"
		continue
	fi
	run "$name" "$INTEG_TIMEOUT" env BUILD="$ASAN_BUILD" bash "$s"
done

if [[ -f tests/fuzz/run.sh ]]; then
	run "fuzz/smoke" "$FUZZ_TIMEOUT" bash tests/fuzz/run.sh
fi

echo "$passed passed, $failed failed, $skipped skipped"
((failed == 0))
