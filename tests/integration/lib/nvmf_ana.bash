# Helpers of the ANA scripts (nvmf_ana.sh, nvmf_ana_groups.sh; also
# nvmf_failover.sh, nvmf_down.sh): a target
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

# nvmf_target_conf FILE NQN PORT...: write FILE, the config of a target
# blkstackd (control $TCTL, state $T/tstate, 2 threads) exporting the
# file $T/ns.img (device vol) as export s0, subsystem NQN, on
# 127.0.0.1:PORT for each PORT (listen, listen.2, ...)
nvmf_target_conf() {
	local f=$1 nqn=$2 i=1 p
	shift 2
	cat >"$f" <<EOC
[daemon]
state_dir = $T/tstate
control = $TCTL
threads = 2

[device vol]
type = file
path = $T/ns.img

[export s0]
type = nvmf
device = vol
nqn = $nqn
EOC
	for p in "$@"; do
		if ((i == 1)); then
			echo "listen = 127.0.0.1:$p"
		else
			echo "listen.$i = 127.0.0.1:$p"
		fi
		i=$((i + 1))
	done >>"$f"
}

# nvmf_target_start NAME PORT...: the target blkstackd of a test, started:
# NQN=nqn.2026-12.org.blkstack:NAME-PID and TCTL=$T/tctl.sock are set,
# $T/ns.img is a sparse 64 MiB file, the config is $T/t.ini (written by
# nvmf_target_conf with PORT...) and its log $T/t.log
nvmf_target_start() {
	local name=$1
	shift
	NQN=nqn.2026-12.org.blkstack:$name-$$
	TCTL=$T/tctl.sock
	truncate -s 64M "$T/ns.img"
	nvmf_target_conf "$T/t.ini" "$NQN" "$@"
	start_other_daemon "$T/t.ini" "$T/t.log"
}
