# Shared by tests/integration/cli_*.sh (sourced, not run).
set -euo pipefail

BUILD=${BUILD:-build}
BS="$BUILD/blkstack"
SEEKDATA="$BUILD/tools/seekdata"
[[ -x $SEEKDATA ]] || SEEKDATA=build/tools/seekdata

[[ -x $BS ]] || { echo "FAIL: $BS not built"; exit 1; }

# A sanitizer report must never pass for the expected "exit 1".
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}exitcode=86"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}exitcode=86:print_stacktrace=1"

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
note() { echo "-- $*"; }

# A temp dir on a disk filesystem (ext4 and the like), never tmpfs: tmpfs
# lacks ZERO_RANGE, and du/SEEK_DATA checks need real blocks.
make_tmp() {
	local d
	for d in "${TMPDIR:-}" /var/tmp /tmp "$PWD/build"; do
		[[ -n $d && -d $d && -w $d ]] || continue
		case $(stat -f -c %T "$d") in
		tmpfs|ramfs|overlayfs) continue ;;
		esac
		T=$(mktemp -d "$d/blkstack-cli.XXXXXX")
		trap 'rm -rf "$T"' EXIT
		return 0
	done
	skip "no disk filesystem for temp files"
}

# A free TCP port on 127.0.0.1 (the kernel picks; tiny race accepted).
# Once $T exists, ports already handed out in it are not handed out again
# (the kernel may pick a port twice: nothing holds it between the calls);
# under the test runner (scripts/lib/runner.bash) neither are ports handed
# to another test of the run, which may be running beside this one: each
# is claimed with an atomic mkdir in $CHECK_PORTS_DIR.
free_port() {
	local p i
	for ((i = 0; i < 20; i++)); do
		p=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
		if [[ -n ${CHECK_PORTS_DIR:-} && -d $CHECK_PORTS_DIR ]]; then
			mkdir "$CHECK_PORTS_DIR/$p" 2>/dev/null || continue
		fi
		[[ -n ${T:-} && -d $T ]] || { echo "$p"; return; }
		grep -qx "$p" "$T/.ports" 2>/dev/null && continue
		echo "$p" >>"$T/.ports"
		echo "$p"
		return
	done
	fail "free_port: no new port in 20 tries"
}

# peers_lock NAME: hold $BUILD/peers/NAME.lock (wait up to 10 min) while
# a peer built once into $BUILD/peers is checked and built: tests running
# side by side (scripts/lib/runner.bash) build it once. peers_unlock lets
# it go; the test's exit does too.
peers_lock() {
	mkdir -p "$BUILD/peers"
	exec {PEERS_LOCK_FD}>"$BUILD/peers/$1.lock"
	flock -w 600 "$PEERS_LOCK_FD" || fail "$BUILD/peers/$1.lock held for 10 min"
}
peers_unlock() { exec {PEERS_LOCK_FD}>&-; }

# run_bs EXPECTED_RC ARGS...: run blkstack; output in $OUT, errors in $ERR.
run_bs() {
	local want=$1 rc=0
	shift
	"$BS" "$@" >"$T/out" 2>"$T/err" || rc=$?
	OUT=$(cat "$T/out")
	ERR=$(cat "$T/err")
	if [[ $ERR == *Sanitizer* || $ERR == *"runtime error:"* ]]; then
		echo "$ERR" >&2
		fail "blkstack $*: sanitizer report"
	fi
	if ((rc != want)); then
		echo "stdout: $OUT" >&2
		echo "stderr: $ERR" >&2
		fail "blkstack $* exited $rc, expected $want"
	fi
}

# The error must be exactly one line and contain every given string.
expect_err() {
	local s
	[[ $(printf '%s\n' "$ERR" | wc -l) -eq 1 ]] ||
		fail "expected one error line, got: $ERR"
	for s in "$@"; do
		[[ $ERR == *"$s"* ]] || fail "error line lacks '$s': $ERR"
	done
}

# (the help text is read whole: grep -q quitting early would SIGPIPE it)
has_type() { local h; h=$("$BS" --help) && grep -Eq "^  $1( |$)" <<<"$h"; }

# is_zero FILE OFFSET LENGTH
is_zero() {
	cmp -s <(tail -c +"$(($2 + 1))" "$1" | head -c "$3") <(head -c "$3" /dev/zero)
}

allocated() { du --block-size=1 "$1" | cut -f1; }
data_bytes() { "$SEEKDATA" "$@" | awk '$1 == "data" { print $2 }'; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
