#!/usr/bin/env bash
# The multipath mapper over three nbd (client driver) paths to ONE volume
# (a file): a and b are two qemu-nbd servers on the file (--discard=unmap:
# fast zero and TRIM, so unmap zeroing), c is nbdkit's file plugin with
# the nozero filter (no WRITE_ZEROES at all). Every server is on a UNIX
# socket of the test's own and stopped by PID. The daemon exports the
# multipath device over NBD.
#   - the seed's stacking rule as paths come and go: WRITE_ZEROES_UNMAP
#     is off while c is live, on once c is dead (and failed), off again
#     when c is back (explain names c);
#   - fio crc32c verify through the export while qemu-nbd b is killed and
#     restored three times: zero errors, path b failed three times, no
#     request failed at the multipath;
#   - bytes written through the export are in the file;
#   - a flush goes to every live path: b's driver fails its first flush
#     after the restart (writes acknowledged on the lost connection), that
#     fails path b, and the flush succeeds through a and c.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
source "$(dirname "$0")/lib/mpath.bash"
need qemu-nbd nbdkit qemu-io fio jq nbdinfo
has_type nbd || skip "blkstack built without the nbd driver"
has_type multipath || skip "blkstack built without the multipath mapper"
fio --enghelp=nbd >/dev/null 2>&1 || skip "fio has no nbd engine"
daemon_setup
daemon_threads 2

declare -A PID
cleanup() {
	local k
	for k in "${!PID[@]}"; do
		kill -KILL "${PID[$k]}" 2>/dev/null || true
		wait "${PID[$k]}" 2>/dev/null || true
	done
	daemon_cleanup
}
trap cleanup EXIT

VOL=$T/vol.img
truncate -s 64M "$VOL"

wait_sock() {
	local i
	for ((i = 0; i < 100; i++)); do
		[[ -S $1 ]] && return 0
		sleep 0.05
	done
	return 1
}

# start_path NAME: the server of path NAME on $T/NAME.sock
start_path() {
	rm -f "$T/$1.sock"
	case $1 in
	a | b)
		# two servers on one file: qemu's image locking off
		qemu-nbd -t --discard=unmap -k "$T/$1.sock" --image-opts \
			"driver=raw,file.driver=file,file.filename=$VOL,file.locking=off" \
			>>"$T/$1.log" 2>&1 &
		;;
	c)
		nbdkit -f -U "$T/c.sock" --filter=nozero file "$VOL" \
			>>"$T/c.log" 2>&1 &
		;;
	esac
	PID[$1]=$!
	wait_sock "$T/$1.sock" || { cat "$T/$1.log" >&2; fail "server $1 did not start"; }
}

stop_path() {
	kill -KILL "${PID[$1]}" 2>/dev/null || true
	wait "${PID[$1]}" 2>/dev/null || true
	unset "PID[$1]"
}

for p in a b c; do start_path $p; done

# a dead server fails the path's requests after the driver's timeout (2 s),
# and the mapper retries them on another path
for p in a b c; do
	cat >>"$T/d.ini" <<EOC
[device $p]
type = nbd
uri = nbd+unix:///?socket=$T/$p.sock
timeout = 2
reconnect_ms = 200

EOC
done
cat >>"$T/d.ini" <<EOC
[device mp]
type = multipath
devices = a b c
policy = round-robin
queue_if_no_path = 20
retry_interval = 0.3

[export mp]
type = nbd
device = mp
socket = $T/emp.sock
EOC
start_daemon "$T/d.ini"
NBD="nbd+unix:///mp?socket=$T/emp.sock"

# diag: what the multipath and path c's driver say now, and the daemon's
# last lines (printed before a capability check fails, to find why)
diag() {
	local o=$OUT
	echo "---- diagnostics at $(date +%T.%N)" >&2
	ctl 0 info mp && echo "$OUT" >&2
	ctl 0 info c && echo "$OUT" >&2
	tail -30 "$T/d.log" >&2
	tail -5 "$T/c.log" >&2
	OUT=$o
}

note "three paths live; c (nozero) takes unmap zeroing away"
mpath_live_paths mp 3 3
ctl 0 explain mp
[[ $OUT == *"mp (multipath"*"write_zeroes_unmap no"*"because c "* ]] ||
	{ echo "$OUT" >&2; diag; fail "explain with c live (its output and diagnostics above)"; }
[[ $(nbd_flag "$NBD" can_fast_zero) == false ]] || fail "fast zero with c live"

note "c dies: once failed, unmap zeroing is on"
stop_path c
mpath_wait_failed mp 2 c 20 mpath_reads "$NBD" || fail "path c not failed: $OUT"
ctl 0 explain mp
[[ $OUT == *"write_zeroes_unmap yes"*"every live path has it (2 live)"*"c failed"* ]] ||
	{ echo "$OUT" >&2; diag; fail "explain with c dead (its output and diagnostics above)"; }
[[ $(nbd_flag "$NBD" can_fast_zero) == true ]] || fail "no fast zero with c dead"

note "c returns: off again"
start_path c
mpath_live_paths mp 3 3
ctl 0 explain mp
[[ $OUT == *"write_zeroes_unmap no"*"because c "* ]] ||
	{ echo "$OUT" >&2; diag; fail "explain with c back (its output and diagnostics above)"; }
[[ $(nbd_flag "$NBD" can_fast_zero) == false ]] || fail "fast zero with c back"

note "bytes through the three paths land in the file"
head -c 4M /dev/urandom >"$T/pat"
timeout 60 qemu-img convert -n -f raw -O raw "$T/pat" "$NBD" || fail "qemu-img convert"
cmp -n 4M "$T/pat" "$VOL" || fail "vol.img differs from what was written"
ctl 0 info mp
[[ $OUT =~ path0[^$'\n']*ios\ [1-9] && $OUT =~ path1[^$'\n']*ios\ [1-9] &&
	$OUT =~ path2[^$'\n']*ios\ [1-9] ]] || fail "round robin did not use every path: $OUT"

note "fio verify while qemu-nbd b is killed and restored three times"
ctl 0 info mp
[[ $OUT =~ path1[^$'\n']*failures\ ([0-9]+) ]] && b0=${BASH_REMATCH[1]} || b0=0
for k in 1 2 3; do
	timeout 200 fio --name=mp --ioengine=nbd --uri="$NBD" --size=16M \
		--offset=8M --offset_increment=16M --numjobs=2 --iodepth=16 \
		--rw=randwrite --bsrange=4k-128k --verify=crc32c --verify_fatal=1 \
		--do_verify=1 --verify_state_save=0 --loops=4 --randseed=$k \
		--output-format=json --output="$T/fio-$k.json" &
	FIO=$!
	sleep 1
	stop_path b
	# the path fails once a request on it runs into the driver's timeout;
	# fio may be done by then, and an idle dead path fails nobody: reads
	# keep going through the export until b is failed
	mpath_wait_failed mp 1 b 40 mpath_reads "$NBD" ||
		fail "round $k: path b not failed after its server died: $OUT"
	start_path b
	mpath_live_paths mp 3 3
	wait "$FIO" || { tail -40 "$T/fio-$k.json"; fail "round $k: fio failed"; }
	errs=$(jq '[.jobs[].error] | add' "$T/fio-$k.json")
	((errs == 0)) || fail "round $k: fio: error $errs"
done
ctl 0 info mp
note "$(grep -E '^ *(path[0-9]|retried|queue)' <<<"$OUT" | tr -s ' ' | tr '\n' ';')"
[[ $OUT =~ path1[^$'\n']*failures\ ([0-9]+) ]] && ((BASH_REMATCH[1] - b0 >= 3)) ||
	fail "path b did not fail three times: $OUT"
[[ $OUT =~ retried[^0-9]*([0-9]+) ]] && ((BASH_REMATCH[1] >= 1)) ||
	fail "nothing retried on another path: $OUT"
# not one request failed at the multipath (the paths' errors stay below)
[[ $OUT =~ $'\n'\ +errors\ +0($'\n'|$) ]] || fail "multipath errors: $OUT"

note "a flush reaches every live path, b's lost writes included"
# b's server was killed with writes acknowledged and not flushed: b's
# driver fails its next FLUSH (EIO), which fails path b; the flush itself
# succeeds through a and c, which flush the same file
timeout 30 qemu-io -f raw "$NBD" -c "write -P 0x5c 0 64k" -c flush \
	>"$T/qf.log" 2>&1 || { cat "$T/qf.log"; fail "flush through mp"; }
grep -qi -e error -e fail "$T/qf.log" && { cat "$T/qf.log"; fail "flush through mp"; }
ctl 0 info mp
[[ $OUT =~ path1[^$'\n']*last\ EIO\ on\ flush ]] ||
	note "b's flush did not fail (no writes were lost on it this run)"
mpath_live_paths mp 3 3
# and the next flush is clean on every path (the daemon flushes at stop)
timeout 30 qemu-io -f raw "$NBD" -c flush >"$T/qf2.log" 2>&1 ||
	{ cat "$T/qf2.log"; fail "second flush"; }
mpath_live_paths mp 3 3

stop_daemon
echo "PASS: mpath_nbd"
