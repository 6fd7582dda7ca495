#!/usr/bin/env bash
# Issue 12, "What must hold": fio verify (crc32c, verify_fatal) over many
# NBD connections into one mirror served by blkstackd, with trims in the
# mix and a second client doing write-zeroes (may-unmap and NOUNMAP) on a
# range of its own; mid-run the write_zeroes_unmap knob is flipped (on a
# leg and on the mirror) and one mirror leg starts failing every request.
# fio must report no error, every block must verify (trimmed and zeroed
# ones as zeroes), and the mirror must say it is degraded.
#
# With a blkstackd that knows `threads = N` the daemon runs 4 I/O threads,
# so the 9 connections are spread over them; without it, the one loop
# serves them all (the test is the same).
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need fio jq qemu-io
fio --enghelp=nbd >/dev/null 2>&1 || skip "fio has no nbd engine"
has_type mirror || skip "no mirror mapper in this build"
has_type error || skip "no error mapper in this build"
daemon_setup
daemon_threads 4
FPID= ZLPID=
# fio runs under timeout(1), which passes our TERM on to it; the
# write-zeroes loop ends by itself within a round once the daemon is gone
# (each step || true: under set -e a failing step would end the trap)
trap 'for p in $FPID $ZLPID; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; daemon_cleanup' EXIT

JOBS=8
JOBSIZE=24		# MiB per fio job, disjoint ranges
ZOFF=$(((JOBS + 1) * JOBSIZE))	# MiB: the write-zeroes client's range
ZBLOCKS=16		# ... of ZBLOCKS x 128 KiB
# Leg b fails every request (read, write, flush, discard, write-zeroes)
# once `error/after` is set to 0 at run time; until then none fails.
cat >>"$T/d.ini" <<EOC
[device a]
type = file
path = $T/a.img
size = $((ZOFF + 8))M

[device bfile]
type = file
path = $T/b.img
size = $((ZOFF + 8))M

[device b]
type = error
devices = bfile
ops = all
after = 1000000000

[device m]
type = mirror
devices = a b

[export m]
type = nbd
device = m
listen = 127.0.0.1:$PORT
EOC
start_daemon "$T/d.ini"
U=nbd://127.0.0.1:$PORT/m
note "threads asked: $THREADS (0: this blkstackd has one loop thread)"

ctl 0 info m
[[ $OUT == *optimal* ]] || fail "mirror not optimal at start: $OUT"
ctl 0 attr m queue/write_zeroes_unmap
[[ $OUT == 1 ]] || skip "the mirror of two file legs has no unmap zeroing here ($OUT): the knob flip would test nothing"

# The fio jobs, each its own connection and range: 8 of random writes of
# 4-64 KiB at queue depth 8 where every 64 written blocks are read back
# and checked (verify_backlog) so reads cross the leg failure too, then
# all of them at the end; and one that trims each block before writing it
# (randtrimwrite, at queue depth 1: NBD does not order a trim and a write
# of the same block that are in flight together). All are rate-limited so
# that the run lasts about 8 s at any build speed. (The trimming job has
# the range at 0: fio 3.33's randtrimwrite writes nothing at an offset.)
cat >"$T/mt.fio" <<EOJ
[global]
ioengine=nbd
uri=$U
size=${JOBSIZE}M
bsrange=4k-64k
verify=crc32c
verify_fatal=1
do_verify=1
verify_state_save=0
rate=$((JOBSIZE * 1024 / 8))k

[w]
numjobs=$JOBS
offset=${JOBSIZE}M
offset_increment=${JOBSIZE}M
rw=randwrite
iodepth=8
verify_backlog=64

[t]
rw=randtrimwrite
iodepth=1
EOJ
timeout 240 fio --output-format=json --output="$T/fio.json" "$T/mt.fio" \
	>"$T/fio.out" 2>&1 &
FPID=$!

# The write-zeroes client: rounds of 128 KiB blocks written with a
# pattern, then 32 KiB of each zeroed (-u: may unmap; without: NOUNMAP)
# and the next 32 KiB trimmed, and everything read back (our stack reads
# trimmed blocks as zeroes); a round per qemu-io connection.
zeroes_round() {
	local r=$1 k off p u args=()
	for ((k = 0; k < ZBLOCKS; k++)); do
		off=$((ZOFF * 1024 + k * 128))
		p=$(((r * ZBLOCKS + k) % 250 + 1))
		u=
		(((r + k) % 2)) && u=-u
		args+=(-c "write -P $p ${off}k 128k"
			-c "write -z $u $((off + 32))k 32k"
			-c "discard $((off + 64))k 32k"
			-c "read -P $p ${off}k 32k"
			-c "read -P 0 $((off + 32))k 64k"
			-c "read -P $p $((off + 96))k 32k")
	done
	timeout 60 qemu-io -f raw "$U" "${args[@]}" >"$T/z.$r.log" 2>&1 ||
		{ tail "$T/z.$r.log"; fail "qemu-io round $r failed"; }
	if grep -Eqi 'fail|error' "$T/z.$r.log"; then
		grep -Ei 'fail|error' "$T/z.$r.log" | head -5
		fail "write-zeroes client, round $r: data wrong"
	fi
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }
t0=$(now_ms)
# at(MS): sleep until MS after fio started; false once fio has ended
at() {
	local left=$(($1 - ($(now_ms) - t0)))
	((left > 0)) && sleep "$(printf '%d.%03d' $((left / 1000)) $((left % 1000)))"
	kill -0 "$FPID" 2>/dev/null
}
event() {
	at "$1" || fail "fio ended before '$2' (at $1 ms): the run is too short to test it"
	note "at $1 ms: $2"
	shift 2
	ctl 0 "$@"
}

# the write-zeroes client runs beside fio until told to stop (bounded:
# 60 rounds, each under its own timeout), so the events keep their times
ZSTOP=$T/zstop
zeroes_loop() {
	local r
	for ((r = 0; r < 60; r++)); do
		zeroes_round "$r"
		echo "$r" >"$T/zrounds"
		[[ -e $ZSTOP ]] && return 0
	done
	# all rounds done before fio ended (a fast machine): fine too
	return 0
}
zeroes_loop &
ZLPID=$!

event 1500 "leg a: knob off" attr a queue/write_zeroes_unmap 0
ctl 0 attr m queue/write_zeroes_unmap
[[ $OUT == 0 ]] || fail "the mirror kept unmap zeroing with leg a's knob off: $OUT"
event 2500 "leg a: knob on" attr a queue/write_zeroes_unmap 1
event 3000 "leg b fails every request from now on" attr b error/after 0
event 4000 "mirror: knob off" attr m queue/write_zeroes_unmap 0
event 5000 "mirror: knob on" attr m queue/write_zeroes_unmap 1

frc=0
wait "$FPID" || frc=$?
FPID=
touch "$ZSTOP"
zrc=0
wait "$ZLPID" || zrc=$?
ZLPID=
((zrc == 0)) || fail "the write-zeroes client failed (see above)"
rounds=$(($(cat "$T/zrounds") + 1))
note "$rounds write-zeroes rounds"
if ((frc != 0)); then
	tail -30 "$T/fio.out"
	fail "fio exited $frc"
fi
errs=$(jq '[.jobs[].error] | add' "$T/fio.json")
((errs == 0)) || fail "fio: error $errs"
nj=$(jq '.jobs | length' "$T/fio.json")
((nj == JOBS + 1)) || fail "fio reports $nj jobs, not $((JOBS + 1))"
w=$(jq '[.jobs[].write.io_bytes] | add' "$T/fio.json")
r=$(jq '[.jobs[].read.io_bytes] | add' "$T/fio.json")
t=$(jq '[.jobs[].trim.io_bytes] | add' "$T/fio.json")
note "fio: $w bytes written, $r read back and verified, $t trimmed"
((w >= (JOBS + 1) * JOBSIZE * 1048576)) || fail "fio wrote only $w bytes"
((r > 0)) || fail "fio verified nothing"
((t > 0)) || fail "fio trimmed nothing"

ctl 0 info m
[[ $OUT == *degraded* ]] || fail "info does not say degraded: $OUT"
[[ $OUT == *"leg b faulty"* ]] || fail "info does not name the failed leg: $OUT"
ctl 0 attr b error/failed
((OUT > 0)) || fail "leg b failed no request: the failure was not mid-run"
note "leg b failed $OUT requests; the mirror served on"

note "every zeroed range still reads back right after the run"
zeroes_round "$rounds"
# repaired: the stop flushes every device, and a failing leg would fail it
ctl 0 attr b error/after 1000000000
stop_daemon
echo "PASS: mt_verify"
