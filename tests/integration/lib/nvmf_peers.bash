# The vendored NVMe/TCP peers (../shared/peers) for tests/integration/nvmf_*.sh
# (sourced after cli-common.bash).
#
# nvmf_peers: set $PEERS (the peers directory) or skip the test without
# pynvmeof; export PYNVMEOF for lib/nvmf_py.py.
# nvmf_fio_build: build libnvmf's nvmf-fio into $BUILD/peers (once per
# patch) and set $FIO; returns 1 when there is no libnvmf.

nvmf_peers() {
	local root
	# ../shared/peers from the project root (a worktree may sit one deeper)
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
	if [[ -z ${PEERS:-} ]]; then
		for PEERS in "$root/../shared/peers" "$root/../../shared/peers"; do
			[[ -d $PEERS ]] && break
		done
	fi
	[[ -d $PEERS/pynvmeof/src ]] || skip "no pynvmeof in $PEERS"
	export PYNVMEOF=$PEERS/pynvmeof BUILD
}

nvmf_fio_build() {
	local patch stamp
	[[ -d $PEERS/libnvmf ]] || return 1
	mkdir -p "$BUILD/peers"
	# libnvmf at the vendored commit corrupts its own stream when a
	# C2HData PDU arrives in more than one read (readv with a stale
	# iovec: see docs/nvmf.md); built with the two-line fix in this
	# patch (which also gives nvmf-fio what bench/nvmf.sh needs)
	patch=$(dirname "${BASH_SOURCE[0]}")/../peers/libnvmf.patch
	stamp=$BUILD/peers/libnvmf/.blkstack-patch
	# one build for tests running side by side: the others wait for it
	peers_lock libnvmf
	if [[ ! -x $BUILD/peers/libnvmf/examples/nvmf-fio ]] ||
		! cmp -s "$patch" "$stamp"; then
		rm -rf "$BUILD/peers/libnvmf"
		cp -r "$PEERS/libnvmf" "$BUILD/peers/"
		patch -s -d "$BUILD/peers/libnvmf" -p1 <"$patch" &&
			cp "$patch" "$stamp" || fail "patching libnvmf"
		make -C "$BUILD/peers/libnvmf/lib" >/dev/null 2>&1 &&
			make -C "$BUILD/peers/libnvmf/examples" fio >/dev/null 2>&1 ||
			fail "building libnvmf"
	fi
	peers_unlock
	FIO=$BUILD/peers/libnvmf/examples/nvmf-fio
}
