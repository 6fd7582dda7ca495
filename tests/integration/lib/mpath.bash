# Waits on a multipath device through blkstackd's control socket, for
# the multipath tests (mpath_nbd.sh, mpath_sd.sh). Needs daemon.bash
# (ctl, which leaves the output in $OUT).

# mpath_live_paths DEV TOTAL N: wait (up to 15 s) until `info DEV` says
# N of its TOTAL paths are live; fail otherwise.
mpath_live_paths() {
	local i
	for ((i = 0; i < 150; i++)); do
		ctl 0 info "$1"
		[[ $OUT == *"paths "*"$2 ($3 live)"* ]] && return 0
		sleep 0.1
	done
	fail "not $3 live paths: $OUT"
}

# mpath_wait_failed DEV IDX NAME TRIES CMD...: up to TRIES times, look
# whether `info DEV` says path IDX (NAME) is failed, and run CMD between
# looks (a sleep, or I/O: a dead path fails only when a request on it
# runs into its timeout). 0 once failed; 1 otherwise, with the last
# `info DEV` in $OUT.
mpath_wait_failed() {
	local dev=$1 idx=$2 name=$3 tries=$4 i
	shift 4
	for ((i = 0; i < tries; i++)); do
		ctl 0 info "$dev"
		[[ $OUT =~ path$idx[^$'\n']*$name\ failed ]] && return 0
		"$@"
	done
	return 1
}

# mpath_reads URI [QEMU-IO OPTION...]: three 4 KiB reads through URI,
# whatever they return (to keep requests going to every path).
mpath_reads() {
	local uri=$1
	shift
	timeout 30 qemu-io -f raw "$@" "$uri" -c "read 0 4k" -c "read 4k 4k" \
		-c "read 8k 4k" >/dev/null 2>&1 || true
}
