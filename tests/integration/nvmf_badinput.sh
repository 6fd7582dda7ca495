#!/usr/bin/env bash
# Malformed NVMe/TCP input (issue 14, part 1): a raw client
# (lib/nvmf_raw.py) sends a wrong HLEN, an unknown PDU type, a capsule
# before ICReq, an ICReq with HPDA 1 and a bad header digest (each:
# C2HTermReq with the FES the transport specification gives, then the
# connection closes); a command
# before Connect and before CC.EN (Command Sequence Error), unknown admin
# and I/O opcodes (Invalid Command Opcode), an unknown log page, a read and
# a Write Zeroes past the end (LBA Out of Range), a read of a missing
# namespace (Invalid Namespace), 32 KiB of in-capsule data where IOCCSZ
# offers 16 KiB (in_capsule = 16K: Data SGL Length Invalid; 16 KiB is
# taken). A burst of 300 Get Log Page capsules of 1 MiB each in one write
# (to the discovery controller, before any login) that the client does
# not read: the daemon queues little more than out_max of answers, then
# sends every one (lib/nvmf_burst.py); Identify with a 1 MiB SGL is Data
# SGL Length Invalid. An admin queue (KATO 1 s) ended by a bad PDU behind
# 12 MiB of answers its host does not read still closes on the keep
# alive timeout (lib/nvmf_stuck.py). The daemon stays up and serves on.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need python3
daemon_setup
cat >>"$T/d.ini" <<EOC
[device da]
type = mem
size = 64M
[export s0]
type = nvmf
listen = 127.0.0.1:$PORT
in_capsule = 16K
device = da
EOC
start_daemon "$T/d.ini"
NQN=nqn.2026-12.org.blkstack:s0
timeout 60 python3 "$(dirname "$0")/lib/nvmf_raw.py" "$PORT" "$NQN" ||
	fail "malformed input not answered as specified"
kill -0 "$DPID" || fail "blkstackd died"
note "a burst of capsules asking for 1 MiB each"
timeout 120 python3 "$(dirname "$0")/lib/nvmf_burst.py" "$PORT" "$DPID" ||
	fail "a burst of capsules was not held to out_max"
note "an ended queue whose host stopped reading"
timeout 60 python3 "$(dirname "$0")/lib/nvmf_stuck.py" "$PORT" "$NQN" \
	"$T/d.log" || fail "an ended queue outlived its keep alive timeout"
note "the daemon still serves"
timeout 60 python3 "$(dirname "$0")/lib/nvmf_raw.py" "$PORT" "$NQN" \
	>/dev/null || fail "second round failed"
stop_daemon
echo PASS
