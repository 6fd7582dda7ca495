#!/usr/bin/env bash
# NVMe Compare (opcode 05h) from a client blkstack did not write: pynvmeof,
# its capsules built in lib/nvmf_compare.py from pynvmeof's lower-level
# pieces (its compare_data() marks the data as coming by R2T but puts it
# in the capsule). Two subsystems over mem devices: s0 with in_capsule =
# 16K (Compares above it send their data by R2T/H2CData), s1 with the
# default 1 MiB (every Compare's data in its capsule). On each:
# - Identify Controller ONCS has Compare (bit 0);
# - equal data is success (4 KiB, 32 KiB, 1 MiB, 200 KiB);
# - data that differs is Compare Failure, SCT 2h SC 85h with DNR: one
#   byte off in 4 KiB, the last byte of 32 KiB, and in Compares longer
#   than the 64 KiB the target reads back at a time into its queue's
#   scratch: 1 MiB off in its first chunk, in its last chunk only, at
#   the first byte of its last chunk, and 200 KiB (three chunks and a
#   short one) off in the short last chunk only;
# - the data went in the capsule or by R2T as planned, and after the
#   Compares the device holds what was written (a Compare writes nothing);
# - no other command failed: each I/O queue's close line in the daemon's
#   log counts 6 errors, its six Compare Failures.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
source "$(dirname "$0")/lib/nvmf_peers.bash"
need python3
nvmf_peers
CMP=$(dirname "$0")/lib/nvmf_compare.py
daemon_setup
daemon_threads 2	# the queues of the two clients on two I/O threads
PORT2=$(free_port)
cat >>"$T/d.ini" <<EOC
[device da]
type = mem
size = 16M
[device db]
type = mem
size = 16M
[export s0]
type = nvmf
listen = 127.0.0.1:$PORT
in_capsule = 16K
device = da
[export s1]
type = nvmf
listen = 127.0.0.1:$PORT2
device = db
EOC
start_daemon "$T/d.ini"

# expect OUT CASE VIA SCT SC DNR: the line of CASE says so
expect() {
	local line want
	line=$(grep "^case=$2 " <<<"$1") || fail "no line for case $2"
	want="via=$3 sct=$4 sc=$5 dnr=$6"
	[[ $line == *" $want" ]] || fail "$2: got '$line', want '$want'"
}

# check OUT VIA_MID VIA_BIG: every case of one subsystem; the 32 KiB
# Compare's data goes VIA_MID, the 1 MiB and 200 KiB ones' VIA_BIG
check() {
	local out=$1 mid=$2 big=$3 oncs
	oncs=$(sed -n 's/^oncs=\([0-9]*\) .*/\1/p' <<<"$out")
	[[ -n $oncs ]] || fail "no ONCS line"
	((oncs & 1)) || fail "ONCS $oncs: Compare (bit 0) not advertised"
	expect "$out" small-equal capsule 0 0x00 0
	expect "$out" small-differs capsule 2 0x85 1
	expect "$out" mid-equal "$mid" 0 0x00 0
	expect "$out" mid-differs "$mid" 2 0x85 1
	expect "$out" big-equal "$big" 0 0x00 0
	expect "$out" big-differs-first-chunk "$big" 2 0x85 1
	expect "$out" big-differs-last-chunk "$big" 2 0x85 1
	expect "$out" big-differs-chunk-edge "$big" 2 0x85 1
	expect "$out" odd-equal "$big" 0 0x00 0
	expect "$out" odd-differs-last-chunk "$big" 2 0x85 1
	expect "$out" big-equal-again "$big" 0 0x00 0
	grep -qx unchanged <<<"$out" || fail "the device changed"
}

note "s0, in_capsule = 16K: 4 KiB in the capsule, 32 KiB and more by R2T"
out=$(timeout 120 python3 "$CMP" "$PORT" nqn.2026-12.org.blkstack:s0 2>&1) ||
	fail "compare on s0: $out"
echo "$out"
grep -q ' incapsule=16384 ' <<<"$out" || fail "s0: in-capsule size is not 16 KiB"
check "$out" r2t r2t

note "s1, in_capsule = 1M (default): every Compare's data in its capsule"
out=$(timeout 120 python3 "$CMP" "$PORT2" nqn.2026-12.org.blkstack:s1 2>&1) ||
	fail "compare on s1: $out"
echo "$out"
grep -q ' incapsule=1048576 ' <<<"$out" || fail "s1: in-capsule size is not 1 MiB"
check "$out" capsule capsule

stop_daemon
# each I/O queue answered its six Compare Failures and nothing else failed
errs=$(grep -o 'close nqn[^ ]* queue [1-9][0-9]* .* commands, [0-9]* errors' \
	"$T/d.log" | sed 's/.* \([0-9]*\) errors$/\1/' | sort | uniq -c)
echo "I/O queue errors (count x value): $errs"
[[ $(awk '{n += $1; if ($2 != 6) bad = 1} END {print n, bad + 0}' \
	<<<"$errs") == "2 0" ]] || fail "I/O queues failed other commands: $errs"
echo PASS
