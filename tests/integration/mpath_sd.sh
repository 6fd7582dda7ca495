#!/usr/bin/env bash
# The multipath mapper over two sd (iscsi driver) devices: two iSCSI
# sessions to one LUN of a blkstack iSCSI target (a second blkstackd, "the
# bottom", exporting a file), each session through its own TCP forwarder
# (tests/integration/lib/tcp_proxy.py), so one path is broken by killing
# its forwarder and restored by starting it again. The top blkstackd
# exports the multipath device over NBD.
#   - info/explain name both paths live, unmap zeroing on (NBD fast zero);
#   - fio crc32c verify (bounded size and time) while path b is killed and
#     restored three times: zero errors, data verified, path b failed and
#     rejoined three times (failures 3), explain shows the path states;
#   - bytes written through the top are in the bottom's file.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
source "$(dirname "$0")/lib/mpath.bash"
source "$(dirname "$0")/lib/procs.bash"
need python3 fio jq nbdinfo qemu-img qemu-io
has_type iscsi || skip "blkstack built without the iscsi driver"
has_type multipath || skip "blkstack built without the multipath mapper"
fio --enghelp=nbd >/dev/null 2>&1 || skip "fio has no nbd engine"
daemon_setup
daemon_threads 2

PROXY="$(dirname "$0")/lib/tcp_proxy.py"
declare -A PID
BPORT=$(free_port) XA=$(free_port) XB=$(free_port)
BCTL=$T/bottom.sock

cleanup() {
	local k
	for k in "${!PID[@]}"; do
		kill -KILL "${PID[$k]}" 2>/dev/null || true
		wait "${PID[$k]}" 2>/dev/null || true
	done
	daemon_cleanup
}
trap cleanup EXIT

cat >"$T/bottom.ini" <<EOC
[daemon]
state_dir = $T/bstate
control = $BCTL

[device disk]
type = file
path = $T/disk.img
size = 64M

[export t0]
type = iscsi
listen = 127.0.0.1:$BPORT
device = disk
EOC
"$BSD" -f -c "$T/bottom.ini" >"$T/bottom.log" 2>&1 &
PID[bottom]=$!
for ((i = 0; i < 200; i++)); do
	if ! kill -0 "${PID[bottom]}" 2>/dev/null; then
		unset "PID[bottom]"
		grep -q "unknown export type 'iscsi'" "$T/bottom.log" &&
			skip "no iSCSI target in this tree"
		cat "$T/bottom.log" >&2
		fail "the bottom blkstackd exited while starting"
	fi
	grep -q 'ready:' "$T/bottom.log" && break
	sleep 0.05
done
grep -q 'ready:' "$T/bottom.log" || fail "the bottom blkstackd is not ready"

# start_proxy NAME PORT: a forwarder PORT -> the bottom's portal
start_proxy() {
	python3 "$PROXY" "$2" "$BPORT" >>"$T/proxy-$1.log" 2>&1 &
	PID[$1]=$!
	tp_listening "forwarder $1" "$2"
}

stop_proxy() {
	kill -KILL "${PID[$1]}" 2>/dev/null || true
	wait "${PID[$1]}" 2>/dev/null || true
	unset "PID[$1]"
}

start_proxy xa "$XA"
start_proxy xb "$XB"

IQN=iqn.2026-12.org.blkstack:t0
# each path its own initiator name: two I_T nexuses, never one session
# reinstating the other; a short timeout so a dead path fails its
# commands (EIO) within 3 s and the mapper moves them to the other path
cat >>"$T/d.ini" <<EOC
[device a]
type = iscsi
url = iscsi://127.0.0.1:$XA/$IQN/0
initiator = iqn.2026-12.org.blkstack:mp-a
timeout = 3
max_retries = 1
reconnect_ms = 200
poll_ms = 500

[device b]
type = iscsi
url = iscsi://127.0.0.1:$XB/$IQN/0
initiator = iqn.2026-12.org.blkstack:mp-b
timeout = 3
max_retries = 1
reconnect_ms = 200
poll_ms = 500

[device mp]
type = multipath
devices = a b
policy = round-robin
queue_if_no_path = 20
retry_interval = 0.5

[export mp]
type = nbd
device = mp
listen = 127.0.0.1:$PORT
EOC
start_daemon "$T/d.ini"
NBD=nbd://127.0.0.1:$PORT

note "two paths live, unmap zeroing on (the bottom's file punches holes)"
mpath_live_paths mp 2 2
[[ $OUT == *"path0"*"a live"* && $OUT == *"path1"*"b live"* ]] ||
	fail "info paths: $OUT"
ctl 0 explain mp
[[ $OUT == *"mp (multipath"*"write_zeroes_unmap yes"*"every live path has it (2 live)"*"paths a live, b live"* ]] ||
	fail "explain: $OUT"
for ((i = 0; i < 50; i++)); do
	[[ $(nbd_flag "$NBD" can_fast_zero) == true ]] && break
	sleep 0.1
done
[[ $(nbd_flag "$NBD" can_fast_zero) == true ]] || fail "no fast zero over NBD"

note "bytes through both paths land in the bottom's file"
head -c 4M /dev/urandom >"$T/pat"
timeout 60 qemu-img convert -n -f raw -O raw "$T/pat" "$NBD" || fail "qemu-img convert"
cmp -n 4M "$T/pat" "$T/disk.img" || fail "disk.img differs from what was written"
ctl 0 info mp
[[ $OUT =~ path0[^$'\n']*ios\ [1-9] && $OUT =~ path1[^$'\n']*ios\ [1-9] ]] ||
	fail "round robin did not use both paths: $OUT"

note "fio verify while forwarder b is killed and restored three times"
# one bounded fio per round, so I/O is running when the path dies
for k in 1 2 3; do
	timeout 200 fio --name=mp --ioengine=nbd --uri="$NBD" --size=16M \
		--offset_increment=16M --numjobs=2 --iodepth=16 --rw=randwrite \
		--bsrange=4k-128k --verify=crc32c --verify_fatal=1 --do_verify=1 \
		--verify_state_save=0 --loops=4 --randseed=$k --output-format=json \
		--output="$T/fio-$k.json" &
	FIO=$!
	sleep 1
	stop_proxy xb
	# the path fails once a command on it runs into the sd timeout (3 s)
	# and its reconnects give up. fio may be done by now, and an idle dead
	# path fails nobody: reads keep going through the export (round robin
	# sends every other one to b) until b is failed
	mpath_wait_failed mp 1 b 40 mpath_reads "$NBD" -r ||
		fail "round $k: path b not failed after its forwarder died: $OUT"
	ctl 0 explain mp
	[[ $OUT == *"b failed (failures $k, last "* ]] ||
		fail "round $k: explain: $OUT"
	start_proxy xb "$XB"
	mpath_live_paths mp 2 2
	wait "$FIO" || { tail -40 "$T/fio-$k.json"; fail "round $k: fio failed"; }
	errs=$(jq '[.jobs[].error] | add' "$T/fio-$k.json")
	((errs == 0)) || fail "round $k: fio: error $errs"
done
ctl 0 info mp
note "$(grep -E 'path|retried|queue' <<<"$OUT" | tr -s ' ' | tr '\n' ';')"
[[ $OUT =~ path1[^$'\n']*failures\ ([0-9]+) ]] && ((BASH_REMATCH[1] >= 3)) ||
	fail "path b did not fail three times: $OUT"
[[ $OUT =~ retried[^0-9]*([0-9]+) ]] && ((BASH_REMATCH[1] >= 1)) ||
	fail "nothing retried on the other path: $OUT"
# not one request failed at the multipath (the paths' errors stay below)
[[ $OUT =~ $'\n'\ +errors\ +0($'\n'|$) ]] || fail "multipath errors: $OUT"
ctl 0 explain mp
[[ $OUT == *"write_zeroes_unmap yes"*"a live, b live (failures 3"* ]] ||
	fail "explain after the rounds: $OUT"

note "zeroing through the multipath frees the bottom's blocks"
before=$(allocated "$T/disk.img")
timeout 60 qemu-io -f raw "$NBD" -c "write -z -u 0 4M" -c "read -P 0 0 4M" \
	>"$T/q.log" 2>&1 || { cat "$T/q.log"; fail "qemu-io zero"; }
! grep -qi -e fail -e error "$T/q.log" || { cat "$T/q.log"; fail "qemu-io zero"; }
after=$(allocated "$T/disk.img")
((after + (2 << 20) <= before)) || fail "the bottom kept its blocks: $before -> $after"

stop_daemon
kill -TERM "${PID[bottom]}"
wait "${PID[bottom]}" || fail "the bottom blkstackd exited $?"
unset "PID[bottom]"
echo "PASS: mpath_sd"
