#!/usr/bin/env bash
# Listen addresses and socket modes (issue 10 items 5 and 14):
# - a port outside 1..65535, port 0, an empty host (":PORT"), a name, an
#   unbracketed IPv6 address: one config error naming file:line, found
#   before anything is created (the state directory stays absent);
# - bad socket_mode, limits, timeouts and send_buffer: the same;
# - send_buffer sets each TCP connection's send buffer (SO_SNDBUF);
# - the UNIX NBD socket is created with socket_mode (default 0600) even
#   under umask 000, and the control socket is 0600;
# - IPv6 loopback is served ([::1]:PORT), when the host has it.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
source "$(dirname "$0")/lib/sndbuf.bash"
need python3 nbdinfo
make_tmp
trap daemon_cleanup EXIT

# bad_start EXPECT... < EXPORT-KEYS: blkstackd refuses with one line
bad_start() {
	local rc=0
	{
		printf '[daemon]\nstate_dir = %s/never\n' "$T"
		printf '[device a]\ntype = mem\nsize = 1G\n'
		printf '[export a]\ntype = nbd\ndevice = a\n'
		cat
	} >"$T/bad.ini"
	timeout 30 "$BSD" -f -c "$T/bad.ini" >"$T/out" 2>"$T/err" || rc=$?
	# log lines of what started before the failure are not the error
	ERR=$(grep -v '^[0-9]\{4\}-' "$T/err" || true)
	((rc == 1)) || fail "bad config: exit $rc, expected 1: $ERR"
	[[ $ERR != *Sanitizer* ]] || fail "sanitizer: $ERR"
	expect_err "$@"
	[[ ! -e $T/never ]] || fail "a refused config created the state dir"
}

PORT=$(free_port)
note "ports outside 1..65535 and empty hosts are config errors at file:line"
bad_start bad.ini:9 "listen '127.0.0.1:99999'" "port 99999 is out of range (1-65535)" \
	<<<"listen = 127.0.0.1:99999"
bad_start bad.ini:9 "port 0 is out of range" <<<"listen = 127.0.0.1:0"
bad_start bad.ini:9 "port 65536 is out of range" <<<"listen = [::1]:65536"
bad_start bad.ini:9 "listen ':$PORT'" "empty host" "0.0.0.0" <<<"listen = :$PORT"
bad_start bad.ini:9 "empty host" <<<"listen = []:$PORT"
bad_start bad.ini:9 "not a decimal number" <<<"listen = 127.0.0.1:0x50"
bad_start bad.ini:9 "brackets" <<<"listen = ::1:$PORT"
bad_start bad.ini:9 "'localhost' is not an IPv4 address" <<<"listen = localhost:$PORT"
bad_start bad.ini:9 "listen" "HOST:PORT" <<<"listen = nonsense"
# the second address is wrong: still found before anything binds
bad_start bad.ini:9 "port 70000" <<<"listen = 127.0.0.1:$PORT 127.0.0.1:70000"

note "socket_mode, limits and timeouts are checked the same way"
bad_start bad.ini:10 "socket_mode '0999'" <<EOC
socket = $T/x.sock
socket_mode = 0999
EOC
bad_start bad.ini:10 "socket_mode '0060'" "rw for the owner" <<EOC
socket = $T/x.sock
socket_mode = 0060
EOC
bad_start bad.ini:10 "max_connections_per_peer 0: give 1 to 65536" <<EOC
listen = 127.0.0.1:$PORT
max_connections_per_peer = 0
EOC
bad_start bad.ini:11 "max_connections_per_peer 20 is above max_connections 10" <<EOC
listen = 127.0.0.1:$PORT
max_connections = 10
max_connections_per_peer = 20
EOC
bad_start bad.ini:10 "handshake_timeout '10m'" <<EOC
listen = 127.0.0.1:$PORT
handshake_timeout = 10m
EOC
bad_start bad.ini:10 "send_buffer 1024" "0 (the kernel's autotuning) or 4K to 64M" <<EOC
listen = 127.0.0.1:$PORT
send_buffer = 1K
EOC
bad_start bad.ini:10 "send_buffer 134217728" "4K to 64M" <<EOC
listen = 127.0.0.1:$PORT
send_buffer = 128M
EOC
[[ ! -e $T/x.sock ]] || fail "a refused config created a socket"
# the settings belong to the listener: sharing it means agreeing on them
bad_start "export b: 127.0.0.1:$PORT is shared with export a" "give the same ones" <<EOC
listen = 127.0.0.1:$PORT
[device b]
type = mem
size = 1G
[export b]
type = nbd
device = b
listen = 127.0.0.1:$PORT
handshake_timeout = 3
EOC

note "the UNIX sockets are born with their mode, whatever the umask"
CTL=$T/ctl.sock
write_conf() {
	{
		printf '[daemon]\nstate_dir = %s/state\ncontrol = %s\n' "$T" "$CTL"
		printf '[device a]\ntype = mem\nsize = 16M\n'
		printf '[export a]\ntype = nbd\ndevice = a\n'
		printf 'listen = 127.0.0.1:%s\nsocket = %s/nbd.sock\n' "$PORT" "$T"
		cat
	} >"$T/d.ini"
}
write_conf </dev/null
OLD_UMASK=$(umask)
umask 000
start_daemon "$T/d.ini"
umask "$OLD_UMASK"
[[ $(stat -c %a "$T/nbd.sock") == 600 ]] ||
	fail "NBD socket mode $(stat -c %a "$T/nbd.sock"), expected 600"
[[ $(stat -c %a "$CTL") == 600 ]] ||
	fail "control socket mode $(stat -c %a "$CTL"), expected 600"
timeout 10 nbdinfo --size "nbd+unix:///a?socket=$T/nbd.sock" >/dev/null ||
	fail "not served on the UNIX socket"
stop_daemon

write_conf <<<"socket_mode = 0660"
umask 077
start_daemon "$T/d.ini"
umask "$OLD_UMASK"
[[ $(stat -c %a "$T/nbd.sock") == 660 ]] ||
	fail "socket_mode = 0660 gave $(stat -c %a "$T/nbd.sock")"
stop_daemon

note "send_buffer: each TCP connection's SO_SNDBUF (default 512K; 0 = autotuned)"
# sndbuf_with [KEY LINE]: that send buffer, the daemon started with it
sndbuf_with() {
	write_conf <<<"${1:-}"
	start_daemon "$T/d.ini"
	GOT=$(sndbuf_of "$PORT")
	stop_daemon
}
sndbuf_with
[[ $GOT == "$(sndbuf_want 524288)" ]] ||
	fail "default send_buffer: the connection's send buffer is '$GOT', expected $(sndbuf_want 524288)"
sndbuf_with "send_buffer = 64K"
[[ $GOT == "$(sndbuf_want 65536)" ]] ||
	fail "send_buffer = 64K: send buffer '$GOT', expected $(sndbuf_want 65536)"
sndbuf_with "send_buffer = 0"
[[ -n $GOT && $GOT != "$(sndbuf_want 524288)" && $GOT != "$(sndbuf_want 65536)" ]] ||
	fail "send_buffer = 0: send buffer '$GOT', expected the kernel's own"

if python3 -c 'import socket; s=socket.socket(socket.AF_INET6); s.bind(("::1",0))' 2>/dev/null; then
	note "IPv6 loopback: [::1]:PORT is served"
	P6=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET6); s.bind(("::1",0)); print(s.getsockname()[1])')
	write_conf <<<"listen = [::1]:$P6"
	sed -i "s/^listen = 127.0.0.1:$PORT\$//" "$T/d.ini"
	start_daemon "$T/d.ini"
	timeout 10 nbdinfo --size "nbd://[::1]:$P6/a" >/dev/null ||
		fail "not served on [::1]:$P6"
	stop_daemon
else
	note "(no IPv6 loopback here: the [::1] case not run)"
fi
echo "PASS"
