# Processes a test starts by name and kills to take a path away (target
# stand-ins, TCP forwarders, a second blkstackd), for the nvmf multipath
# tests (nvmf_multipath.sh, nvmf_failover.sh; mpath_sd.sh waits with
# tp_listening): their PIDs in the
# associative array TP. Source after cli-common.bash; call tp_cleanup
# from the EXIT trap (before daemon_cleanup).
declare -A TP

# tp_stop NAME: kill -KILL the process started as NAME, reap it
tp_stop() {
	kill -KILL "${TP[$1]}" 2>/dev/null || true
	wait "${TP[$1]}" 2>/dev/null || true
	unset "TP[$1]"
}

# tp_cleanup: tp_stop every process still known
tp_cleanup() {
	local k
	for k in "${!TP[@]}"; do
		tp_stop "$k"
	done
}

# tp_listening WHAT PORT: wait (5 s) until 127.0.0.1:PORT accepts a
# connection; fail naming WHAT otherwise
tp_listening() {
	local i
	for ((i = 0; i < 100; i++)); do
		python3 -c "import socket; socket.create_connection(('127.0.0.1', $2), 0.2).close()" \
			2>/dev/null && return 0
		sleep 0.05
	done
	fail "$1 not listening on $2"
}

# start_proxy NAME PORT TARGET_PORT: a TCP forwarder (lib/tcp_proxy.py)
# from 127.0.0.1:PORT to 127.0.0.1:TARGET_PORT, log $T/proxy-NAME.log;
# killing it (tp_stop NAME) is one path of the target going away
start_proxy() {
	python3 "$(dirname "${BASH_SOURCE[0]}")/tcp_proxy.py" "$2" "$3" \
		>>"$T/proxy-$1.log" 2>&1 &
	TP[$1]=$!
	tp_listening "forwarder $1" "$2"
}
