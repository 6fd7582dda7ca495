#!/usr/bin/env bash
# pynfs's NFSv4.1 suite (`all`, minor version 2) against the nfs export of
# a host directory (issue 15): blkstackd on a free loopback port with a
# short lease, pynfs built from ../shared/peers/pynfs into
# $BUILD/peers/pynfs with Debian's python3 (python3-ply), --maketree,
# results from --json. Fails when fewer than PASS_FLOOR tests pass (the
# count when this was written, so a regression shows), or when the daemon
# died (168 of the 197 tests it runs passed when written; nfs-ganesha
# passes 176). Every failure is printed; the reasons are in docs/nfs.md.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need python3 jq
PASS_FLOOR=${PASS_FLOOR:-166}
# the peers are beside the project root (../shared), or, from a git
# worktree, beside the main checkout
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SRC=${PYNFS_SRC:-}
for d in "$ROOT/../shared" "$ROOT/../../shared"; do
	[[ -z $SRC && -d $d/peers/pynfs ]] && SRC=$d/peers/pynfs
done
[[ -n $SRC ]] || skip "pynfs not found in ../shared/peers (set PYNFS_SRC)"
PATH=/usr/bin:/bin python3 -c 'import ply' 2>/dev/null ||
	skip "python3-ply not installed (scripts/deps.sh)"
[[ $EUID == 0 ]] || skip "the directory backend needs CAP_DAC_READ_SEARCH (run as root)"

PY=$BUILD/peers/pynfs
if [[ ! -f $PY/.built ]]; then
	rm -rf "$PY"
	mkdir -p "$(dirname "$PY")"
	cp -r "$SRC" "$PY"
	(cd "$PY" && PATH=/usr/bin:/bin timeout 300 python3 setup.py build \
		>build.log 2>&1) || fail "pynfs did not build: $PY/build.log"
	touch "$PY/.built"
fi

daemon_setup
mkdir -p "$T/share"
cat >>"$T/d.ini" <<EOC
[export share]
type = nfs
path = $T/share
listen = 127.0.0.1:$PORT
lease = 5
grace = 2
EOC
start_daemon "$T/d.ini"
sleep 3		# the grace period: only reclaims are served in it

rc=0
(cd "$PY/nfs4.1" && PATH=/usr/bin:/bin timeout 2400 python3 testserver.py \
	"127.0.0.1:$PORT/pynfs" --maketree --json="$T/r.json" all \
	>"$T/pynfs.log" 2>&1) || rc=$?
kill -0 "$DPID" 2>/dev/null || { tail -20 "$T/d.log" >&2; fail "blkstackd died during pynfs"; }
((rc < 124)) || fail "pynfs exited $rc (timeout or signal)"
[[ -s $T/r.json ]] || { tail -20 "$T/pynfs.log" >&2; fail "pynfs wrote no results"; }

total=$(jq '.tests' "$T/r.json")
failed=$(jq '.failures' "$T/r.json")
skipped=$(jq '.skipped' "$T/r.json")
pass=$((total - failed - skipped))
echo "pynfs 4.1 all: $total tests: $pass passed, $failed failed, $skipped skipped"
jq -r '.testcase[] | select(.failure) | "  FAILED \(.code) \(.classname).\(.name)"' \
	"$T/r.json" || true
stop_daemon
((pass >= PASS_FLOOR)) || fail "$pass tests passed, below the floor $PASS_FLOOR"
echo "PASS: nfs_pynfs"
