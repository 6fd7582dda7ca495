# The test runner's common part, sourced by scripts/run-tests.sh and
# scripts/run-tsan.sh: one line per test (PASS/FAIL/SKIP and its wall
# time, to see where make check's minutes go), a failing test's last 40
# lines, and the summary "N passed, N failed, N skipped".
#
# Tests run CHECK_JOBS at a time (default: one per CPU, at least 1, at
# most nproc; CHECK_JOBS=1 runs each where `run` is called, one after
# another). With more than one job, `run` only queues: the queue runs in
# `summary` (or `run_queued`). First every test queued with --alone, each
# with nothing beside it, in queue order; then the others, the longest
# first by the wall times of the last run (build/check-times, over the
# kept copy tests/check-times; a test in neither counts as long as its
# timeout), started as slots free up. A test's line is printed whole when it ends, by this
# shell only, so lines never interleave; the counts and the exit status
# do not depend on CHECK_JOBS.

logdir=$(mktemp -d "${TMPDIR:-/tmp}/blkstack-tests.XXXXXX")
passed=0 failed=0 skipped=0 n=0

# Free loopback ports handed out to the tests of this run, one directory
# each (mkdir is atomic): tests/integration/lib/cli-common.bash's free_port
# never gives two tests running side by side the same port.
export CHECK_PORTS_DIR=$logdir/ports
mkdir "$CHECK_PORTS_DIR"

check_jobs() {
	local cpus
	cpus=$(nproc 2>/dev/null) || cpus=1
	CHECK_JOBS=${CHECK_JOBS:-$cpus}
	if ! [[ $CHECK_JOBS =~ ^[0-9]+$ ]]; then
		echo "runner: CHECK_JOBS=$CHECK_JOBS is not a number" >&2
		exit 2
	fi
	((CHECK_JOBS <= cpus)) || CHECK_JOBS=$cpus
	((CHECK_JOBS >= 1)) || CHECK_JOBS=1
	# wait -n -p (bash 5.1) tells which test ended
	if ((BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] < 501)); then
		CHECK_JOBS=1
	fi
}
check_jobs

# Wall times: "NAME SECONDS" a line, read to order the queue, rewritten
# with this run's times by summary (empty CHECK_TIMES: neither).
CHECK_TIMES=${CHECK_TIMES-build/check-times}
declare -A took_last=() took_now=()
load_times() {
	local f name secs
	# the kept copy first: the last run's times win
	for f in tests/check-times "$CHECK_TIMES"; do
		[[ -n $f && -f $f ]] || continue
		while read -r name secs; do
			[[ $secs =~ ^[0-9]+$ ]] && took_last[$name]=$secs
		done <"$f"
	done
}
load_times

# The queue (CHECK_JOBS > 1), one entry per test; the tests running now:
# running[PID]=entry.
q_name=() q_secs=() q_cmd=() q_alone=() q_t0=()
declare -A running=()

# stop the running tests (their timeout processes, which we started) if
# the runner is interrupted
stop_running() {
	local pid
	for pid in "${!running[@]}"; do
		kill -TERM "$pid" 2>/dev/null
	done
}
trap 'rm -rf "$logdir"' EXIT
trap 'stop_running; exit 130' INT
trap 'stop_running; exit 143' TERM

# is_alone SCRIPT: true when the script's leading comment block has a
# line "# check: alone (reason)": a test that must run with nothing
# beside it (timing bounds, machine-wide resources)
is_alone() {
	awk 'NR == 1 && /^#!/ { next }
	     !/^#/ { exit 1 }
	     /^# check: alone/ { found = 1; exit 0 }
	     END { exit !found }' "$1"
}

# report ENTRY RC SECONDS: the test's line (and a failure's last lines),
# the counts
report() {
	local i=$1 rc=$2 took="($3 s)" name=${q_name[$1]} secs=${q_secs[$1]}
	local log="$logdir/$1.log" reason
	took_now[$name]=$3
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

# start ENTRY: run it in the background, bounded by its timeout
start() {
	local i=$1
	q_t0[i]=$SECONDS
	eval "set -- ${q_cmd[i]}"
	# a simple command in the background: $! is timeout itself
	timeout -k 10 "${q_secs[i]}" "$@" </dev/null >"$logdir/$i.log" 2>&1 &
	running[$!]=$i
}

# reap: wait for one running test to end and report it
reap() {
	local pid= rc i
	wait -n -p pid "${!running[@]}"
	rc=$?
	[[ -n $pid ]] || return 0
	i=${running[$pid]}
	unset "running[$pid]"
	report "$i" "$rc" $((SECONDS - q_t0[i]))
}

# run [--alone] NAME TIMEOUT CMD...: exit 0 pass, 77 skip, else fail
run() {
	local alone=0 i rc
	if [[ $1 == --alone ]]; then
		alone=1
		shift
	fi
	i=$n
	n=$((n + 1))
	q_name[i]=$1
	q_secs[i]=$2
	q_alone[i]=$alone
	shift 2
	q_cmd[i]=$(printf '%q ' "$@")
	if ((CHECK_JOBS == 1)); then
		q_t0[i]=$SECONDS
		timeout -k 10 "${q_secs[i]}" "$@" </dev/null >"$logdir/$i.log" 2>&1
		rc=$?
		report "$i" "$rc" $((SECONDS - q_t0[i]))
	fi
}

# run_queued: run what run queued (nothing with CHECK_JOBS=1)
run_queued() {
	local i
	local -a shared=()
	((CHECK_JOBS > 1)) || return 0
	for ((i = 0; i < n; i++)); do
		[[ -z ${q_t0[i]:-} ]] || continue
		if ((q_alone[i])); then
			start "$i"
			while ((${#running[@]} > 0)); do
				reap
			done
		else
			shared+=("$i")
		fi
	done
	# the longest first (unknown: as long as the timeout), stable
	# for equal times
	for i in $(for i in "${shared[@]}"; do
		echo "${took_last[${q_name[i]}]:-${q_secs[i]}} $i"
	done | sort -s -k1,1nr | cut -d' ' -f2); do
		while ((${#running[@]} >= CHECK_JOBS)); do
			reap
		done
		start "$i"
	done
	while ((${#running[@]} > 0)); do
		reap
	done
}

skip() {
	echo "SKIP $1: $2"
	skipped=$((skipped + 1))
}

# save_times: this run's wall times over the last ones in $CHECK_TIMES
save_times() {
	local name secs
	[[ -n ${CHECK_TIMES:-} && -d $(dirname "$CHECK_TIMES") ]] || return 0
	if [[ -f $CHECK_TIMES ]]; then
		while read -r name secs; do
			[[ -n ${took_now[$name]:-} || ! $secs =~ ^[0-9]+$ ]] ||
				took_now[$name]=$secs
		done <"$CHECK_TIMES"
	fi
	for name in "${!took_now[@]}"; do
		echo "$name ${took_now[$name]}"
	done | LC_ALL=C sort >"$CHECK_TIMES.new" &&
		mv "$CHECK_TIMES.new" "$CHECK_TIMES"
}

# summary: the last line; false if anything failed
# (also appended to $CHECK_COUNTS when set, for make check's total line)
summary() {
	run_queued
	save_times
	echo "$passed passed, $failed failed, $skipped skipped"
	[[ -z ${CHECK_COUNTS:-} ]] ||
		echo "$passed $failed $skipped" >>"$CHECK_COUNTS"
	((failed == 0))
}
