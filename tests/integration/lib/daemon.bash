# Shared by the tests that run blkstackd (sourced after cli-common.bash).
# Starts the real daemon in the foreground on a loopback port / UNIX
# socket of its own, and stops only the PID it started.

BSD="$BUILD/blkstackd"
[[ -x $BSD ]] || fail "$BSD not built"
DPID=

# start_daemon CONF: run blkstackd -f -c CONF, wait until its control
# socket answers ($CTL, from [daemon] control in CONF). Log in $T/d.log.
start_daemon() {
	local conf=$1 i before
	# the log may hold an earlier daemon's lines: wait for a new 'ready:'
	before=$(grep -c 'ready:' "$T/d.log" 2>/dev/null || true)
	"$BSD" -f -c "$conf" >>"$T/d.log" 2>&1 &
	DPID=$!
	for ((i = 0; i < 200; i++)); do
		if ! kill -0 "$DPID" 2>/dev/null; then
			cat "$T/d.log" >&2
			DPID=
			fail "blkstackd exited while starting"
		fi
		(($(grep -c 'ready:' "$T/d.log" || true) > ${before:-0})) && return 0
		sleep 0.05
	done
	fail "blkstackd not ready after 10 s"
}

# start_other_daemon CONF LOG: one more blkstackd (a target for the
# daemon under test), ready within 10 s; its PID in $XPID, which
# daemon_cleanup kills if the test dies early. stop_other_daemon stops it.
start_other_daemon() {
	local i
	"$BSD" -f -c "$1" >>"$2" 2>&1 &
	XPID=$!
	for ((i = 0; i < 200; i++)); do
		if ! kill -0 "$XPID" 2>/dev/null; then
			XPID=
			cat "$2" >&2
			fail "blkstackd ($1) exited while starting"
		fi
		grep -q 'ready:' "$2" && return 0
		sleep 0.05
	done
	fail "blkstackd ($1) not ready after 10 s"
}

# stop_other_daemon LOG: SIGTERM to $XPID, a clean exit within 10 s, no
# sanitizer report in LOG.
stop_other_daemon() {
	local i rc=0
	kill -TERM "$XPID" 2>/dev/null || true
	for ((i = 0; i < 200; i++)); do
		kill -0 "$XPID" 2>/dev/null || break
		sleep 0.05
	done
	wait "$XPID" || rc=$?
	XPID=
	if grep -q -e 'Sanitizer' -e 'runtime error:' "$1"; then
		cat "$1" >&2
		fail "sanitizer report from blkstackd ($1)"
	fi
	((rc == 0)) || { tail -20 "$1" >&2; fail "blkstackd ($1) exited $rc"; }
}

# stop_daemon: SIGTERM, wait (bounded), expect a clean exit 0.
stop_daemon() {
	local i rc=0
	[[ -n $DPID ]] || return 0
	kill -TERM "$DPID" 2>/dev/null || true
	for ((i = 0; i < 400; i++)); do
		kill -0 "$DPID" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$DPID" 2>/dev/null; then
		kill -KILL "$DPID"
		DPID=
		fail "blkstackd did not stop within 20 s of SIGTERM"
	fi
	wait "$DPID" || rc=$?
	DPID=
	check_daemon_log
	((rc == 0)) || { tail -20 "$T/d.log" >&2; fail "blkstackd exited $rc"; }
}

check_daemon_log() {
	if grep -q -e 'Sanitizer' -e 'runtime error:' "$T/d.log"; then
		cat "$T/d.log" >&2
		fail "sanitizer report from blkstackd"
	fi
}

# Kill what we started if the test dies early.
daemon_cleanup() {
	if [[ -n ${XPID:-} ]]; then
		kill -KILL "$XPID" 2>/dev/null || true
		wait "$XPID" 2>/dev/null || true
	fi
	if [[ -n $DPID ]]; then
		kill -KILL "$DPID" 2>/dev/null || true
		wait "$DPID" 2>/dev/null || true
	fi
	rm -rf "$T"
}

# ctl ARGS...: blkstack -s $CTL ARGS; output in $OUT/$ERR (see run_bs).
ctl() {
	local want=$1
	shift
	run_bs "$want" -s "$CTL" "$@"
}

# wait_live DEV [SECONDS]: wait (default 20 s) until `info DEV` says the
# device is live; the daemon is ready before a slow open (a remote
# device) has finished
wait_live() {
	local i n=$((${2:-20} * 10))
	for ((i = 0; i < n; i++)); do
		ctl 0 info "$1"
		[[ $OUT == *"state"*"live"* ]] && return 0
		sleep 0.1
	done
	fail "$1 not live after ${2:-20} s: $OUT"
}

# paths_live DEV N [SECONDS]: wait (5 s) until `info DEV` of a
# multipath device says N paths live.
paths_live() {
	local i n=$((${3:-5} * 10))
	for ((i = 0; i < n; i++)); do
		ctl 0 info "$1"
		[[ $OUT == *"($2 live)"* ]] && return 0
		sleep 0.1
	done
	fail "$1: not $2 live paths: $OUT"
}

# nbd_flag URI KEY: the value nbdinfo --json gives for KEY.
nbd_flag() {
	timeout 20 nbdinfo --json "$1" | jq -r ".exports[0][\"$2\"]"
}

need() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null || skip "$c not installed"
	done
}

# fio_verify NAME URI FIO-ARGS...: random writes of 4K..256K through
# fio's nbd engine verified with crc32c (fatal at the first mismatch),
# bounded in time; FIO-ARGS give size, offsets, jobs and depth. Fails on
# any error; the report is $T/NAME.json.
fio_verify() {
	local name=$1 uri=$2
	shift 2
	timeout 300 fio --name="$name" --ioengine=nbd --uri="$uri" \
		--rw=randwrite --bsrange=4k-256k --verify=crc32c --verify_fatal=1 \
		--do_verify=1 --verify_state_save=0 --output-format=json \
		--output="$T/$name.json" "$@" ||
		{ tail -30 "$T/$name.json"; fail "fio $name failed"; }
	(($(jq '[.jobs[].error] | add' "$T/$name.json") == 0)) ||
		fail "fio $name: errors"
}

# need_export_type TYPE: skip unless this blkstackd has the export type
# (its --help lists the registered ones, "  TYPE - summary").
need_export_type() {
	local h
	h=$("$BSD" --help 2>/dev/null) || true
	grep -q "^  $1 - " <<<"$h" || skip "no $1 export type in this build"
}

# daemon_setup: a temp dir ($T, removed on exit with the daemon killed),
# a free port ($PORT), the control socket ($CTL), and $T/d.ini begun with
# its [daemon] section; the test appends devices and exports to it.
daemon_setup() {
	make_tmp
	trap daemon_cleanup EXIT
	PORT=$(free_port)
	CTL=$T/ctl.sock
	printf '[daemon]\nstate_dir = %s\ncontrol = %s\n\n' "$T/state" "$CTL" \
		>"$T/d.ini"
}

# daemon_threads N: after daemon_setup, ask for N I/O threads in $T/d.ini
# when this blkstackd knows the [daemon] key `threads` (its --help names
# it); a daemon without it runs one loop thread and the line is left out.
# Sets $THREADS to what was asked (0: the key is not there).
daemon_threads() {
	local h
	THREADS=0
	h=$("$BSD" --help 2>&1) || true
	if grep -Eq '(^|[^_a-z])threads( |$|=)' <<<"$h"; then
		printf 'threads = %s\n' "$1" >>"$T/d.ini"
		THREADS=$1
	fi
}
