#!/usr/bin/env bash
# The nvmf host driver against blkstack's own NVMe/TCP target: blkstackd A
# exports a file device over nvmf; blkstackd B has an nvmf device on it,
# exported over NBD.
#   - B's info/explain show DLFEAT 0x09, ONCS and the decision; NBD
#     offers fast zero;
#   - bytes written through B's NBD export are in A's backing file;
#   - fio verify (crc32c, bounded) through B's NBD export, and with
#     header and data digests on a second device;
#   - the knob flip at A (queue/write_zeroes_unmap 0, then 1) reaches B's
#     info and an NBD client's can_fast_zero within 5 s (the target's
#     Namespace Attribute Changed event, B re-identifies and restacks).
# Skips while blkstackd has no nvmf export type (the target is built in
# another branch); nvmf_multipath.sh covers the driver against a stand-in.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need python3 fio jq nbdinfo qemu-io qemu-img
has_type nvmf || skip "blkstack built without the nvmf driver"
fio --enghelp=nbd >/dev/null 2>&1 || skip "fio has no nbd engine"
daemon_setup
daemon_threads 2

APID=
PA=$(free_port)
CTLA=$T/ctl-a.sock
NQN=nqn.2026-12.org.blkstack:host-test-$$

cleanup() {
	if [[ -n $APID ]]; then
		kill -KILL "$APID" 2>/dev/null || true
		wait "$APID" 2>/dev/null || true
	fi
	daemon_cleanup
}
trap cleanup EXIT

truncate -s 64M "$T/a.img"
cat >"$T/a.ini" <<EOC
[daemon]
state_dir = $T/state-a
control = $CTLA

[device vol]
type = file
path = $T/a.img

[export vol]
type = nvmf
device = vol
listen = 127.0.0.1:$PA
nqn = $NQN
EOC
"$BSD" -f -c "$T/a.ini" >>"$T/a.log" 2>&1 &
APID=$!
for ((i = 0; i < 200; i++)); do
	if ! kill -0 "$APID" 2>/dev/null; then
		APID=
		grep -qi "unknown.*type\|type.*unknown\|no export type" "$T/a.log" &&
			skip "blkstackd has no nvmf export type yet"
		cat "$T/a.log" >&2
		fail "blkstackd A exited while starting"
	fi
	grep -q 'ready:' "$T/a.log" && break
	sleep 0.05
done
grep -q 'ready:' "$T/a.log" || fail "blkstackd A not ready after 10 s"

URL=nvme+tcp://127.0.0.1:$PA/$NQN/1
cat >>"$T/d.ini" <<EOC
[device r]
type = nvmf
url = $URL
reconnect_ms = 200
timeout = 20

[device rd]
type = nvmf
url = $URL
hdgst = 1
ddgst = 1
queues = 1

[export r]
type = nbd
device = r
listen = 127.0.0.1:$PORT

[export rd]
type = nbd
device = rd
socket = $T/nbd.sock
EOC
start_daemon "$T/d.ini"
NBD=nbd://127.0.0.1:$PORT
NBDD="nbd+unix:///?socket=$T/nbd.sock"

note "B reads the target's facts: DLFEAT 0x09, unmap zeroing"
for ((i = 0; i < 50; i++)); do
	ctl 0 info r
	[[ $OUT == *"state"*"live"* ]] && break
	sleep 0.1
done
[[ $OUT == *"path.1.facts"*"DLFEAT=0x09"* ]] || fail "info r: $OUT"
ctl 0 explain r
[[ $OUT == *"write_zeroes_unmap yes"*"DLFEAT=0x09"*"ONCS="* ]] || fail "explain r: $OUT"
[[ $(nbd_flag "$NBD" can_fast_zero) == true ]] || fail "no fast zero over NBD"

note "bytes through B land in A's file"
head -c 8M /dev/urandom >"$T/pat"
timeout 60 qemu-img convert -n -f raw -O raw "$T/pat" "$NBD" || fail "qemu-img convert"
cmp -n 8M "$T/pat" "$T/a.img" || fail "a.img differs from what was written through B"

note "fio verify through B (crc32c, 2 jobs x qd16)"
timeout 180 fio --name=h --ioengine=nbd --uri="$NBD" --size=16M \
	--offset_increment=16M --numjobs=2 --iodepth=16 --rw=randwrite \
	--bsrange=4k-256k --verify=crc32c --verify_fatal=1 --do_verify=1 \
	--verify_state_save=0 --output-format=json --output="$T/fio.json" ||
	{ tail -30 "$T/fio.json"; fail "fio failed"; }
(($(jq '[.jobs[].error] | add' "$T/fio.json") == 0)) || fail "fio errors"

note "with header and data digests"
timeout 120 fio --name=hd --ioengine=nbd --uri="$NBDD" --size=8M \
	--offset=48M --iodepth=8 --rw=randwrite --bsrange=4k-128k \
	--verify=crc32c --verify_fatal=1 --do_verify=1 --verify_state_save=0 \
	--output-format=json --output="$T/fio2.json" ||
	{ tail -30 "$T/fio2.json"; fail "fio with digests failed"; }
ctl 0 info rd
[[ $OUT == *"digests header on data on"* ]] || fail "digests not on: $OUT"
[[ $OUT == *"path.1.transport"*"digests agreed: header on data on"* ]] ||
	fail "digests not agreed: $OUT"

note "zeroing through B frees A's blocks"
before=$(allocated "$T/a.img")
timeout 60 qemu-io -f raw "$NBD" -c "write -z -u 0 8M" -c "read -P 0 0 8M" \
	>"$T/qio.log" 2>&1 || { cat "$T/qio.log"; fail "qemu-io zero"; }
after=$(allocated "$T/a.img")
((after + (6 << 20) <= before)) || fail "a.img kept its blocks: $before -> $after"

note "knob off at A reaches B and NBD within 5 s"
run_bs 0 -s "$CTLA" attr vol queue/write_zeroes_unmap 0
for ((i = 0; i < 50; i++)); do
	[[ $(nbd_flag "$NBD" can_fast_zero) == false ]] && break
	sleep 0.1
done
[[ $(nbd_flag "$NBD" can_fast_zero) == false ]] || fail "fast zero kept after the knob"
ctl 0 info r
[[ $OUT == *"path.1.facts"*"DLFEAT=0x00"* && $OUT == *"events "[1-9]* ]] ||
	fail "info r after the knob: $OUT"
ctl 0 explain r
[[ $OUT == *"write_zeroes_unmap no"*"DLFEAT=0x00"* ]] || fail "explain after the knob: $OUT"
note "... and on again"
run_bs 0 -s "$CTLA" attr vol queue/write_zeroes_unmap 1
for ((i = 0; i < 50; i++)); do
	[[ $(nbd_flag "$NBD" can_fast_zero) == true ]] && break
	sleep 0.1
done
[[ $(nbd_flag "$NBD" can_fast_zero) == true ]] || fail "fast zero not back"

stop_daemon
kill -TERM "$APID"
wait "$APID" || fail "blkstackd A exited $?"
APID=
echo PASS
