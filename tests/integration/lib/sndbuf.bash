# shellcheck shell=bash
# The send buffer blkstackd gives a TCP connection (the send_buffer key of
# every network export, docs/net.md#send-buffer), as ss sees it.

# sndbuf_of PORT: the send buffer (ss's skmem tb: twice SO_SNDBUF) of the
# server's side of a TCP connection held open to PORT for a moment (no
# protocol spoken: the listener sets it when it accepts). The socket is
# picked by both ports: between two daemons of a test another test's
# outgoing connection may have been given PORT as its own local port, and
# "sport = PORT" alone then finds that one (an autotuned 4 MiB buffer).
sndbuf_of() {
	local out pid tb="" cport="" i

	out=$(mktemp)
	python3 -c 'import socket,sys,time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
print(s.getsockname()[1], flush=True)
time.sleep(3)' "$1" >"$out" &
	pid=$!
	for ((i = 0; i < 50; i++)); do
		[[ -z $cport ]] && read -r cport <"$out"
		if [[ -n $cport ]]; then
			tb=$(ss -tmnH state established \
				"( sport = :$1 and dport = :$cport )" |
				grep -o 'tb[0-9]*' | head -1)
			[[ -n $tb ]] && break
		fi
		sleep 0.05
	done
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null || true
	rm -f "$out"
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
