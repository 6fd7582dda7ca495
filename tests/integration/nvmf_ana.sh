#!/usr/bin/env bash
# Asymmetric Namespace Access (issue 14): blkstack's NVMe/TCP target with
# one subsystem on two listeners (ports), and blkstack's nvmf host driver
# with a multipath device over both.
#   - pynvmeof (a client we did not write) reads Identify (CMIC bit 3,
#     ANACAP, ANATT, ANAGRPMAX, NANAGRPID, ANAGRPID 1) and the ANA log of
#     each port; `blkstack ana-state` sets port 2 inaccessible: its log
#     says so, a Read there gets a path status, port 1 still serves;
#   - the host device (two paths, exported over NBD) runs fio verify
#     while port 2 flips inaccessible and back three times: zero I/O
#     errors, data verified; info and explain name each path's state;
#   - with both ports inaccessible a write waits, and completes once a
#     port is optimized again (no error);
#   - port 1 non-optimized, port 2 optimized: reads go to port 2 only.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
source "$(dirname "$0")/lib/nvmf_ana.bash"
need python3 fio jq qemu-io
has_type nvmf || skip "blkstack built without the nvmf driver"
fio --enghelp=nbd >/dev/null 2>&1 || skip "fio has no nbd engine"
nvmf_peers
daemon_setup
daemon_threads 2

P1=$(free_port) P2=$(free_port)
# the target: its own blkstackd, one file, ports 1 and 2
nvmf_target_start ana "$P1" "$P2"


note "ana-state shows both ports optimized (ana on: two listeners)"
tctl 0 ana-state s0
[[ $OUT == *"port.1 127.0.0.1:$P1 optimized"*"port.2 127.0.0.1:$P2 optimized"* ]] ||
	fail "ana-state: $OUT"
tctl 1 ana-state s0 3 optimized
[[ $ERR == *"no port '3'"* ]] || fail "port 3: $ERR"
tctl 1 ana-state s0 2 sideways
[[ $ERR == *"not an ANA state"* ]] || fail "bad state: $ERR"

if [[ -d $PYNVMEOF/src ]]; then
	note "pynvmeof: Identify ANA fields and the ANA log of port 1"
	out=$($PY "$P1" "$NQN" ana) || fail "pynvmeof ana: $out"
	echo "$out"
	[[ $out == *"cmic=11 anacap=95 anatt=10 anagrpmax=1 nanagrpid=1 anagrpid=1 chgcnt=0"* ]] ||
		fail "Identify ANA fields: $out"
	[[ $out == *"group=1 state=OPTIMIZED nsids=[1]"*"read ok"* ]] || fail "ANA log: $out"
	note "pynvmeof: port 2 inaccessible: its log says so, a Read gets a path status"
	tctl 0 ana-state s0 2 inaccessible
	[[ $OUT == *"port.2 127.0.0.1:$P2 inaccessible"* ]] || fail "set: $OUT"
	out=$($PY "$P2" "$NQN" ana) || fail "pynvmeof ana port 2: $out"
	echo "$out"
	[[ $out == *"chgcnt=1"*"group=1 state=INACCESSIBLE"* ]] || fail "port 2 log: $out"
	[[ $out == *"read status="* && $out != *"read ok"* ]] || fail "Read on port 2: $out"
	out=$($PY "$P1" "$NQN" ana) || fail "pynvmeof ana port 1: $out"
	[[ $out == *"state=OPTIMIZED"*"read ok"* ]] || fail "port 1 after: $out"
	tctl 0 ana-state s0 2 optimized
else
	echo "pynvmeof part skipped: no pynvmeof in $PEERS"
fi

# the host: a multipath device over both ports, exported over NBD
U=nvme+tcp://127.0.0.1
cat >>"$T/d.ini" <<EOC
[device mp]
type = nvmf
url = $U:$P1/$NQN/1
url.2 = $U:$P2/$NQN/1
reconnect_ms = 200
timeout = 30
queues = 2
queue_depth = 16

[export mp]
type = nbd
device = mp
listen = 127.0.0.1:$PORT
EOC
start_daemon "$T/d.ini"
NBD=nbd://127.0.0.1:$PORT


note "two paths live, both optimized; explain names the states"
for ((i = 0; i < 50; i++)); do
	ctl 0 info mp
	[[ $OUT == *"(2 live)"* ]] && break
	sleep 0.1
done
[[ $OUT == *"(2 live)"* ]] || fail "not two live paths: $OUT"
path_ana mp 1 optimized
path_ana mp 2 optimized
ctl 0 explain mp
[[ $OUT == *"paths 1 live/optimized, 2 live/optimized"* ]] || fail "explain: $OUT"

note "fio verify while port 2 flips inaccessible and back three times"
timeout 240 fio --name=ana --ioengine=nbd --uri="$NBD" --size=16M \
	--offset_increment=16M --numjobs=2 --iodepth=16 --rw=randwrite \
	--bsrange=4k-128k --verify=crc32c --verify_fatal=1 --do_verify=1 \
	--verify_state_save=0 --loops=6 --output-format=json \
	--output="$T/fio.json" &
FIO=$!
for k in 1 2 3; do
	sleep 1
	tctl 0 ana-state s0 2 inaccessible
	path_ana mp 2 inaccessible
	ctl 0 explain mp
	[[ $OUT == *"paths 1 live/optimized, 2 live/inaccessible"* ]] ||
		fail "round $k: explain: $OUT"
	sleep 1
	tctl 0 ana-state s0 2 optimized
	path_ana mp 2 optimized
done
wait "$FIO" || { tail -40 "$T/fio.json"; fail "fio failed"; }
errs=$(jq '[.jobs[].error] | add' "$T/fio.json")
((errs == 0)) || fail "fio: error $errs"
ctl 0 info mp
[[ $OUT =~ path\.2\.ana[^$'\n']*states\ seen\ ([0-9]+) ]] && ((BASH_REMATCH[1] >= 7)) ||
	fail "path 2 did not see the states change: $OUT"
[[ $OUT =~ path\.2\ [^$'\n']*lost\ 0 ]] || fail "path 2 was lost (ANA is not a loss): $OUT"

note "both ports inaccessible: a write waits, then completes on port 1"
tctl 0 ana-state s0 2 inaccessible
tctl 0 ana-state s0 1 inaccessible
path_ana mp 1 inaccessible
path_ana mp 2 inaccessible
head -c 1M /dev/urandom >"$T/pat"
timeout 60 qemu-io -f raw "$NBD" -c "write -P 0x3c 40M 1M" >"$T/qio.log" 2>&1 &
QIO=$!
sleep 2
kill -0 "$QIO" 2>/dev/null || { cat "$T/qio.log"; fail "the write did not wait for a path"; }
tctl 0 ana-state s0 1 optimized
wait "$QIO" || { cat "$T/qio.log"; fail "qemu-io write"; }
! grep -qi -e fail -e error "$T/qio.log" || { cat "$T/qio.log"; fail "qemu-io write"; }
qemu-io -f raw "$NBD" -c "read -P 0x3c 40M 1M" >"$T/qio.log" 2>&1 &&
	! grep -qi -e fail -e error "$T/qio.log" || { cat "$T/qio.log"; fail "read back"; }
ctl 0 explain mp
[[ $OUT == *"paths 1 live/optimized, 2 live/inaccessible"* ]] || fail "explain: $OUT"

note "port 1 non-optimized, port 2 optimized: reads go to port 2"
tctl 0 ana-state s0 2 optimized
tctl 0 ana-state s0 1 non-optimized
path_ana mp 1 non-optimized
path_ana mp 2 optimized
a1=$(path_cmds mp 1) a2=$(path_cmds mp 2)
qemu-io -f raw "$NBD" -c "read 0 8M" >"$T/qio.log" 2>&1 &&
	! grep -qi -e fail -e error "$T/qio.log" || { cat "$T/qio.log"; fail "read"; }
b1=$(path_cmds mp 1) b2=$(path_cmds mp 2)
((b1 == a1)) || fail "path 1 (non-optimized) got commands: $a1 -> $b1"
((b2 > a2)) || fail "path 2 (optimized) got no commands: $a2 -> $b2"
note "... and with port 2 inaccessible, to port 1 (non-optimized is used when alone)"
tctl 0 ana-state s0 2 inaccessible
path_ana mp 2 inaccessible
qemu-io -f raw "$NBD" -c "read 0 8M" >"$T/qio.log" 2>&1 &&
	! grep -qi -e fail -e error "$T/qio.log" || { cat "$T/qio.log"; fail "read"; }
c1=$(path_cmds mp 1) c2=$(path_cmds mp 2)
((c1 > b1 && c2 == b2)) || fail "not on path 1: $b1 -> $c1, $b2 -> $c2"
ctl 0 info mp
[[ $OUT == *"errors"*" 0"* ]] || fail "device errors: $OUT"

stop_daemon
stop_other_daemon "$T/t.log"
echo PASS
