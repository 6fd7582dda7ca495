#!/usr/bin/env bash
# fio's nbd engine against blkstackd: random and sequential writes with
# crc32c verification, several jobs (each its own NBD connection) and
# several requests in flight per connection. Then the same stack over a
# UNIX socket, and a graceful stop while fio still runs.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need fio jq python3
fio --enghelp=nbd >/dev/null 2>&1 || skip "fio has no nbd engine"
daemon_setup
cat >>"$T/d.ini" <<EOC
[device disk]
type = file
path = $T/disk.img
size = 512M

[device ram]
type = mem
size = 256M

[export disk]
type = nbd
device = disk
listen = 127.0.0.1:$PORT

[export ram]
type = nbd
device = ram
socket = $T/nbd.sock
EOC
start_daemon "$T/d.ini"

# run_fio NAME URI SIZE ARGS...: bounded in size and time, fails on any error
run_fio() {
	local name=$1 uri=$2 size=$3
	shift 3
	timeout 120 fio --name="$name" --ioengine=nbd --uri="$uri" \
		--size="$size" --runtime=20 --time_based=0 \
		--output-format=json --output="$T/$name.json" --verify_state_save=0 "$@" ||
		{ cat "$T/$name.json" 2>/dev/null | tail -40; fail "fio $name failed"; }
	local errs
	errs=$(jq '[.jobs[].error] | add' "$T/$name.json")
	((errs == 0)) || fail "fio $name: error $errs"
	note "$name: $(jq -r '[.jobs[] | .write.io_bytes + .read.io_bytes] | add' "$T/$name.json") bytes moved"
}

U=nbd://127.0.0.1:$PORT
note "random 4k..64k writes, 4 jobs x qd16, verify crc32c"
run_fio randw "$U/disk" 64M --rw=randwrite --bsrange=4k-64k --iodepth=16 \
	--numjobs=4 --offset_increment=64M --verify=crc32c --verify_fatal=1 \
	--do_verify=1
note "sequential 1M writes, 2 jobs x qd8, verify crc32c"
run_fio seqw "$U/disk" 128M --rw=write --bs=1M --iodepth=8 --numjobs=2 \
	--offset_increment=128M --verify=crc32c --verify_fatal=1 --do_verify=1
note "mixed random read/write on a RAM disk over the UNIX socket"
run_fio mixed "nbd+unix:///ram?socket=$T/nbd.sock" 32M --rw=randrw \
	--bs=4k --iodepth=32 --numjobs=4 --offset_increment=32M \
	--verify=crc32c --verify_fatal=1 --do_verify=1

note "SIGTERM while fio writes: the daemon drains, flushes and exits 0"
timeout 60 fio --name=bg --ioengine=nbd --uri="$U/disk" --size=64M \
	--rw=randwrite --bs=64k --iodepth=16 --runtime=30 --time_based=1 \
	--output="$T/bg.out" >/dev/null 2>&1 &
FPID=$!
sleep 2
stop_daemon
wait "$FPID" 2>/dev/null || true
grep -q 'SIGTERM: stopping' "$T/d.log" || fail "no stop line in the log"
grep -q 'stopped' "$T/d.log" || fail "no 'stopped' line in the log"
echo "PASS"
