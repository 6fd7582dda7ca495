#!/usr/bin/env bash
# Issue 12, "What must hold": a long control command (a 4 GiB zeroout that
# must write: --no-unmap on a `mem` device, whose first run also allocates
# every chunk) does not hold up the clients of another device: fio reading
# 4 KiB blocks at queue depth 1 over NBD meanwhile keeps its p99
# completion latency under 50 ms.
#
# LONGZERO_SIZE (default 4G) and LONGZERO_P99_MS (default 50) exist for
# the ThreadSanitizer run (`make tsan`), whose shadow memory would double
# 4 GiB of RAM; every other run uses the defaults.
# check: alone (fio's p99 read latency bounded during a zeroout)
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need fio jq qemu-io
fio --enghelp=nbd >/dev/null 2>&1 || skip "fio has no nbd engine"
SIZE=${LONGZERO_SIZE:-4G}
P99_MS=${LONGZERO_P99_MS:-50}
RUNTIME=5		# s of fio reads, all of them while a zeroout runs
MAXROUNDS=100		# zeroouts at most (each a few seconds at most)

size_mb=$(numfmt --from=iec "$SIZE")
size_mb=$((size_mb >> 20))
avail_mb=$(awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo)
((avail_mb > size_mb + 2048)) ||
	skip "$SIZE of RAM for the mem device (+2G) not available: ${avail_mb}M"

daemon_setup
daemon_threads 2
ZPID=
STOP=
# the zeroout loop runs beside us: stop it (bounded) before the daemon
# (each step || true: under set -e a failing step would end the trap)
trap 'if [[ -n $ZPID ]]; then touch "$STOP" || true; kill "$ZPID" 2>/dev/null || true; wait "$ZPID" 2>/dev/null || true; fi; daemon_cleanup' EXIT
STOP=$T/stop
# big is not exported: zeroout is refused on a served device; v is served
# from the same loop (today) or from another I/O thread (threads = 2)
cat >>"$T/d.ini" <<EOC
[device big]
type = mem
size = $SIZE

[device v]
type = mem
size = 64M

[export v]
type = nbd
device = v
listen = 127.0.0.1:$PORT
EOC
start_daemon "$T/d.ini"
U=nbd://127.0.0.1:$PORT/v
note "threads asked: $THREADS (0: this blkstackd has one loop thread)"

note "fill v with data, so that reads copy real chunks"
timeout 60 qemu-io -f raw "$U" -c "write -P 0x5a 0 64M" >"$T/fill.log" 2>&1 ||
	{ cat "$T/fill.log"; fail "filling v failed"; }

# Zeroouts of all of big back to back until told to stop; the first one
# allocates the chunks as it zeroes (the slow one), the later ones memset
# them. Each line of $T/z.log: round, exit status, milliseconds.
zero_loop() {
	local i rc t0
	for ((i = 0; i < MAXROUNDS; i++)); do
		[[ -e $STOP ]] && return 0
		t0=$(date +%s%N)
		rc=0
		timeout 240 "$BS" -s "$CTL" zeroout --no-unmap -l "$SIZE" big \
			>"$T/z.$i.out" 2>&1 || rc=$?
		echo "$i $rc $((($(date +%s%N) - t0) / 1000000))" >>"$T/z.log"
		((rc == 0)) || return 1
	done
}
note "zeroout --no-unmap of $SIZE of mem, over and over, while fio reads v at qd1"
zero_loop &
ZPID=$!
sleep 0.5
kill -0 "$ZPID" 2>/dev/null || fail "the zeroout loop ended at once: $(cat "$T"/z.*.out)"
timeout $((RUNTIME + 60)) fio --name=qd1 --ioengine=nbd --uri="$U" \
	--rw=randread --bs=4k --iodepth=1 --size=64M --time_based=1 \
	--runtime=$RUNTIME --output-format=json --output="$T/fio.json" \
	>"$T/fio.out" 2>&1 || { cat "$T/fio.out"; fail "fio failed"; }
covered=0
kill -0 "$ZPID" 2>/dev/null && covered=1
touch "$STOP"
zrc=0
wait "$ZPID" || zrc=$?
ZPID=
((zrc == 0)) || fail "a zeroout failed: $(tail -1 "$T/z.log"): $(cat "$T"/z.*.out)"
((covered)) || fail "the zeroouts ended before fio did ($MAXROUNDS rounds)"
note "zeroouts (round rc ms): $(tr '\n' ' ' <"$T/z.log")"

errs=$(jq '.jobs[0].error' "$T/fio.json")
((errs == 0)) || fail "fio: error $errs"
read -r ios p50 p99 max < <(jq -r '.jobs[0].read |
	"\(.total_ios) \(.clat_ns.percentile["50.000000"]) \(.clat_ns.percentile["99.000000"]) \(.clat_ns.max)"' \
	"$T/fio.json")
note "fio: $ios reads in ${RUNTIME} s; clat p50 $((p50 / 1000)) us, p99 $((p99 / 1000)) us, max $((max / 1000)) us"
((p99 < P99_MS * 1000000)) ||
	fail "p99 read latency $((p99 / 1000000)) ms during the zeroout (limit $P99_MS ms)"

stop_daemon
echo "PASS: ctl_longzero"
