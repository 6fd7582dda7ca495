#!/usr/bin/env bash
# Unaligned NBD requests from real clients: the export advertises minimum
# block size 1 and the core read-modify-writes partial blocks. nbdcopy of a
# 1000-byte file in and back; qemu-io writes, zeroes and reads at odd
# offsets on a file (buffered and O_DIRECT) and a 4K-block mem device;
# overlapping unaligned writes in flight at once (tests/integration/lib/
# nbd_overlap.py), every byte checked against a model.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need nbdinfo nbdcopy qemu-io jq python3 cmp
daemon_setup
cat >>"$T/d.ini" <<EOC
[device f]
type = file
path = $T/f.img
size = 64M

[device fd]
type = file
path = $T/fd.img
size = 64M
direct = 1

[device m4k]
type = mem
size = 16M
logical_block_size = 4096

[export f]
type = nbd
device = f
listen = 127.0.0.1:$PORT

[export fd]
type = nbd
device = fd
listen = 127.0.0.1:$PORT

[export m4k]
type = nbd
device = m4k
listen = 127.0.0.1:$PORT
EOC
start_daemon "$T/d.ini"
U=nbd://127.0.0.1:$PORT
qio() { timeout 60 qemu-io -f raw "$@"; }

note "block sizes: minimum 1, preferred the device's block"
J=$(timeout 20 nbdinfo --json "$U/m4k")
[[ $(jq -r '.exports[0].block_size_minimum' <<<"$J") == 1 ]] ||
	fail "minimum block size not 1: $J"
[[ $(jq -r '.exports[0].block_size_preferred' <<<"$J") == 4096 ]] ||
	fail "preferred block size not 4096: $J"

note "nbdcopy of a 1000-byte file into an export and back"
head -c 1000 /dev/urandom >"$T/small"
for e in m4k f fd; do
	timeout 60 nbdcopy "$T/small" "$U/$e" || fail "$e: nbdcopy into the export"
	timeout 60 nbdcopy "$U/$e" "$T/back" || fail "$e: nbdcopy out of the export"
	cmp -n 1000 "$T/small" "$T/back" || fail "$e: the 1000 bytes differ"
	size=$(stat -c %s "$T/back")
	tail -c +1001 "$T/back" | cmp -s - <(head -c $((size - 1000)) /dev/zero) ||
		fail "$e: bytes after the 1000 changed"
	rm -f "$T/back"
done

note "qemu-io: unaligned writes, zeroes and reads at odd offsets"
for e in m4k f fd; do
	qio "$U/$e" -c 'write -z 0 64k' \
		-c 'write -P 0x11 1 1000' -c 'write -z 3 5000' \
		-c 'write -P 0x22 -f 4095 2' -c 'write -P 0x33 8191 10000' \
		-c 'write -z -u 20000 100' \
		>"$T/q" 2>&1 || { cat "$T/q"; fail "$e: qemu-io writes"; }
	grep -qi 'error\|failed' "$T/q" && { cat "$T/q"; fail "$e: qemu-io writes"; }
	qio "$U/$e" -c 'read -P 0 0 1' -c 'read -P 0x11 1 2' \
		-c 'read -P 0 3 4092' -c 'read -P 0x22 4095 2' \
		-c 'read -P 0 4097 4094' -c 'read -P 0x33 8191 10000' \
		-c 'read -P 0x33 8191 1' -c 'read -P 0x33 18190 1' \
		-c 'read -P 0 18191 1809' -c 'read -P 0 20000 100' \
		-c 'read -P 0 20100 45436' \
		>"$T/q" 2>&1 || { cat "$T/q"; fail "$e: qemu-io reads"; }
	grep -q 'Pattern verification failed\|error' "$T/q" &&
		{ cat "$T/q"; fail "$e: read back differs"; }
done

note "overlapping unaligned writes in flight, checked against a model"
for e in f m4k; do
	timeout 120 python3 "$(dirname "$0")/lib/nbd_overlap.py" 127.0.0.1 \
		"$PORT" "$e" 20 64 || fail "$e: overlapping writes lost bytes"
done

stop_daemon
echo "PASS"
