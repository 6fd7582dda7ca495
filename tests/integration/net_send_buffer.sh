#!/usr/bin/env bash
# send_buffer and the listener keys on every network export (iSCSI,
# NVMe/TCP and NFS read them with the NBD export's reader):
# - each TCP connection gets SO_SNDBUF = send_buffer (default 512K; 0 =
#   the kernel's autotuning), as `ss -tm` shows it;
# - max_connections_per_peer is enforced for NFS like for NBD (a second
#   connection from the same address is closed at once);
# - bad values are one config error naming file:line, the export and
#   the key, before anything starts.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
source "$(dirname "$0")/lib/sndbuf.bash"
need python3 ss
for t in iscsi nvmf nfs; do need_export_type $t; done
daemon_setup
P_ISCSI=$PORT
P_NVMF=$(free_port)
P_NFS=$(free_port)
mkdir -p "$T/share"

# write_conf ISCSI_LINE NVMF_LINE NFS_LINE: the three exports, each with
# its extra line (a key, or empty)
write_conf() {
	cat >"$T/d.ini" <<EOC
[daemon]
state_dir = $T/state
control = $CTL
[device d0]
type = mem
size = 16M
[device d1]
type = mem
size = 16M
[export i]
type = iscsi
device = d0
listen = 127.0.0.1:$P_ISCSI
$1
[export n]
type = nvmf
device = d1
listen = 127.0.0.1:$P_NVMF
$2
[export f]
type = nfs
path = $T/share
listen = 127.0.0.1:$P_NFS
$3
EOC
}

# expect PORT WHAT BYTES|auto: the send buffer of a connection to PORT
expect() {
	local got want
	got=$(sndbuf_of "$1")
	if [[ $3 == auto ]]; then
		[[ -n $got && $got != "$(sndbuf_want 524288)" &&
			$got != "$(sndbuf_want 65536)" &&
			$got != "$(sndbuf_want 131072)" ]] ||
			fail "$2: send buffer '$got', expected the kernel's own"
	else
		want=$(sndbuf_want "$3")
		[[ $got == "$want" ]] ||
			fail "$2: send buffer '$got', expected $want"
	fi
}

note "defaults, a size and 0 on iSCSI, NVMe/TCP and NFS"
write_conf "" "send_buffer = 64K" "send_buffer = 0"
start_daemon "$T/d.ini"
expect "$P_ISCSI" "iscsi, default" 524288
expect "$P_NVMF" "nvmf, send_buffer = 64K" 65536
expect "$P_NFS" "nfs, send_buffer = 0" auto
stop_daemon
write_conf "send_buffer = 0" "" "send_buffer = 128K"
start_daemon "$T/d.ini"
expect "$P_ISCSI" "iscsi, send_buffer = 0" auto
expect "$P_NVMF" "nvmf, default" 524288
expect "$P_NFS" "nfs, send_buffer = 128K" 131072
stop_daemon

note "max_connections_per_peer on NFS: the second connection is closed"
write_conf "" "" "max_connections_per_peer = 1"
start_daemon "$T/d.ini"
python3 - "$P_NFS" <<'PY' || fail "nfs max_connections_per_peer = 1 not enforced"
import socket, sys
port = int(sys.argv[1])
a = socket.create_connection(("127.0.0.1", port))
b = socket.create_connection(("127.0.0.1", port))
b.settimeout(5)
try:
    got = b.recv(1)
except ConnectionResetError:
    got = b""
sys.exit(0 if got == b"" else 1)
PY
stop_daemon
grep -q "limit max_connections_per_peer = 1" "$T/d.log" ||
	fail "the refusal is not logged: $(tail -3 "$T/d.log")"

# bad LINE-NO EXPECT... : blkstackd refuses $T/d.ini with one line
bad() {
	local line=$1 rc=0 err
	shift
	timeout 30 "$BSD" -f -c "$T/d.ini" >/dev/null 2>"$T/err" || rc=$?
	err=$(grep -v '^[0-9]\{4\}-' "$T/err" || true)
	((rc == 1)) || fail "bad config: exit $rc, expected 1: $err"
	ERR=$err
	expect_err "d.ini:$line" "$@"
}
note "bad values: one error naming file:line, the export and the key"
write_conf "send_buffer = 1K" "" ""
bad 14 "export i" "send_buffer 1024" "0 (the kernel's autotuning) or 4K to 64M"
write_conf "" "send_buffer = 128M" ""
bad 19 "export n" "send_buffer 134217728" "4K to 64M"
write_conf "" "" "send_buffer = lots"
bad 24 "send_buffer"
write_conf "" "" "max_connections = 0"
bad 24 "export f" "max_connections 0: give 1 to 65536"
write_conf "max_connections = 4
max_connections_per_peer = 8" "" ""
bad 15 "export i" "max_connections_per_peer 8 is above max_connections 4"
write_conf "" "max_connections_per_peer = 70000" ""
bad 19 "export n" "max_connections_per_peer 70000: give 1 to 65536"
echo "PASS"
