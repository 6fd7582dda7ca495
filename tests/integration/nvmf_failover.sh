#!/usr/bin/env bash
# The nvmf host driver's failover policy (issue 14, native multipath):
# blkstackd T exports a file over nvmf on one listener; the daemon under
# test has a device over two paths to it, each through its own TCP
# forwarder (tests/integration/lib/tcp_proxy.py), `policy = failover`,
# exported over NBD.
#   - with both paths live, every I/O command goes to path 1 (the first
#     in url order): path 2's command count does not move;
#   - fio verify (crc32c) runs while path 1's forwarder is killed: no
#     error; then requests go to path 2 only, and the bytes read back;
#   - path 1 back: requests go to path 1 again, none to path 2 (the
#     documented policy: the first live path in url order); every
#     pattern written reads back, also from T's file.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
source "$(dirname "$0")/lib/nvmf_ana.bash"
source "$(dirname "$0")/lib/procs.bash"
need python3 fio jq qemu-io
has_type nvmf || skip "blkstack built without the nvmf driver"
fio --enghelp=nbd >/dev/null 2>&1 || skip "fio has no nbd engine"
need_export_type nvmf
daemon_setup
daemon_threads 2

PA=$(free_port) X1=$(free_port) X2=$(free_port)

cleanup() {
	tp_cleanup
	daemon_cleanup
}
trap cleanup EXIT

nvmf_target_start fo "$PA"
start_proxy x1 "$X1" "$PA"
start_proxy x2 "$X2" "$PA"

U=nvme+tcp://127.0.0.1
cat >>"$T/d.ini" <<EOC
[device fo]
type = nvmf
url = $U:$X1/$NQN/1
url.2 = $U:$X2/$NQN/1
policy = failover
reconnect_ms = 200
timeout = 20
queues = 2
queue_depth = 16

[export fo]
type = nbd
device = fo
listen = 127.0.0.1:$PORT
EOC
start_daemon "$T/d.ini"
NBD=nbd://127.0.0.1:$PORT


# io PAT OFF: write 1 MiB of PAT at OFF (MiB) and read it back checked
io() {
	local o=$(($2 << 20))
	timeout 30 qemu-io -f raw "$NBD" -c "write -P $1 $o 1M" \
		-c "read -P $1 $o 1M" >"$T/q.log" 2>&1 ||
		{ cat "$T/q.log"; fail "qemu-io $1 at ${2}M"; }
	! grep -qi -e "fail" -e "error" "$T/q.log" ||
		{ cat "$T/q.log"; fail "qemu-io $1 at ${2}M: bytes"; }
}

# counts: the commands sent on each path so far, in C1 and C2
counts() {
	C1=$(path_cmds fo 1)
	C2=$(path_cmds fo 2)
}

note "both paths live, policy failover"
paths_live fo 2 10
[[ $OUT == *"policy"*"failover, 2 paths (2 live)"* ]] || fail "info: $OUT"

note "both live: every command on path 1"
counts
io 0x11 0
io 0x12 1
((($(path_cmds fo 1) - C1) >= 4)) ||
	{ ctl 0 info fo; fail "path 1 carried no I/O: $OUT"; }
(($(path_cmds fo 2) == C2)) ||
	{ ctl 0 info fo; fail "path 2 carried I/O while path 1 lives: $OUT"; }

note "fio verify while path 1's forwarder is killed: no error"
timeout 240 fio --name=fo --ioengine=nbd --uri="$NBD" --size=8M \
	--offset=16M --iodepth=16 --rw=randwrite --bsrange=4k-128k \
	--verify=crc32c --verify_fatal=1 --do_verify=1 --verify_state_save=0 \
	--loops=40 --output-format=json --output="$T/fio.json" &
FIO=$!
# kill path 1 once fio's requests run on it (fio may take a while to start)
counts
for ((i = 0; i < 100; i++)); do
	(($(path_cmds fo 1) > C1 + 16)) && break
	sleep 0.1
done
tp_stop x1
wait "$FIO" || { tail -40 "$T/fio.json"; fail "fio failed across the failover"; }
(($(jq '[.jobs[].error] | add' "$T/fio.json") == 0)) || fail "fio errors"
paths_live fo 1 10
# fio went on on path 2 (path 2 had no command before)
(($(path_cmds fo 2) > C2)) || { ctl 0 info fo; fail "fio did not move to path 2: $OUT"; }
[[ $OUT =~ path\.1\ [^$'\n']*:\ (down|connecting) ]] || fail "path 1 not down: $OUT"
[[ $OUT =~ path\.1\ [^$'\n']*lost\ [1-9] ]] || fail "path 1 not counted lost: $OUT"
ctl 0 explain fo
[[ $OUT == *"paths 1 "*", 2 live"* ]] || fail "explain: $OUT"

note "path 1 gone: every command on path 2, the bytes read back"
counts
io 0x21 2
timeout 30 qemu-io -f raw "$NBD" -c "read -P 0x11 0 1M" -c "read -P 0x12 1048576 1M" \
	>"$T/q.log" 2>&1 || { cat "$T/q.log"; fail "read back on path 2"; }
! grep -qi -e "fail" -e "error" "$T/q.log" || { cat "$T/q.log"; fail "bytes on path 2"; }
(($(path_cmds fo 1) == C1)) ||
	{ ctl 0 info fo; fail "path 1 carried I/O while down: $OUT"; }
((($(path_cmds fo 2) - C2) >= 4)) ||
	{ ctl 0 info fo; fail "path 2 carried no I/O: $OUT"; }

note "path 1 back: requests go to path 1 again (first live in url order)"
start_proxy x1 "$X1" "$PA"
paths_live fo 2 10
counts
io 0x31 3
((($(path_cmds fo 1) - C1) >= 2)) ||
	{ ctl 0 info fo; fail "path 1 not used again: $OUT"; }
(($(path_cmds fo 2) == C2)) ||
	{ ctl 0 info fo; fail "path 2 still used with path 1 back: $OUT"; }

note "every pattern in T's file"
for k in 0:11 1:12 2:21 3:31; do
	off=${k%%:*} pat=${k##*:}
	cmp -n 1M -i $((off << 20)):0 "$T/ns.img" \
		<(python3 -c "import sys; sys.stdout.buffer.write(bytes([0x$pat]) * (1 << 20))") ||
		fail "ns.img at ${off}M is not 0x$pat"
done

stop_daemon
stop_other_daemon "$T/t.log"
tp_cleanup
note "PASS"
