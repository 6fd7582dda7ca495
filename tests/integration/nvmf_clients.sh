#!/usr/bin/env bash
# The NVMe/TCP target with clients blkstack did not write (issue 14, part 1):
# - pynvmeof: Identify Namespace on a file device that punches holes shows
#   DLFEAT 9 ((1<<3)|1), NMIC shared, Identify Controller CMIC multi-
#   controller and ONCS Compare|DSM|Write Zeroes; after
#   `attr DEV queue/write_zeroes_unmap 0` a Namespace Attribute Changed
#   event arrives (type 2, info 0, log 4), the changed-namespace log names
#   NSID 1 and DLFEAT reads 0;
# - Identify CNS 02h lists the active namespaces [1, 2]; each one's
#   identification descriptors (CNS 03h) hold EUI-64, NGUID, UUID (an
#   RFC 9562 version 8 UUID, distinct per namespace) and CSI;
# - the NGUID, EUI-64 and UUIDs are the same after a daemon restart;
# - a second subsystem over a mem device without discard (max_discard=0,
#   zeroes=none): ONCS Compare|Write Zeroes (9, no Dataset Management),
#   DLFEAT 0;
# - pynvmeof writes (in capsule and through R2T) read back byte-exact;
# - libnvmf's nvmf-fio at its default queue depth (32): random read/write
#   of 4 KiB, 8 KiB, 64 KiB and 1 MiB (in_capsule = 64K: writes above it through one
#   R2T answered by one H2CData PDU), random discard and random write
#   zeroes, sequential 1 MiB writes and 128 KiB reads, with and without
#   header and data digests, bounded runtime, exit 0, a summary line
#   without errors and no command error in the daemon's log. libnvmf is
#   built with peers/libnvmf.patch (a fix of its own read bug, not ours;
#   nvmf-fio's sequential mode and summary line).
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
source "$(dirname "$0")/lib/nvmf_peers.bash"
need python3 make cc patch
nvmf_peers
PY="python3 $(dirname "$0")/lib/nvmf_py.py"
daemon_setup
PORT2=$(free_port)
cat >>"$T/d.ini" <<EOC
[device da]
type = file
path = $T/a.img
size = 64M
[device db]
type = mem
size = 16M
[device dn]
type = mem
size = 16M
max_discard = 0
zeroes = none
[export s0]
type = nvmf
listen = 127.0.0.1:$PORT
in_capsule = 64K
unit.a = da
unit.b = db
[export s1]
type = nvmf
listen = 127.0.0.1:$PORT2
device = dn
EOC
start_daemon "$T/d.ini"
NQN=nqn.2026-12.org.blkstack:s0

note "identify: DLFEAT 9, NMIC shared, CMIC multi-controller, ONCS"
out=$(timeout 30 $PY "$PORT" "$NQN" identify) || fail "identify: $out"
echo "$out"
grep -q 'dlfeat=9 ' <<<"$out" || fail "DLFEAT is not 9 on a punching file"
grep -q 'nmic=1 ' <<<"$out" || fail "NMIC shared not set"
grep -q 'cmic=2 ' <<<"$out" || fail "CMIC multi-controller not set"
grep -q 'oncs=13$' <<<"$out" || fail "ONCS is not Compare|DSM|Write Zeroes"
# in_capsule = 64K: (64 + 65536) / 16
grep -q 'ioccsz=4100 ' <<<"$out" || fail "IOCCSZ does not follow in_capsule = 64K"
ids=$(grep -o 'nguid=[0-9a-f]* eui64=[0-9a-f]*' <<<"$out")

note "active namespace list, identification descriptors with a UUID"
out=$(timeout 30 $PY "$PORT" "$NQN" ids) || fail "ids: $out"
echo "$out"
grep -q '^nsids=\[1, 2\]$' <<<"$out" || fail "active namespace list is not [1, 2]"
for n in 1 2; do
	grep -q "^ns=$n nidt=\\[1, 2, 3, 4\\] uuid=[0-9a-f-]* version=8\$" <<<"$out" ||
		fail "ns $n: descriptors are not EUI-64, NGUID, UUID (version 8), CSI"
done
uuids=$(grep -o 'uuid=[0-9a-f-]*' <<<"$out")
[[ $(sort -u <<<"$uuids" | wc -l) == 2 ]] || fail "the namespaces share a UUID"

note "a device without discard: ONCS without Dataset Management"
out=$(timeout 30 $PY "$PORT2" nqn.2026-12.org.blkstack:s1 identify) ||
	fail "identify s1: $out"
echo "$out"
grep -q 'oncs=9$' <<<"$out" || fail "ONCS is not Compare|Write Zeroes"
# the default: a whole transfer (1 MiB) may come with its command
grep -q 'ioccsz=65540 ' <<<"$out" || fail "IOCCSZ is not (64 + 1 MiB) / 16 by default"
grep -q 'dlfeat=0 ' <<<"$out" || fail "DLFEAT is not 0 without unmap"

note "writes read back byte-exact (in capsule and R2T)"
out=$(timeout 60 $PY "$PORT" "$NQN" rw 2>&1) || fail "rw: $out"

note "libnvmf nvmf-fio with and without digests"
if nvmf_fio_build; then
	URL=nvmf-tcp://127.0.0.1:$PORT/$NQN/1
	for args in "--randrw" "--randrw --hdgst --ddgst" "--randdiscard" \
		"--randdiscard --ddgst" "--randwritezeroes" \
		"--randwritezeroes --hdgst" "--randwrite --bs=131072 --hdgst --ddgst" \
		"--randread --bs=65536" "--randrw --bs=8192 --hdgst --ddgst" \
		"--randwrite --bs=1048576" "--randrw --bs=1048576 --ddgst" \
		"--seqwrite --bs=1048576" "--seqread --bs=131072 --ddgst"; do
		# shellcheck disable=SC2086
		timeout 60 "$FIO" --filename="$URL" $args --runtime=2 \
			>"$T/fio.out" 2>&1 ||
			{ cat "$T/fio.out" >&2; fail "nvmf-fio $args"; }
		grep -q 'IOPS [0-9]' "$T/fio.out" ||
			{ cat "$T/fio.out" >&2; fail "nvmf-fio $args: no I/O"; }
		# the patch's summary line (bench/nvmf.sh reads it)
		grep -Eq '^summary: ios=[1-9].* p99_us=[0-9.]+ errors=0$' "$T/fio.out" ||
			{ cat "$T/fio.out" >&2; fail "nvmf-fio $args: summary"; }
	done
	grep 'close .* queue [1-9]' "$T/d.log" | grep -v ' 0 errors' &&
		fail "commands failed under nvmf-fio"
else
	echo "no libnvmf in $PEERS: nvmf-fio part skipped"
fi

note "write_zeroes_unmap 0: an event, the changed list, DLFEAT 0"
out=$(timeout 30 $PY "$PORT" "$NQN" aen "$CTL" da 2>&1) || fail "aen: $out"
echo "$out"
grep -q 'event type=2 info=0 log=4' <<<"$out" || fail "no NS attribute event"
grep -q 'changed=\[1\]' <<<"$out" || fail "changed-namespace log is not [1]"
grep -q 'dlfeat=0' <<<"$out" || fail "DLFEAT did not drop to 0"

note "NGUID, EUI-64 and UUID stable across a restart"
stop_daemon
start_daemon "$T/d.ini"
out=$(timeout 30 $PY "$PORT" "$NQN" identify) || fail "identify: $out"
grep -q "$ids" <<<"$out" || fail "identifiers changed: $ids vs $out"
out=$(timeout 30 $PY "$PORT" "$NQN" ids) || fail "ids: $out"
[[ $(grep -o 'uuid=[0-9a-f-]*' <<<"$out") == "$uuids" ]] ||
	fail "UUIDs changed: $uuids vs $out"
stop_daemon

note "in_capsule above 1M or not a multiple of 16 is refused with the place"
for bad in 2M 100; do
	sed "s/^in_capsule = .*/in_capsule = $bad/" "$T/d.ini" >"$T/bad.ini"
	if "$BSD" -f -c "$T/bad.ini" >"$T/bad.log" 2>&1; then
		fail "in_capsule = $bad accepted"
	fi
	grep -q "bad.ini:[0-9]*: export s0: in_capsule '$bad': give a size up to 1024K, a multiple of 16 bytes" "$T/bad.log" ||
		{ cat "$T/bad.log"; fail "wrong error for in_capsule = $bad"; }
done
echo PASS
