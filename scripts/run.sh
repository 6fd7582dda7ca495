#!/usr/bin/env bash
# `make run`: serve the embedded default with blkstackd in the foreground:
# a thin 64 GiB file device vol0 at ./var/vol0.img, exported over NBD on
# 127.0.0.1:10809 and ./var/nbd.sock. Ctrl-C stops it cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}
STATE=${STATE_DIR:-var}
mkdir -p "$STATE"
cat <<EOT
blkstackd: serving a thin 64 GiB volume from $STATE/vol0.img (Ctrl-C stops it)

  nbdinfo nbd://127.0.0.1/vol0                   capabilities (can_fast_zero ...)
  qemu-io -f raw nbd://127.0.0.1/vol0 -c 'write -P 0xab 0 1G' -c 'write -z -u 0 1G'
  fio --ioengine=nbd --uri=nbd://127.0.0.1/vol0 --name=t --rw=randwrite --size=1G
  $B/blkstack -s $STATE/blkstackd.sock ls        the daemon's devices
  $B/blkstack -s $STATE/blkstackd.sock attr vol0 queue/write_zeroes_unmap 0
  du -h $STATE/vol0.img                           what is really allocated

EOT
exec "$B/blkstackd" -f -d "$STATE"
