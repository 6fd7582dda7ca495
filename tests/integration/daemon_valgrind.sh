#!/usr/bin/env bash
# blkstackd under valgrind (memcheck, full leak check) through a whole life:
# start, NBD clients doing every kind of request, control-socket commands,
# graceful stop. Uses the normal build (valgrind cannot run ASan binaries)
# and mem devices (valgrind cannot see data the kernel writes through
# io_uring, so file devices would give false reports). Asked for
# event_loop = io_uring, the daemon sees valgrind and puts its I/O
# threads on epoll (valgrind runs one thread at a time and lets no other
# go while one waits in io_uring_enter: the others would starve).
source "$(dirname "$0")/lib/cli-common.bash"
NORMAL=${BUILD%/asan}
[[ $NORMAL != "$BUILD" ]] || NORMAL=$BUILD
BUILD=$NORMAL
BS="$BUILD/blkstack"
source "$(dirname "$0")/lib/daemon.bash"
need valgrind qemu-io nbdinfo python3
daemon_setup
cat >>"$T/d.ini" <<EOC
event_loop = io_uring
[device a]
type = mem
size = 64M
[device b]
type = mem
size = 64M
zeroes = write
[export a]
type = nbd
device = a
listen = 127.0.0.1:$PORT
[export b]
type = nbd
device = b
socket = $T/nbd.sock
EOC
VG=(valgrind --quiet --error-exitcode=99 --leak-check=full
	--show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible
	--log-file="$T/vg.log")
"${VG[@]}" "$BSD" -f -c "$T/d.ini" >>"$T/d.log" 2>&1 &
DPID=$!
for ((i = 0; i < 600; i++)); do
	grep -q 'ready:' "$T/d.log" && break
	kill -0 "$DPID" 2>/dev/null || { cat "$T/d.log" "$T/vg.log"; fail "daemon died"; }
	sleep 0.1
done
grep -q 'ready:' "$T/d.log" || fail "not ready under valgrind in 60 s"
grep -q "running under valgrind: event_loop = epoll" "$T/d.log" ||
	fail "under valgrind the I/O threads did not fall back to epoll"
U=nbd://127.0.0.1:$PORT
timeout 120 nbdinfo --json "$U/a" >/dev/null || fail nbdinfo
timeout 120 nbdinfo --map "$U/a" >/dev/null || fail "nbdinfo --map"
timeout 120 qemu-io -f raw "$U/a" -c 'write -P 1 0 4M' -c 'write -z 1M 1M' \
	-c 'write -z -u 2M 1M' -c 'discard 3M 512k' -c 'write -z -n 0 64k' \
	-c 'read -P 1 64k 960k' -c 'read -P 0 1M 2M' -c flush >/dev/null || fail "qemu-io on a"
timeout 120 qemu-io -f raw "nbd+unix:///b?socket=$T/nbd.sock" -c 'write -P 2 0 1M' \
	-c 'write -z -n 0 64k' -c 'read -P 2 0 1M' >/dev/null 2>&1 || true
ctl 0 ls
ctl 0 attr a queue/write_zeroes_unmap 0
ctl 1 info nosuch
timeout 120 python3 "$(dirname "$0")/lib/nbd_raw.py" 127.0.0.1 "$PORT" a \
	$((64 << 20)) >"$T/raw.log" || { cat "$T/raw.log"; fail "raw client"; }
kill -TERM "$DPID"
rc=0
for ((i = 0; i < 600; i++)); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
wait "$DPID" || rc=$?
DPID=
if ((rc != 0)) || [[ -s $T/vg.log ]]; then
	cat "$T/vg.log"
	fail "valgrind: exit $rc"
fi
echo "PASS"
