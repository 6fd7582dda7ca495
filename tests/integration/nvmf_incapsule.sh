#!/usr/bin/env bash
# in_capsule = 0 (IOCCSZ 64 bytes: every write waits for an R2T) with
# clients blkstack did not write: pynvmeof connects (its admin and I/O
# queue Connects carry their 1 KiB in the capsule: accepted up to 8 KiB
# before a queue is connected and on the admin queue), identifies and
# writes and reads back byte-exact; libnvmf's nvmf-fio (its I/O queue
# Connect keeps to IOCCSZ: no data in the capsule, an R2T asks for it)
# runs random reads and writes with and without digests, no command
# failing. Before, every Connect was Data SGL Length Invalid when
# in_capsule was under 1 KiB.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
source "$(dirname "$0")/lib/nvmf_peers.bash"
need python3 make cc patch
nvmf_peers
PY="python3 $(dirname "$0")/lib/nvmf_py.py"
daemon_setup
cat >>"$T/d.ini" <<EOC
[device da]
type = mem
size = 64M
[export s0]
type = nvmf
listen = 127.0.0.1:$PORT
in_capsule = 0
device = da
EOC
start_daemon "$T/d.ini"
NQN=nqn.2026-12.org.blkstack:s0

note "pynvmeof: identify, then writes read back (IOCCSZ 64 bytes)"
out=$(timeout 60 $PY "$PORT" "$NQN" identify 2>&1) || fail "identify: $out"
echo "$out"
grep -q 'ioccsz=4 ' <<<"$out" || fail "IOCCSZ is not 64 / 16"
out=$(timeout 60 $PY "$PORT" "$NQN" rw 2>&1) || fail "rw: $out"

note "libnvmf nvmf-fio: its I/O queue Connect's data by R2T"
if nvmf_fio_build; then
	URL=nvmf-tcp://127.0.0.1:$PORT/$NQN/1
	for args in "--randrw" "--randrw --bs=65536 --hdgst --ddgst"; do
		# shellcheck disable=SC2086
		timeout 60 "$FIO" --filename="$URL" $args --runtime=2 \
			>"$T/fio.out" 2>&1 ||
			{ cat "$T/fio.out" >&2; fail "nvmf-fio $args"; }
		grep -Eq '^summary: ios=[1-9].* errors=0$' "$T/fio.out" ||
			{ cat "$T/fio.out" >&2; fail "nvmf-fio $args: summary"; }
	done
	grep 'close .* queue [1-9]' "$T/d.log" | grep -v ' 0 errors' &&
		fail "commands failed under nvmf-fio"
else
	echo "no libnvmf in $PEERS: nvmf-fio part skipped"
fi
stop_daemon
echo PASS
