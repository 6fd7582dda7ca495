# The test runner's common part, sourced by scripts/run-tests.sh and
# scripts/run-tsan.sh: one line per test (PASS/FAIL/SKIP and its wall
# time, to see where make check's minutes go), a failing test's last 40
# lines, and the summary "N passed, N failed, N skipped".

logdir=$(mktemp -d "${TMPDIR:-/tmp}/blkstack-tests.XXXXXX")
trap 'rm -rf "$logdir"' EXIT
passed=0 failed=0 skipped=0 n=0

# run NAME TIMEOUT CMD...: exit 0 pass, 77 skip, else fail
run() {
	local name=$1 secs=$2 log rc reason t0=$SECONDS took
	shift 2
	n=$((n + 1))
	log="$logdir/$n.log"
	timeout -k 10 "$secs" "$@" </dev/null >"$log" 2>&1
	rc=$?
	took="($((SECONDS - t0)) s)"
	if ((rc == 0)); then
		echo "PASS $name $took"
		passed=$((passed + 1))
	elif ((rc == 77)); then
		reason=$(grep -m1 '^SKIP' "$log" | sed 's/^SKIP:\{0,1\} *//')
		echo "SKIP $name: ${reason:-no reason given} $took"
		skipped=$((skipped + 1))
	else
		if ((rc == 124 || rc == 137)); then
			echo "FAIL $name (timed out after ${secs}s)"
		else
			echo "FAIL $name (exit $rc) $took"
		fi
		tail -n 40 "$log" | sed 's/^/    | /'
		failed=$((failed + 1))
	fi
}

skip() {
	echo "SKIP $1: $2"
	skipped=$((skipped + 1))
}

# summary: the last line; false if anything failed
# (also appended to $CHECK_COUNTS when set, for make check's total line)
summary() {
	echo "$passed passed, $failed failed, $skipped skipped"
	[[ -z ${CHECK_COUNTS:-} ]] ||
		echo "$passed $failed $skipped" >>"$CHECK_COUNTS"
	((failed == 0))
}
