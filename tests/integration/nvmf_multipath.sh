#!/usr/bin/env bash
# The nvmf host driver's native multipath: one blkstackd device over two
# controllers (two listeners) of one namespace, exported over NBD.
#   - explain / info name every path and its state;
#   - fio verify (crc32c) runs while one listener is killed and restored
#     three times: zero I/O errors, data verified, the path rejoins;
#   - a third path to a namespace without DEAC (DLFEAT 0) clears
#     write_zeroes_unmap (NBD fast zero goes), and when it leaves the
#     device has it again;
#   - a path to another namespace (a different NGUID) is refused, naming
#     the field.
# Part 1: the target side is tests/integration/lib/nvmf_mini_target.py,
# one process per listener over one shared file, so a listener is killed
# and restored by its PID.
# Part 2 (skipped while blkstackd has no nvmf export type): blkstackd A
# exports a file over nvmf; two paths reach its one listener through two
# TCP forwarders (tests/integration/lib/tcp_proxy.py), one of which is
# killed and restored three times under fio verify; a third path goes to
# blkstackd C exporting the same file under the same subsystem and unit
# names (so the same namespace identifiers) with the knob off: DLFEAT 0,
# and the device loses write_zeroes_unmap until C stops.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
source "$(dirname "$0")/lib/procs.bash"
need python3 fio jq nbdinfo qemu-io
has_type nvmf || skip "blkstack built without the nvmf driver"
fio --enghelp=nbd >/dev/null 2>&1 || skip "fio has no nbd engine"
daemon_setup
daemon_threads 2

MINI="$(dirname "$0")/lib/nvmf_mini_target.py"
NQN=nqn.2026-12.org.blkstack:mp-$$
P1=$(free_port) P2=$(free_port) P3=$(free_port) P4=$(free_port)

cleanup() {
	tp_cleanup
	daemon_cleanup
}
trap cleanup EXIT

# start_tgt NAME PORT [args]: one listener, up within 5 s
start_tgt() {
	local name=$1 port=$2
	shift 2
	python3 "$MINI" --port "$port" --file "$T/ns.img" --nqn "$NQN" "$@" \
		>>"$T/tgt-$name.log" 2>&1 &
	TP[$name]=$!
	tp_listening "target $name" "$port"
}

stop_tgt() {
	tp_stop "$1"
}

truncate -s 64M "$T/ns.img"
start_tgt a "$P1"
start_tgt b "$P2"
U=nvme+tcp://127.0.0.1

cat >>"$T/d.ini" <<EOC
[device mp]
type = nvmf
url = $U:$P1/$NQN/1
url.2 = $U:$P2/$NQN/1
url.3 = $U:$P3/$NQN/1
url.4 = $U:$P4/$NQN/1
reconnect_ms = 200
timeout = 20
queues = 2
queue_depth = 16

[export mp]
type = nbd
device = mp
listen = 127.0.0.1:$PORT
EOC
start_daemon "$T/d.ini"
NBD=nbd://127.0.0.1:$PORT


note "two paths live, each named with its state"
paths_live mp 2
[[ $OUT == *"path.1"*":$P1/"*": live"* && $OUT == *"path.2"*":$P2/"*": live"* ]] ||
	fail "info paths: $OUT"
[[ $OUT == *"path.3"*": down"* ]] || fail "path 3 not down: $OUT"
ctl 0 explain mp
[[ $OUT == *"write_zeroes_unmap yes"*"every live path (2)"*"paths 1 live, 2 live, 3 down, 4 down"* ]] ||
	fail "explain: $OUT"
[[ $(nbd_flag "$NBD" can_fast_zero) == true ]] || fail "no fast zero over NBD"

note "bytes through both paths land in the shared namespace"
head -c 4M /dev/urandom >"$T/pat"
timeout 60 qemu-img convert -n -f raw -O raw "$T/pat" "$NBD" || fail "qemu-img convert"
cmp -n 4M "$T/pat" "$T/ns.img" || fail "ns.img differs from what was written"
ctl 0 info mp
[[ $OUT == *"write "*" / "[1-9]* ]] || fail "no writes counted: $OUT"

note "fio verify while listener b is killed and restored three times"
timeout 240 fio --name=mp --ioengine=nbd --uri="$NBD" --size=16M \
	--offset_increment=16M --numjobs=2 --iodepth=16 --rw=randwrite \
	--bsrange=4k-128k --verify=crc32c --verify_fatal=1 --do_verify=1 \
	--verify_state_save=0 --loops=6 --output-format=json \
	--output="$T/fio.json" &
FIO=$!
for k in 1 2 3; do
	sleep 1
	stop_tgt b
	sleep 1
	ctl 0 info mp
	[[ $OUT == *"path.2"*": down"* || $OUT == *"path.2"*": connecting"* ]] ||
		fail "round $k: path 2 not down after its listener died: $OUT"
	start_tgt b "$P2"
	paths_live mp 2
done
wait "$FIO" || { tail -40 "$T/fio.json"; fail "fio failed"; }
errs=$(jq '[.jobs[].error] | add' "$T/fio.json")
((errs == 0)) || fail "fio: error $errs"
ctl 0 info mp
[[ $OUT == *"errors"*" 0"* ]] || fail "device errors: $OUT"
[[ $OUT =~ path\.2[^$'\n']*lost\ ([0-9]+) ]] && ((BASH_REMATCH[1] >= 3)) ||
	fail "path 2 not lost three times: $OUT"

note "a path whose namespace lacks DEAC clears write_zeroes_unmap"
start_tgt c "$P3" --dlfeat 0
paths_live mp 3
ctl 0 explain mp
[[ $OUT == *"write_zeroes_unmap no"*"path.3 127.0.0.1:$P3 has no unmap zeroing"*"paths 1 live, 2 live, 3 live, 4 down"* ]] ||
	fail "explain with a DLFEAT 0 path: $OUT"
for ((i = 0; i < 50; i++)); do
	[[ $(nbd_flag "$NBD" can_fast_zero) == false ]] && break
	sleep 0.1
done
[[ $(nbd_flag "$NBD" can_fast_zero) == false ]] || fail "fast zero with a DLFEAT 0 path"
note "... and it leaving restores it"
stop_tgt c
paths_live mp 2
ctl 0 explain mp
[[ $OUT == *"write_zeroes_unmap yes"* ]] || fail "explain after the path left: $OUT"
for ((i = 0; i < 50; i++)); do
	[[ $(nbd_flag "$NBD" can_fast_zero) == true ]] && break
	sleep 0.1
done
[[ $(nbd_flag "$NBD" can_fast_zero) == true ]] || fail "fast zero not back"

note "an event: DLFEAT 0 on path 1's namespace reaches NBD within 5 s"
kill -USR1 "${TP[a]}"
for ((i = 0; i < 50; i++)); do
	[[ $(nbd_flag "$NBD" can_fast_zero) == false ]] && break
	sleep 0.1
done
[[ $(nbd_flag "$NBD" can_fast_zero) == false ]] || fail "fast zero kept after the event"
ctl 0 info mp
[[ $OUT == *"path.1"*"events 1"* && $OUT == *"path.1.facts"*"DLFEAT=0x00"* ]] ||
	fail "info after the event: $OUT"
kill -USR1 "${TP[a]}"
for ((i = 0; i < 50; i++)); do
	[[ $(nbd_flag "$NBD" can_fast_zero) == true ]] && break
	sleep 0.1
done
[[ $(nbd_flag "$NBD" can_fast_zero) == true ]] || fail "fast zero not back after the event"

note "a path to another namespace (NGUID differs) is refused, named"
start_tgt d "$P4" --nguid ffeeddccbbaa99887766554433221100
for ((i = 0; i < 50; i++)); do
	ctl 0 info mp
	[[ $OUT == *"path.4"*"refused: NGUID differs"* ]] && break
	sleep 0.1
done
[[ $OUT == *"path.4"*"refused: NGUID differs"* ]] || fail "path 4 not refused: $OUT"
[[ $OUT == *"(2 live)"* ]] || fail "refused path counted live: $OUT"
[[ $OUT =~ path\.4[^$'\n']*connects\ 0 ]] || fail "refused path connected: $OUT"
stop_tgt d

note "zeroing through the device: zeroes read back, blocks freed"
qemu-io -f raw "$NBD" -c "write -P 0x5a 32M 8M" >/dev/null || fail "qemu-io write"
before=$(allocated "$T/ns.img")
qemu-io -f raw "$NBD" -c "write -z -u 32M 8M" -c "read -P 0 32M 8M" >"$T/qio.log" 2>&1 ||
	{ cat "$T/qio.log"; fail "qemu-io zero"; }
! grep -qi -e fail -e error "$T/qio.log" || { cat "$T/qio.log"; fail "qemu-io zero"; }
is_zero "$T/ns.img" $((32 << 20)) $((8 << 20)) || fail "ns.img not zero"
after=$(allocated "$T/ns.img")
((after + (6 << 20) <= before)) || fail "blocks not freed: $before -> $after"

stop_daemon
stop_tgt a
stop_tgt b

# ---- part 2: blkstack's own target ----------------------------------------
PA=$(free_port) PC=$(free_port) X1=$(free_port) X2=$(free_port)
NQN2=nqn.2026-12.org.blkstack:mp2-$$

# start_bsd NAME PORT KNOB: a blkstackd exporting $T/ns2.img as "vol"
start_bsd() {
	local name=$1 port=$2 knob=$3 i
	cat >"$T/$name.ini" <<EOC
[daemon]
state_dir = $T/state-$name
control = $T/ctl-$name.sock
threads = 1

[device vol]
type = file
path = $T/ns2.img
write_zeroes_unmap = $knob
# two daemons on one file on purpose (only C's identify matters)
lock = 0

[export vol]
type = nvmf
device = vol
listen = 127.0.0.1:$port
nqn = $NQN2
EOC
	"$BSD" -f -c "$T/$name.ini" >>"$T/$name.log" 2>&1 &
	TP[$name]=$!
	for ((i = 0; i < 200; i++)); do
		if ! kill -0 "${TP[$name]}" 2>/dev/null; then
			unset "TP[$name]"
			grep -qi "unknown.*type\|type.*unknown" "$T/$name.log" &&
				{ echo "part 2 skipped: no nvmf export type"; echo PASS; exit 0; }
			cat "$T/$name.log" >&2
			fail "blkstackd $name exited while starting"
		fi
		grep -q 'ready:' "$T/$name.log" && return 0
		sleep 0.05
	done
	fail "blkstackd $name not ready"
}

truncate -s 64M "$T/ns2.img"
start_bsd bsd_a "$PA" 1
start_proxy x1 "$X1" "$PA"
start_proxy x2 "$X2" "$PA"
cat >"$T/d2.ini" <<EOC
[daemon]
state_dir = $T/state
control = $CTL

[device mp2]
type = nvmf
url = $U:$X1/$NQN2/1
url.2 = $U:$X2/$NQN2/1
url.3 = $U:$PC/$NQN2/1
reconnect_ms = 200
timeout = 20

[export mp2]
type = nbd
device = mp2
listen = 127.0.0.1:$PORT
EOC
start_daemon "$T/d2.ini"


note "blkstack's target: two paths through two forwarders, both live"
paths_live mp2 2
ctl 0 explain mp2
[[ $OUT == *"write_zeroes_unmap yes"*"every live path (2)"* ]] || fail "explain mp2: $OUT"

note "fio verify while forwarder x2 is killed and restored three times"
timeout 240 fio --name=mp2 --ioengine=nbd --uri="$NBD" --size=16M \
	--offset_increment=16M --numjobs=2 --iodepth=16 --rw=randwrite \
	--bsrange=4k-128k --verify=crc32c --verify_fatal=1 --do_verify=1 \
	--verify_state_save=0 --loops=6 --output-format=json \
	--output="$T/fio2.json" &
FIO=$!
for k in 1 2 3; do
	sleep 1
	stop_tgt x2
	sleep 1
	start_proxy x2 "$X2" "$PA"
	paths_live mp2 2
done
wait "$FIO" || { tail -40 "$T/fio2.json"; fail "fio (part 2) failed"; }
(($(jq '[.jobs[].error] | add' "$T/fio2.json") == 0)) || fail "fio (part 2) errors"
ctl 0 info mp2
[[ $OUT =~ path\.2[^$'\n']*lost\ ([0-9]+) ]] && ((BASH_REMATCH[1] >= 3)) ||
	fail "mp2 path 2 not lost three times: $OUT"

note "a path to a target whose device has the knob off: DLFEAT 0 clears it"
start_bsd bsd_c "$PC" 0
paths_live mp2 3
ctl 0 explain mp2
[[ $OUT == *"write_zeroes_unmap no"*"path.3 127.0.0.1:$PC has no unmap zeroing"*"paths 1 live, 2 live, 3 live"* ]] ||
	fail "explain mp2 with the knob-off path: $OUT"
stop_tgt bsd_c
paths_live mp2 2
ctl 0 explain mp2
[[ $OUT == *"write_zeroes_unmap yes"* ]] || fail "explain mp2 after C left: $OUT"

stop_daemon
for k in x1 x2 bsd_a; do
	stop_tgt "$k"
done
echo PASS
