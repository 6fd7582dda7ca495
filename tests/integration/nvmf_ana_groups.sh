#!/usr/bin/env bash
# ANA groups and ANATT (issue 14): blkstack's NVMe/TCP target with
# namespaces in different ANA groups, a state per port and group, and
# blkstack's nvmf host driver with one multipath device per namespace.
#   - export s0: ns 1 in group 1, ns 2 in group 2 (ana_group.2 = 2);
#     port 1 optimized for group 1 and non-optimized for group 2, port 2
#     the opposite (ana_state.N.G); `blkstack ana-state` shows and sets
#     them per group; pynvmeof reads ANAGRPMAX/NANAGRPID 2 and both
#     groups in the log;
#   - the host's device of ns 1 sends its I/O to port 1, that of ns 2 to
#     port 2 (per-path command counts); a group's state changed on one
#     port moves only that namespace's device;
#   - export s1: 128 namespaces in 128 groups, an ANA log of 4624 bytes
#     (past 4 KiB); the host's device of ns 128 (the log's last group)
#     sees port 1 non-optimized and port 2 optimized;
#   - ANATT 2 s: group 1 on port 1 set to change and never cleared: the
#     host fails that path within ANATT + slack (lost to ANATT) while fio
#     verify runs on ns 1's device without an error, and takes the path
#     back once the group is optimized again.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
source "$(dirname "$0")/lib/nvmf_ana.bash"
need python3 fio jq qemu-io
has_type nvmf || skip "blkstack built without the nvmf driver"
fio --enghelp=nbd >/dev/null 2>&1 || skip "fio has no nbd engine"
nvmf_peers
daemon_setup
daemon_threads 2

P1=$(free_port) P2=$(free_port) P3=$(free_port) P4=$(free_port)
NQN=nqn.2026-12.org.blkstack:grp-$$
NQN1=nqn.2026-12.org.blkstack:big-$$
TCTL=$T/tctl.sock

truncate -s 64M "$T/ns1.img" "$T/ns2.img"
{
	cat <<EOC
[daemon]
state_dir = $T/tstate
control = $TCTL
threads = 2

[device vol1]
type = file
path = $T/ns1.img

[device vol2]
type = file
path = $T/ns2.img

[export s0]
type = nvmf
unit.a = vol1
unit.b = vol2
nqn = $NQN
listen = 127.0.0.1:$P1
listen.2 = 127.0.0.1:$P2
ana_group.2 = 2
ana_state.1.2 = non-optimized
ana_state.2 = non-optimized
ana_state.2.2 = optimized
anatt = 2

EOC
	for ((k = 1; k <= 128; k++)); do
		printf '[device m%d]\ntype = mem\nsize = 1M\n\n' "$k"
	done
	printf '[export s1]\ntype = nvmf\nnqn = %s\nlisten = 127.0.0.1:%s\n' \
		"$NQN1" "$P3"
	printf 'listen.2 = 127.0.0.1:%s\n' "$P4"
	for ((k = 1; k <= 128; k++)); do
		printf 'unit.n%d = m%d\nana_group.%d = %d\n' "$k" "$k" "$k" "$k"
	done
	printf 'ana_state.1.128 = non-optimized\nana_state.2 = non-optimized\n'
	printf 'ana_state.2.128 = optimized\n'
} >"$T/t.ini"
start_other_daemon "$T/t.ini" "$T/t.log"


note "ana-state: one line a port and group"
tctl 0 ana-state s0
want="port.1.1 127.0.0.1:$P1 optimized
port.1.2 127.0.0.1:$P1 non-optimized
port.2.1 127.0.0.1:$P2 non-optimized
port.2.2 127.0.0.1:$P2 optimized"
[[ $OUT == *"$want"* ]] || fail "ana-state: $OUT"
tctl 1 ana-state s0 1 optimized 3
[[ $ERR == *"no ANA group '3'"* ]] || fail "group 3: $ERR"
grep -q "port 1 on 127.0.0.1:$P1, ANA group 1 optimized, group 2 non-optimized, 2 namespaces" "$T/t.log" ||
	fail "start log: $(cat "$T/t.log")"

if [[ -d $PYNVMEOF/src ]]; then
	note "pynvmeof: ANAGRPMAX/NANAGRPID 2, both groups in port 2's log"
	out=$($PY "$P2" "$NQN" ana) || fail "pynvmeof ana: $out"
	echo "$out"
	[[ $out == *"anatt=2 anagrpmax=2 nanagrpid=2 anagrpid=1 chgcnt=0"* ]] ||
		fail "Identify ANA fields: $out"
	[[ $out == *"group=1 state=NON_OPTIMIZED nsids=[1]"*"group=2 state=OPTIMIZED nsids=[2]"*"read ok"* ]] ||
		fail "ANA log: $out"
else
	echo "pynvmeof part skipped: no pynvmeof in $PEERS"
fi

# mpdev NAME PORT1 PORT2 NQN NSID: a host device over both ports
mpdev() {
	printf '[device %s]\ntype = nvmf\n' "$1"
	printf 'url = nvme+tcp://127.0.0.1:%s/%s/%s\n' "$2" "$4" "$5"
	printf 'url.2 = nvme+tcp://127.0.0.1:%s/%s/%s\n' "$3" "$4" "$5"
	printf 'reconnect_ms = 200\ntimeout = 30\nqueues = 2\n'
	printf 'queue_depth = 16\n\n'
}
{
	mpdev mp1 "$P1" "$P2" "$NQN" 1
	mpdev mp2 "$P1" "$P2" "$NQN" 2
	mpdev big "$P3" "$P4" "$NQN1" 128
} >>"$T/d.ini"
cat >>"$T/d.ini" <<EOC
[export t]
type = nbd
unit.mp1 = mp1
unit.mp2 = mp2
listen = 127.0.0.1:$PORT
EOC
start_daemon "$T/d.ini"
NBD=nbd://127.0.0.1:$PORT

# readall DEV: qemu-io reads 8 MiB of DEV through NBD
readall() {
	qemu-io -f raw "$NBD/$1" -c "read 0 8M" >"$T/qio.log" 2>&1 &&
		! grep -qi -e fail -e error "$T/qio.log" || { cat "$T/qio.log"; fail "read $1"; }
}

note "each namespace's device picks the port optimized for its group"
for d in mp1 mp2 big; do
	for ((i = 0; i < 100; i++)); do
		ctl 0 info $d
		[[ $OUT == *"(2 live)"* ]] && break
		sleep 0.1
	done
	[[ $OUT == *"(2 live)"* ]] || fail "$d: not two live paths: $OUT"
done
path_ana mp1 1 optimized
path_ana mp1 2 non-optimized
path_ana mp2 1 non-optimized
path_ana mp2 2 optimized
ctl 0 explain mp1
[[ $OUT == *"paths 1 live/optimized, 2 live/non-optimized"* ]] || fail "explain mp1: $OUT"
ctl 0 explain mp2
[[ $OUT == *"paths 1 live/non-optimized, 2 live/optimized"* ]] || fail "explain mp2: $OUT"
a1=$(path_cmds mp1 1) a2=$(path_cmds mp1 2)
readall mp1
b1=$(path_cmds mp1 1) b2=$(path_cmds mp1 2)
((b1 > a1 && b2 == a2)) || fail "mp1 not on path 1: $a1 -> $b1, $a2 -> $b2"
a1=$(path_cmds mp2 1) a2=$(path_cmds mp2 2)
readall mp2
b1=$(path_cmds mp2 1) b2=$(path_cmds mp2 2)
((b1 == a1 && b2 > a2)) || fail "mp2 not on path 2: $a1 -> $b1, $a2 -> $b2"

note "128 groups: a 4624-byte ANA log, read whole; ns 128's group found"
path_ana big 1 non-optimized
path_ana big 2 optimized
[[ $OUT =~ path\.1\.ana[^$'\n']*group\ 128,[^$'\n']*log\ 4624\ bytes ]] ||
	fail "big: log not read whole: $OUT"

note "group 1 inaccessible on port 1 only: mp1 moves to port 2, mp2 stays"
tctl 0 ana-state s0 1 inaccessible 1
[[ $OUT == *"port.1.1 127.0.0.1:$P1 inaccessible"*"port.1.2 127.0.0.1:$P1 non-optimized"* ]] ||
	fail "set group 1: $OUT"
path_ana mp1 1 inaccessible
path_ana mp1 2 non-optimized
path_ana mp2 1 non-optimized
a1=$(path_cmds mp1 1) a2=$(path_cmds mp1 2)
readall mp1
b1=$(path_cmds mp1 1) b2=$(path_cmds mp1 2)
((b1 == a1 && b2 > a2)) || fail "mp1 not on path 2: $a1 -> $b1, $a2 -> $b2"
tctl 0 ana-state s0 1 optimized 1
path_ana mp1 1 optimized

note "ANATT 2 s: group 1 in change on port 1, never cleared, under fio verify"
touch "$T/go"
(
	n=0
	while [[ -e $T/go ]] && ((n < 40)); do
		timeout 120 fio --name=anatt --ioengine=nbd --uri="$NBD/mp1" \
			--size=8M --iodepth=16 --rw=randwrite --bsrange=4k-64k \
			--verify=crc32c --verify_fatal=1 --do_verify=1 \
			--verify_state_save=0 --output-format=json \
			--output="$T/fio.$n.json" || { echo "fio run $n failed" >"$T/fio.fail"; exit 1; }
		n=$((n + 1))
	done
	echo "$n" >"$T/fio.runs"
) &
FIO=$!
# a failure below: the fio loop goes with the daemons
trap 'rm -f "$T/go"; kill "$FIO" 2>/dev/null || true; wait "$FIO" 2>/dev/null || true; daemon_cleanup' EXIT
sleep 1
tctl 0 ana-state s0 1 change 1
start=$(date +%s)
path_ana mp1 1 change
# within ANATT (2 s) + 5 s of slack the path is lost for it
ok=
for ((i = 0; i < 70; i++)); do
	ctl 0 info mp1
	if [[ $OUT =~ path\.1\.ana[^$'\n']*lost\ to\ ANATT\ ([0-9]+) ]] &&
		((BASH_REMATCH[1] >= 1)); then
		ok=1
		break
	fi
	sleep 0.1
done
[[ -n $ok ]] || fail "path 1 not failed within ANATT + 5 s: $OUT"
el=$(($(date +%s) - start))
echo "path 1 failed for ANATT after ${el} s"
# a loss of the path (it reconnects after reconnect_ms, which clears
# the reason "ANA state change for more than ANATT (2 s)")
[[ $OUT =~ path\.1\ [^$'\n']*lost\ [1-9] ]] || fail "path 1 not lost: $OUT"
# ns 2's device does not care
path_ana mp2 1 non-optimized
sleep 3
tctl 0 ana-state s0 1 optimized 1
path_ana mp1 1 optimized
sleep 1
rm -f "$T/go"
wait "$FIO" || { cat "$T/fio.fail" 2>/dev/null; tail -30 "$T"/fio.*.json; fail "fio failed"; }
trap daemon_cleanup EXIT
runs=$(cat "$T/fio.runs")
((runs >= 1)) || fail "no fio run finished"
for ((n = 0; n < runs; n++)); do
	errs=$(jq '[.jobs[].error] | add' "$T/fio.$n.json")
	((errs == 0)) || fail "fio run $n: error $errs"
done
echo "fio: $runs verified runs"
ctl 0 info mp1
[[ $OUT == *"errors"*" 0"* ]] || fail "device errors: $OUT"
ctl 0 explain mp1
[[ $OUT == *"paths 1 live/optimized, 2 live/non-optimized"* ]] || fail "explain mp1 after: $OUT"

stop_daemon
stop_other_daemon "$T/t.log"
echo PASS
