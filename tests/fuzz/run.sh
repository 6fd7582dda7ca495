#!/usr/bin/env bash
# Fuzz smoke run (scripts/run-tests.sh runs it as "fuzz/smoke"): every
# fuzzer built by `make fuzz` (tests/fuzz/fuzz.mk) runs for its share of
# FUZZ_SECONDS (default 60 s in total), starting from a temporary copy of
# its seed corpus tests/fuzz/corpus/NAME/ (fuzz_NAME), so the tree is never
# written. A fuzzer whose source reads BLKSTACK_FUZZ_WRITE_SEEDS makes its
# own seeds instead (fuzz_fs_image: ext4 images made by bs_fs_mkfs, which
# are better generated than kept as blobs): run with that variable set to
# a directory, it writes them there and exits. Exit 0 when no fuzzer
# found a crash, leak or timeout; 1 if one did (the reproducer is kept in
# $FUZZ_BUILD/artifacts/); 77 when no fuzzer is built.
set -uo pipefail
cd "$(dirname "$0")/../.."

FUZZ_BUILD=${FUZZ_BUILD:-${BUILD:-build}/fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}

shopt -s nullglob
fuzzers=()
for f in "$FUZZ_BUILD"/fuzz_*; do
	[[ -x $f && -f $f ]] && fuzzers+=("$f")
done
if ((${#fuzzers[@]} == 0)); then
	echo "SKIP: no fuzzers in $FUZZ_BUILD (run make fuzz)"
	exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/blkstack-fuzz.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
artifacts="$FUZZ_BUILD/artifacts"
share=$((FUZZ_SECONDS / ${#fuzzers[@]}))
((share < 5)) && share=5
failed=0

for f in "${fuzzers[@]}"; do
	name=${f##*/}
	corpus="$tmp/$name"
	mkdir -p "$corpus" "$tmp/$name.art"
	seeds="tests/fuzz/corpus/${name#fuzz_}"
	[[ -d $seeds ]] && cp -r "$seeds"/. "$corpus"/
	if grep -q BLKSTACK_FUZZ_WRITE_SEEDS "tests/fuzz/$name.c" 2>/dev/null &&
		! BLKSTACK_FUZZ_WRITE_SEEDS="$corpus" timeout 120 "$f" \
			>"$tmp/$name.seeds.log" 2>&1; then
		failed=1
		echo "FAIL $name: writing its seeds:"
		tail -20 "$tmp/$name.seeds.log"
		continue
	fi
	echo "== $name: ${share}s from $(ls "$corpus" | wc -l) seeds"
	# libFuzzer exits 77 on a crash by default, which would read as SKIP
	"$f" -max_total_time="$share" -timeout=20 -rss_limit_mb=2560 \
		-error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 \
		-artifact_prefix="$tmp/$name.art/" "$corpus" \
		>"$tmp/$name.log" 2>&1
	rc=$?
	grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+.*DONE)' \
		"$tmp/$name.log" | sed 's/^/   /'
	if ((rc != 0)); then
		failed=1
		mkdir -p "$artifacts"
		cp "$tmp/$name.art"/* "$artifacts"/ 2>/dev/null
		echo "FAIL $name (exit $rc); reproducers in $artifacts:"
		ls "$tmp/$name.art" | sed 's/^/   /'
		grep -E -A25 '^==[0-9]+==ERROR|runtime error|^SUMMARY' \
			"$tmp/$name.log" | head -60
	else
		echo "ok   $name"
	fi
done
exit "$failed"
