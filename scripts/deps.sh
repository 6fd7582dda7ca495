#!/usr/bin/env bash
# Install the Debian packages blkstack needs to build and test, only those
# that are missing. Idempotent; silent when everything is present.
set -euo pipefail

PKGS=(
	build-essential pkg-config
	liburing-dev libjansson-dev libcmocka-dev
	libnbd-dev libnbd-bin nbdkit qemu-utils
	libiscsi-dev libiscsi-bin tgt nettle-dev
	libext2fs-dev e2fsprogs attr
	ceph-mon ceph-osd ceph-common librbd-dev qemu-block-extra
	fio clang libclang-rt-14-dev valgrind
	util-linux bsdutils coreutils iproute2 jq python3 python3-ply tshark
	nfs-ganesha nfs-ganesha-vfs libnfs-utils libnfs-dev
)

missing=()
for p in "${PKGS[@]}"; do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[[ $status == "install ok installed" ]] || missing+=("$p")
done
((${#missing[@]})) || exit 0

echo "deps: installing ${missing[*]}" >&2
SUDO=()
if ((EUID != 0)); then
	if command -v sudo >/dev/null; then
		SUDO=(sudo)
	else
		echo "deps: need root (or sudo) to install: ${missing[*]}" >&2
		exit 1
	fi
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
