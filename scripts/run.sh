#!/usr/bin/env bash
# `make run` until blkstackd exists: a short tour of the CLI on a thin
# 64 GiB image under ./var/.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}/blkstack
IMG=var/vol0.img
mkdir -p var

if ! "$B" --help | grep -q '^  file - '; then
	# until the file driver is built in: the same tour on a RAM disk
	D=mem:64G
	step() { echo; echo "\$ $*"; "$@"; }
	step "$B" info "$D"
	step "$B" attr "$D" queue/write_zeroes_unmap
	step "$B" fallocate -w -v -l 1G "$D"
	step "$B" zeroout -v --no-unmap -l 64M "$D"
	exit 0
fi
du_img() { echo "  du: $(du --block-size=1 "$IMG" | cut -f1) bytes allocated of $(stat -c %s "$IMG")"; }
step() { echo; echo "\$ $*"; "$@"; }

step "$B" info "file:$IMG,size=64G"
step "$B" attr "file:$IMG" queue/write_zeroes_unmap
echo; echo "# write 1 GiB of data, then zero it by deallocating (fallocate -w)"
dd if=/dev/urandom of="$IMG" bs=1M count=1024 conv=notrunc status=none
du_img
if step "$B" fallocate -w -v -l 1G "file:$IMG"; then :; else
	echo "  (refused: this filesystem cannot zero by unmapping; see the reason)"
fi
du_img
echo; echo "# zeroout works everywhere (falls back to writing zeroes)"
step "$B" zeroout -v --no-unmap -o 1G -l 64M "file:$IMG"
du_img
echo
echo "More: $B --help, docs/cli.md. The image stays in $IMG."
