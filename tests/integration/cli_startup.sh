#!/usr/bin/env bash
# What every blkstack process pays before it does anything: the Ceph
# libraries (librados, librbd, libceph-common and their C++ start-up)
# are loaded by the rbd driver at its first open, never linked
# (lib/drivers/rbd_lib.h). Linked, they cost each command 40 ms of CPU
# and 0.7 s under AddressSanitizer. The rbd tests show the lazy load works.
source "$(dirname "$0")/lib/cli-common.bash"
command -v ldd >/dev/null || skip "ldd not installed"
for b in "$BS" "$(dirname "$BS")/blkstackd"; do
	[[ -x $b ]] || continue
	libs=$(ldd "$b") || fail "ldd $b"
	! grep -E 'librados|librbd|libceph' <<<"$libs" ||
		fail "$b links the Ceph libraries (load them in the rbd driver)"
done
# and the rbd type is still there when the header was at build time
if [[ -f /usr/include/rbd/librbd.h ]]; then
	has_type rbd || fail "rbd type missing although librbd.h is installed"
fi
echo "PASS"
