# Shared by tests/integration/rbd_*.sh (sourced after cli-common.bash and
# daemon.bash): one throw-away Ceph cluster per test script, made by
# scripts/ceph-cluster.sh under $T/ceph and stopped by the PIDs it
# recorded when the script exits.

CEPH_DIR=
CEPH_SCRIPT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)/scripts/ceph-cluster.sh"

ceph_cleanup() {
	if [[ -n $CEPH_DIR && -d $CEPH_DIR ]]; then
		"$CEPH_SCRIPT" stop "$CEPH_DIR" >/dev/null 2>&1 || true
	fi
	daemon_cleanup
}

# ceph_setup: after daemon_setup; SKIP (77) when Ceph is not installed
# (a binary missing), with the reason. With Ceph installed, a cluster that
# does not start is a FAIL: the start log (scripts/ceph-cluster.sh prints
# the daemon log's tail that explains it) and the cluster log's tail are
# printed. Sets $CEPH_CONF.
ceph_setup() {
	local c
	for c in ceph-mon ceph-osd ceph rados rbd monmaptool; do
		command -v "$c" >/dev/null ||
			skip "$c not installed (scripts/deps.sh installs ceph-mon ceph-osd ceph-common)"
	done
	has_type rbd || skip "blkstack built without librbd (librbd-dev)"
	CEPH_DIR=$T/ceph
	trap ceph_cleanup EXIT
	if ! "$CEPH_SCRIPT" start "$CEPH_DIR" >"$T/ceph-start.log" 2>&1; then
		cat "$T/ceph-start.log" >&2
		if [[ -f $CEPH_DIR/log/cluster.log ]]; then
			echo "--- last lines of $CEPH_DIR/log/cluster.log:" >&2
			tail -n 25 "$CEPH_DIR/log/cluster.log" >&2
		fi
		fail "the test Ceph cluster did not start (scripts/ceph-cluster.sh start; Ceph is installed)"
	fi
	note "$(tail -1 "$T/ceph-start.log")"
	export CEPH_CONF=$CEPH_DIR/ceph.conf
}

# rbd_nbd_config POOL/IMAGE SIZE: device r on the image (made with SIZE
# when missing), exported over NBD on 127.0.0.1:$PORT, added to $T/d.ini.
rbd_nbd_config() {
	cat >>"$T/d.ini" <<EOC
[device r]
type = rbd
image = $1
conf = $CEPH_CONF
create = $2

[export r]
type = nbd
device = r
listen = 127.0.0.1:$PORT
EOC
}

# qio ARGS...: qemu-io -f raw, bounded in time; fails (with its output on
# stderr) when it fails or says error, fail or mismatch.
qio() {
	local out
	out=$(timeout 120 qemu-io -f raw "$@" 2>&1) || { echo "$out" >&2; return 1; }
	if grep -qiE 'error|fail|mismatch' <<<"$out"; then
		echo "$out" >&2
		return 1
	fi
}

# rbd_used POOL/IMAGE: bytes `rbd du` counts as used.
rbd_used() {
	timeout 60 rbd du --format json "$1" | jq -r '.images[0].used_size'
}
