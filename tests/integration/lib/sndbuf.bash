# shellcheck shell=bash
# The send buffer blkstackd gives a TCP connection (the send_buffer key of
# every network export, docs/net.md#send-buffer), as ss sees it.

# sndbuf_of PORT: the send buffer (ss's skmem tb: twice SO_SNDBUF) of the
# server's side of a TCP connection held open to PORT for a moment (no
# protocol spoken: the listener sets it when it accepts)
sndbuf_of() {
	python3 -c 'import socket,sys,time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
time.sleep(3)' "$1" &
	local pid=$! tb="" i
	for ((i = 0; i < 50; i++)); do
		tb=$(ss -tmnH state established "( sport = :$1 )" |
			grep -o 'tb[0-9]*' | head -1)
		[[ -n $tb ]] && break
		sleep 0.05
	done
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null || true
	echo "${tb#tb}"
}

# sndbuf_want BYTES: what SO_SNDBUF=BYTES gives: doubled; capped by
# net.core.wmem_max unless root (SO_SNDBUFFORCE)
sndbuf_want() {
	local v=$1
	((EUID == 0 || v <= $(cat /proc/sys/net/core/wmem_max))) ||
		v=$(cat /proc/sys/net/core/wmem_max)
	echo $((2 * v))
}
