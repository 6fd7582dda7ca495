#!/usr/bin/env bash
# What every blkstack process pays before it does anything: the remote
# drivers' client libraries (librados/librbd and Ceph's C++ start-up;
# libnbd with GnuTLS, libxml2, ICU, libstdc++; libiscsi with the RDMA
# libraries) are loaded by their driver at its first open, never linked
# (lib/core/dynlib.h). Linked, Ceph cost each command 40 ms of CPU (0.7 s
# under AddressSanitizer) and libnbd + libiscsi 5.6 MiB of the daemon's
# 8.4 MiB resident at start. The rbd, nbd-driver and sd tests show the
# lazy load works.
source "$(dirname "$0")/lib/cli-common.bash"
command -v ldd >/dev/null || skip "ldd not installed"
for b in "$BS" "$(dirname "$BS")/blkstackd"; do
	[[ -x $b ]] || continue
	libs=$(ldd "$b") || fail "ldd $b"
	! grep -E 'librados|librbd|libceph' <<<"$libs" ||
		fail "$b links the Ceph libraries (load them in the rbd driver)"
	! grep -E 'libnbd|libiscsi|libgnutls|libxml2' <<<"$libs" ||
		fail "$b links libnbd or libiscsi (load them in their driver)"
done
# and the rbd type is still there when the header was at build time
if [[ -f /usr/include/rbd/librbd.h ]]; then
	has_type rbd || fail "rbd type missing although librbd.h is installed"
fi
echo "PASS"
