#!/usr/bin/env bash
# [daemon] event_loop: the I/O threads wait in epoll (the default) or in
# io_uring (connections receive and send through that ring). Both serve
# the same bytes to real clients: fio verify (crc32c) over four NBD
# connections on two threads, a client that resets mid-request and one
# that leaves without a goodbye; the start-up log names the mode; a bad
# value is one config error at file:line. A daemon stopped with clients
# connected exits 0 with no sanitizer report (the ring's cancelled
# receives are waited for before their buffers go).
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need fio jq nbdinfo python3
daemon_setup

run_mode() {	# MODE (io_uring|epoll)
	local mode=$1 logname
	PORT=$(free_port)
	{
		printf '[daemon]\nstate_dir = %s\ncontrol = %s\n' "$T/state" "$CTL"
		printf 'threads = 2\nevent_loop = %s\n' "$mode"
		printf '[device d]\ntype = file\npath = %s/img\nsize = 256M\n' "$T"
		printf '[export d]\ntype = nbd\ndevice = d\nlisten = 127.0.0.1:%s\n' "$PORT"
	} >"$T/d.ini"
	rm -f "$T/img"
	start_daemon "$T/d.ini"
	if [[ $mode == io_uring ]] &&
		grep -q "event_loop = io_uring: not available here" "$T/d.log"; then
		NO_RING=$(grep -o "not available here ([^)]*)" "$T/d.log" | head -1)
		stop_daemon
		return
	fi
	grep -q "2 I/O threads (threads = N in \[daemon\]), waiting in $mode (event_loop)" \
		"$T/d.log" || { tail -5 "$T/d.log"; fail "$mode: start-up line"; }

	note "$mode: fio verify over 4 connections, 4K-256K, depth 8"
	fio_verify "v-$mode" "nbd://127.0.0.1:$PORT/d" --size=64m \
		--numjobs=4 --offset_increment=64m --iodepth=8 --runtime=20

	note "$mode: a client that resets mid-request, one that just leaves"
	python3 - "$PORT" <<'PY' || fail "$mode: raw clients"
import socket, struct, sys
port = int(sys.argv[1])
def hello():
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.recv(18)                                   # NBDMAGIC IHAVEOPT flags
    s.sendall(struct.pack(">I", 3))              # fixed newstyle, no zeroes
    name = b"d"
    s.sendall(b"IHAVEOPT" + struct.pack(">II", 1, len(name)) + name)
    need = 8 + 2                                 # export size, flags
    got = b""
    while len(got) < need:
        got += s.recv(need - len(got))
    return s
# a write header with half its payload, then a reset (SO_LINGER 0)
s = hello()
s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 1, 7, 0, 65536) + b"x" * 32768)
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
s.close()
# a read answered, then a close without NBD_CMD_DISC
s = hello()
s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 0, 9, 0, 4096))
got = b""
while len(got) < 16 + 4096:
    chunk = s.recv(16 + 4096 - len(got))
    if not chunk:
        sys.exit("closed early")
    got += chunk
s.close()
PY
	nbdinfo "nbd://127.0.0.1:$PORT/d" >/dev/null || fail "$mode: served after"

	note "$mode: stopped with a client connected: clean exit"
	python3 - "$PORT" "$T/connected" <<'PY' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.recv(18)                      # the greeting: the server has it
open(sys.argv[2], "w").close()
time.sleep(5)
PY
	cpid=$!
	for ((i = 0; i < 100; i++)); do
		[[ -e $T/connected ]] && break
		sleep 0.05
	done
	[[ -e $T/connected ]] || fail "$mode: the idle client did not connect"
	rm -f "$T/connected"
	stop_daemon
	kill "$cpid" 2>/dev/null || true
	wait "$cpid" 2>/dev/null || true
}

NO_RING=
run_mode epoll
run_mode io_uring

note "without the key the threads wait in epoll"
printf '[daemon]\nstate_dir = %s\ncontrol = %s\nthreads = 2\n' "$T/state" "$CTL" >"$T/d.ini"
printf '[device m]\ntype = mem\nsize = 1M\n[export m]\ntype = nbd\ndevice = m\nlisten = 127.0.0.1:%s\n' "$(free_port)" >>"$T/d.ini"
: >"$T/d.log"
start_daemon "$T/d.ini"
grep -q "waiting in epoll (event_loop)" "$T/d.log" || fail "default: not epoll"
stop_daemon

note "a bad event_loop is one error at file:line"
printf '[daemon]\nstate_dir = %s/never\nevent_loop = poll\n' "$T" >"$T/bad.ini"
printf '[device a]\ntype = mem\nsize = 1M\n' >>"$T/bad.ini"
rc=0
timeout 30 "$BSD" -f -c "$T/bad.ini" >"$T/out" 2>"$T/err" || rc=$?
((rc == 1)) || fail "event_loop = poll: exit $rc"
grep -q 'bad.ini:3: event_loop: poll: give epoll (the default) or io_uring' \
	"$T/err" || { cat "$T/err"; fail "event_loop = poll: message"; }
[[ ! -e $T/never ]] || fail "a refused config created the state dir"
[[ -z $NO_RING ]] || skip "epoll checked; the io_uring loop is $NO_RING"
echo "PASS: daemon_event_loop"
