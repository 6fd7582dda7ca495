# Helpers of the ANA scripts (nvmf_ana.sh, nvmf_ana_groups.sh): a target
# blkstackd (control socket $TCTL) and the daemon under test ($CTL) whose
# nvmf devices have paths to it. Source after cli-common.bash and
# daemon.bash.

# nvmf_peers: $PEERS (the shared peers folder), $PYNVMEOF exported, and
# $PY, the pynvmeof steps (lib/nvmf_py.py)
nvmf_peers() {
	local root
	root=$(cd "$(dirname "$0")/../.." && pwd)
	if [[ -z ${PEERS:-} ]]; then
		for PEERS in "$root/../shared/peers" "$root/../../shared/peers"; do
			[[ -d $PEERS ]] && break
		done
	fi
	export PYNVMEOF=$PEERS/pynvmeof BUILD
	PY="python3 $(dirname "$0")/lib/nvmf_py.py"
}

# tctl WANT ARGS: blkstack -s $TCTL ARGS (the target), output in $OUT
tctl() {
	local want=$1
	shift
	run_bs "$want" -s "$TCTL" "$@"
}

# path_ana DEV N STATE: wait (10 s) until `info DEV` says path N is in
# ANA state STATE
path_ana() {
	local i
	for ((i = 0; i < 100; i++)); do
		ctl 0 info "$1"
		[[ $OUT =~ path\.$2\.ana[^$'\n']*\ $3\ \( ]] && return 0
		sleep 0.1
	done
	fail "$1 path $2 not $3: $OUT"
}

# path_cmds DEV N: the I/O commands the host sent on DEV's path N so far
path_cmds() {
	ctl 0 info "$1"
	[[ $OUT =~ path\.$2\ [^$'\n']*commands\ ([0-9]+) ]] || fail "no count: $OUT"
	echo "${BASH_REMATCH[1]}"
}
