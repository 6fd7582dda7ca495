#!/usr/bin/env bash
# The NVMe/TCP target takes its payload buffers from the server-wide
# in-flight budget ([daemon] max_inflight), as NBD, iSCSI and NFS do:
# - target A (max_inflight 64M) serves four libnvmf nvmf-fio runs of
#   1 MiB random reads and writes, two I/O queues of depth 32 each (256 MiB
#   asked for at once), two of them with header and data digests, its
#   writes by R2T (in_capsule = 16K);
# - at the same time fio verifies data written and read through daemon B
#   (its nvmf host driver, NBD in front), once without digests and once
#   with both, on a second subsystem of A (default in_capsule: writes
#   inside their capsules): every byte comes back;
# - A's budget peak never passed 64 MiB (plus the bounded in-capsule
#   bytes taken above it: one capsule's per queue at a time) and
#   requests did wait for it
#   (A logs both when it stops), no command failed, nobody was evicted.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
source "$(dirname "$0")/lib/nvmf_peers.bash"
need python3 make cc patch fio jq qemu-img
nvmf_peers
daemon_setup
has_type nvmf || skip "blkstack built without the nvmf driver"
nvmf_fio_build || skip "no libnvmf in $PEERS"
trap daemon_cleanup EXIT

PA=$(free_port)
PB=$(free_port)
NQA=nqn.2026-12.org.blkstack:budget-a-$$
NQB=nqn.2026-12.org.blkstack:budget-b-$$
LIMIT=$((64 << 20))
cat >"$T/a.ini" <<EOC
[daemon]
state_dir = $T/state-a
control = $T/ctl-a.sock
max_inflight = 64M

[device va]
type = file
path = $T/a.img
size = 128M

[device vb]
type = file
path = $T/b.img
size = 64M

[export sa]
type = nvmf
device = va
listen = 127.0.0.1:$PA
nqn = $NQA
# writes by R2T (granted once their bytes are held); sb keeps the
# default (1M: every write in its capsule, waiting at its header)
in_capsule = 16K

[export sb]
type = nvmf
device = vb
listen = 127.0.0.1:$PB
nqn = $NQB
EOC
start_other_daemon "$T/a.ini" "$T/a.log"
grep -q 'in-flight payload budget 64 MiB' "$T/a.log" || fail "A's budget not logged"

URL=nvme+tcp://127.0.0.1:$PB/$NQB/1
cat >>"$T/d.ini" <<EOC
[device r]
type = nvmf
url = $URL
timeout = 60

[device rd]
type = nvmf
url = $URL
hdgst = 1
ddgst = 1
timeout = 60

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
wait_live r
wait_live rd

note "four nvmf-fio runs, 1 MiB at depth 2 x 32 each, against a 64 MiB budget"
FURL=nvmf-tcp://127.0.0.1:$PA/$NQA/1
pids=()
i=0
for args in "--randrw" "--randwrite" "--randrw --hdgst --ddgst" \
	"--randread --hdgst --ddgst"; do
	# shellcheck disable=SC2086
	timeout 90 "$FIO" --filename="$FURL" $args --bs=1048576 --ioqueues=2 \
		--iodepth=32 --runtime=8 >"$T/nf$i.out" 2>&1 &
	pids+=($!)
	i=$((i + 1))
done

note "meanwhile fio verifies through B, without and with digests"
fio_verify() { # NAME URI OFFSET
	timeout 240 fio --name="$1" --ioengine=nbd --uri="$2" --size=24M \
		--offset="$3" --iodepth=16 --rw=randwrite --bsrange=4k-1m \
		--verify=crc32c --verify_fatal=1 --do_verify=1 \
		--verify_state_save=0 --output-format=json \
		--output="$T/$1.json" ||
		{ tail -30 "$T/$1.json"; tail -30 "$T/a.log"; fail "fio $1 failed"; }
	(($(jq '[.jobs[].error] | add' "$T/$1.json") == 0)) || fail "fio $1 errors"
}
fio_verify plain "nbd://127.0.0.1:$PORT" 0
fio_verify digests "nbd+unix:///?socket=$T/nbd.sock" 32M

i=0
for pid in "${pids[@]}"; do
	wait "$pid" || { cat "$T/nf$i.out" >&2; tail -30 "$T/a.log"; fail "nvmf-fio run $i"; }
	grep -q 'IOPS [0-9]' "$T/nf$i.out" ||
		{ cat "$T/nf$i.out" >&2; fail "nvmf-fio run $i: no I/O"; }
	i=$((i + 1))
done

note "bytes through B are in A's file"
head -c 8M /dev/urandom >"$T/pat"
timeout 60 qemu-img convert -n -f raw -O raw "$T/pat" "nbd://127.0.0.1:$PORT" ||
	fail "qemu-img convert"
stop_daemon
cmp -n 8M "$T/pat" "$T/b.img" || fail "b.img differs from what was written through B"

stop_other_daemon "$T/a.log"
line=$(grep 'in-flight payload budget: peak' "$T/a.log") ||
	{ tail -20 "$T/a.log"; fail "A logged no budget peak"; }
echo "$line"
read -r peak limit waits over < <(sed -E 's/.*peak ([0-9]+) bytes of ([0-9]+), ([0-9]+) requests waited, ([0-9]+) bytes taken above it.*/\1 \2 \3 \4/' <<<"$line")
((limit == LIMIT)) || fail "budget limit $limit, not $LIMIT"
# in-capsule data ahead of a granted R2T's data goes above the limit:
# one capsule's (at most in_capsule: 16K on sa; sb's writes never wait
# for an R2T) per queue at a time (at most 6 I/O queues here)
echo "$over bytes taken above the limit in all"
((peak <= LIMIT + 16384 * 6)) || fail "budget peak $peak above the limit $LIMIT"
# 256 MiB asked for at once: without the target's accounting nothing waits
((peak > LIMIT / 2 && waits > 0)) || fail "the budget was not used (peak $peak, $waits waits)"
grep 'close .* queue [1-9]' "$T/a.log" | grep -v ' 0 errors' &&
	fail "commands failed on A"
grep -q 'no progress for' "$T/a.log" && fail "a queue was evicted"
echo PASS
