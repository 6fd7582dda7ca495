#!/usr/bin/env bash
# Control commands never freeze the daemon (issue 10 item 10): while a
# long zeroout that must write (zeroes = write, --no-unmap) runs through
# the control socket, NBD clients are served; `fs put` of a FIFO fails at
# once with a clear line instead of blocking in open(), and the daemon
# goes on serving. NOFREEZE_SIZE (default 1536M) is smaller in the
# ThreadSanitizer run, where the zeroing itself is many times slower.
# check: alone (an NBD client's wait bounded to 3 s during a zeroout)
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need python3 nbdinfo
daemon_setup
SIZE=${NOFREEZE_SIZE:-1536M}
# one write-zeroes piece of all of m: a single memset on the loop before
cat >>"$T/d.ini" <<EOC
[device m]
type = mem
size = $SIZE
zeroes = write
max_write_zeroes = $SIZE

[device v]
type = mem
size = 64M

[device f]
type = mem
size = 64M

; only v is served: zeroout and fs put are refused on a served device,
; and a stall of the loop would hold v's clients as much as m's
[export v]
type = nbd
device = v
listen = 127.0.0.1:$PORT
EOC
start_daemon "$T/d.ini"
now() { date +%s%N; }

note "zeroout --no-unmap of $SIZE on zeroes=write while NBD clients connect"
"$BS" -s "$CTL" zeroout --no-unmap -l "$SIZE" m >"$T/z.out" 2>&1 &
ZPID=$!
sleep 0.3
served=0 worst=0
for ((i = 0; i < 20; i++)); do
	kill -0 "$ZPID" 2>/dev/null || break
	t0=$(now)
	timeout 60 nbdinfo --size "nbd://127.0.0.1:$PORT/v" >"$T/n.out" 2>&1 ||
		fail "nbdinfo failed: $(cat "$T/n.out")"
	ms=$((($(now) - t0) / 1000000))
	((ms > worst)) && worst=$ms
	# counts only when the zeroout was still running at its answer
	kill -0 "$ZPID" 2>/dev/null && served=$((served + 1))
done
zrc=0
wait "$ZPID" || zrc=$?
((zrc == 0)) || fail "zeroout exited $zrc: $(cat "$T/z.out")"
note "served $served NBD clients during the zeroout; slowest answer $worst ms"
if ((served == 0 && worst < 1000)); then
	skip "the zeroout ended before a client could be timed (machine too fast)"
fi
((served > 0)) || fail "no NBD client was served while the zeroout ran (slowest $worst ms)"
((worst < 3000)) || fail "an NBD client waited $worst ms during the zeroout"

note "fs put of a FIFO: fails at once, names it, the daemon keeps serving"
ctl 0 fs mkfs f
mkfifo "$T/fifo"
t0=$(now)
rc=0
timeout 20 "$BS" -s "$CTL" fs put f "$T/fifo" /x >"$T/out" 2>"$T/err" || rc=$?
ms=$((($(now) - t0) / 1000000))
((rc == 1)) || fail "fs put of a FIFO exited $rc (124: it blocked): $(cat "$T/err")"
ERR=$(cat "$T/err")
expect_err "FIFO" "regular file"
((ms < 5000)) || fail "fs put of a FIFO took $ms ms"
ctl 1 fs stat f /x
timeout 20 nbdinfo --size "nbd://127.0.0.1:$PORT/v" >/dev/null || fail "NBD after the FIFO"
ctl 0 ls
stop_daemon
echo "PASS: ctl_nofreeze"
