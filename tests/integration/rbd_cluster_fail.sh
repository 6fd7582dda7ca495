#!/usr/bin/env bash
# With Ceph installed, a test Ceph cluster that does not start is a FAIL,
# not a SKIP (tests/integration/lib/ceph.bash): rbd_io.sh is run with a
# ceph-mon first on PATH that refuses to make the monitor; it must exit 1
# (not 77), say that the cluster did not start, and print the reason
# scripts/ceph-cluster.sh gave with the log lines that tell.
source "$(dirname "$0")/lib/cli-common.bash"
for c in ceph-mon ceph-osd ceph rados rbd monmaptool; do
	command -v "$c" >/dev/null || skip "$c not installed"
done
has_type rbd || skip "blkstack built without librbd (librbd-dev)"
make_tmp
trap 'rm -rf "$T"' EXIT

mkdir "$T/bin"
cat >"$T/bin/ceph-mon" <<'EOC'
#!/bin/sh
echo "ceph-mon (test stand-in): refusing to start"
exit 1
EOC
chmod +x "$T/bin/ceph-mon"
rc=0
PATH="$T/bin:$PATH" timeout 120 bash "$(dirname "$0")/rbd_io.sh" \
	>"$T/out" 2>"$T/err" || rc=$?
((rc == 1)) || { cat "$T/out" "$T/err"; fail "rbd_io exited $rc with a cluster that cannot start, want 1"; }
grep -q "FAIL: the test Ceph cluster did not start" "$T/err" ||
	{ cat "$T/err"; fail "no FAIL line naming the cluster"; }
grep -q "ceph-mon --mkfs failed" "$T/err" || { cat "$T/err"; fail "the step is not named"; }
grep -q "refusing to start" "$T/err" || { cat "$T/err"; fail "the log's lines are not printed"; }
note "rbd_cluster_fail: pass"
