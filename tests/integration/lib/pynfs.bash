# The vendored pynfs (../shared/peers/pynfs beside the project root, or
# from a git worktree beside the main checkout, or $PYNFS_SRC), copied into
# $BUILD/peers/pynfs and built there once (never in ../shared, which is
# read-only in CI), with Debian's python3 and python3-ply.

# pynfs_ready: 0 with the built tree's path in $PY; 1 with the reason in
# $PYNFS_WHY when pynfs or python3-ply is missing. A failed build fails
# the test.
pynfs_ready() {
	local root d src=${PYNFS_SRC:-}
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
	for d in "$root/../shared" "$root/../../shared"; do
		[[ -z $src && -d $d/peers/pynfs ]] && src=$d/peers/pynfs
	done
	if [[ -z $src ]]; then
		PYNFS_WHY="pynfs not found in ../shared/peers (set PYNFS_SRC)"
		return 1
	fi
	if ! PATH=/usr/bin:/bin python3 -c 'import ply' 2>/dev/null; then
		PYNFS_WHY="python3-ply not installed (scripts/deps.sh)"
		return 1
	fi
	PY=$BUILD/peers/pynfs
	mkdir -p "$BUILD/peers"
	# one build for tests running side by side: the others wait for it
	peers_lock pynfs
	if [[ ! -f $PY/.built ]]; then
		rm -rf "$PY"
		cp -r "$src" "$PY"
		(cd "$PY" && PATH=/usr/bin:/bin timeout 300 python3 setup.py build \
			>build.log 2>&1) || fail "pynfs did not build: $PY/build.log"
		touch "$PY/.built"
	fi
	peers_unlock
}

# pynfs_py WHAT SCRIPT ARGS...: tests/integration/lib/SCRIPT ARGS on the
# built pynfs (pynfs_ready first), Debian's python3, bounded to 120 s; its
# "ok" lines shown; a failed exit or no PASS line fails the test as WHAT.
# The whole output is left in $PYOUT.
pynfs_py() {
	local what=$1 script=$2
	shift 2
	PYOUT=$(PYNFS=$(cd "$PY" && pwd) PATH=/usr/bin:/bin timeout 120 python3 \
		"$(dirname "${BASH_SOURCE[0]}")/$script" "$@" 2>&1) ||
		{ echo "$PYOUT" >&2; fail "$what ($script)"; }
	grep '^ok' <<<"$PYOUT" | sed 's/^/   /'
	grep -qx PASS <<<"$PYOUT" || { echo "$PYOUT" >&2; fail "$what: $script said no PASS"; }
}
