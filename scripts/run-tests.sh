#!/usr/bin/env bash
# Run every test: unit tests of build/ and build/asan/, the integration
# scripts against the ASan build, and the fuzz smoke runs. One line per
# test (PASS/FAIL/SKIP), then "N passed, N failed, N skipped".
# Exit 1 if anything failed. Tests run CHECK_JOBS at a time
# (scripts/lib/runner.bash); an integration script whose header says
# "# check: alone (reason)" runs with nothing beside it. CHECK_ONLY=unit,
# integration or fuzz (or a comma-separated list) runs only those parts.
set -uo pipefail
cd "$(dirname "$0")/.."

UNIT_TIMEOUT=${UNIT_TIMEOUT:-600}
INTEG_TIMEOUT=${INTEG_TIMEOUT:-300}
FUZZ_TIMEOUT=${FUZZ_TIMEOUT:-600}
ASAN_BUILD=${ASAN_BUILD:-build/asan}

source scripts/lib/runner.bash

shopt -s nullglob

# part NAME: true when CHECK_ONLY is unset or names NAME
part() { [[ -z ${CHECK_ONLY:-} || ,$CHECK_ONLY, == *,$1,* ]]; }

if part unit; then
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
fi

if part integration; then
	for s in tests/integration/*.sh; do
		name="integration/$(basename "$s" .sh)"
		if [[ ! -x $ASAN_BUILD/blkstack ]]; then
			skip "$name" "$ASAN_BUILD/blkstack not built (make asan)"
			continue
		fi
		alone=()
		is_alone "$s" && alone=(--alone)
		run "${alone[@]}" "$name" "$INTEG_TIMEOUT" \
			env BUILD="$ASAN_BUILD" bash "$s"
	done
fi

if part fuzz && [[ -f tests/fuzz/run.sh ]]; then
	run "fuzz/smoke" "$FUZZ_TIMEOUT" bash tests/fuzz/run.sh
fi

summary
