#!/usr/bin/env bash
# libiscsi's iscsi-test-cu against the target (issue 13, part 1): every
# family in its own process (a crash or hang ends one family, not the
# run), --dataloss on a scratch thin-provisioned LUN (a file device that
# punches holes), MultipathIO with the same LUN as a second path, ReadOnly
# on LUN 1 (the same device, read-only).
#
# The test counts passed / failed / skipped tests (a test that printed
# [SKIPPED] and passed counts as skipped), prints every failure and skip,
# and fails on:
# - a family that crashed or hung;
# - a failure not in KNOWN_FAIL below (a new failure is the target's
#   until shown otherwise), and a KNOWN_FAIL entry that did not fail (it
#   passes now, or is gone: the list and docs/iscsi.md must say so);
# - a skip not matched by KNOWN_SKIP (a skip hides a check: LBPU lost
#   would skip the GET LBA STATUS family silently), and a KNOWN_SKIP
#   pattern that matched nothing;
# - fewer than PASS_FLOOR passes.
# Each known entry must be named in docs/iscsi.md, with the same reason.
#
# GetLBAStatus.UnmapSingle fails where the LUN's physical block holds
# several logical blocks (LBPPBE > 0: the file device reports the file
# system's 4 KiB block under 512-byte logical blocks). To show the core is
# not at fault, the family also runs on LUN 2, a file device with 4 KiB
# logical blocks (LBPPBE 0), where every test of it must pass.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need iscsi-test-cu iscsi-readcapacity16 python3
PASS_FLOOR=${PASS_FLOOR:-200}
DOC="$(dirname "$0")/../../docs/iscsi.md"

# ---- the known results: the one place they are kept ----------------------
declare -A KNOWN_FAIL=(
	[ALL.GetLBAStatus.UnmapSingle]="asks at LBA i + 1 and wants the first descriptor at i + 2^LBPPBE; SBC-4 puts the first descriptor at the LBA asked"
	[ALL.WriteSame10.UnmapUntilEnd]="wants zeroes back from WRITE SAME UNMAP with a block of 0xFF bytes; a non-zero block is written (the UNMAP bit is a hint)"
)
declare -A KNOWN_SKIP=(
	["ALL.Sanitize.*"]="SANITIZE: the run does not pass --allow-sanitize"
	["ALL.WriteAtomic16.*"]="WRITE ATOMIC(16) is not implemented"
	["ALL.PreventAllow.*"]="the LU is not removable (RMB 0)"
	[ALL.StartStopUnit.Simple]="the LU is not removable (RMB 0)"
)
# ---------------------------------------------------------------------------

for k in "${!KNOWN_FAIL[@]}" "${!KNOWN_SKIP[@]}"; do
	short=${k#ALL.}
	short=${short%.\*}
	grep -qF "$short" "$DOC" ||
		fail "known result $k is not named in docs/iscsi.md"
done

daemon_setup
cat >>"$T/d.ini" <<EOC
[device scratch]
type = file
path = $T/scratch.img
size = 64M
[device scratch4k]
type = file
path = $T/scratch4k.img
size = 64M
logical_block_size = 4096
[export cu]
type = iscsi
unit.0 = scratch
unit.1 = scratch
unit.1.readonly = 1
unit.2 = scratch4k
listen = 127.0.0.1:$PORT
EOC
start_daemon "$T/d.ini"
URL=iscsi://127.0.0.1:$PORT/iqn.2026-12.org.blkstack:cu/0

# LBPPBE of a LUN, from READ CAPACITY(16)
lbppbe() {
	timeout 20 iscsi-readcapacity16 "$1" |
		sed -n 's/.*PHYSICAL BLOCK EXPONENT:\([0-9]*\).*/\1/p'
}
e0=$(lbppbe "$URL") && [[ -n $e0 ]] || fail "READ CAPACITY(16) of LUN 0"
e2=$(lbppbe "${URL%/0}/2") && [[ -n $e2 ]] || fail "READ CAPACITY(16) of LUN 2"
((e2 == 0)) || fail "LUN 2 (4 KiB logical blocks) has LBPPBE $e2, not 0"
note "LBPPBE: LUN 0 $e0, LUN 2 $e2"
# on a file system with 512-byte blocks LUN 0 has LBPPBE 0 and it passes
((e0 > 0)) || unset 'KNOWN_FAIL[ALL.GetLBAStatus.UnmapSingle]'

# run_family FAMILY LOG URL...: one iscsi-test-cu process
run_family() {
	local f=$1 log=$2 rc=0
	shift 2
	timeout 300 iscsi-test-cu --dataloss -v -t "$f" "$@" >"$log" 2>&1 ||
		rc=$?
	# CUnit returns 0 with failures inside; a signal or timeout is >= 124
	if ((rc >= 124)) || ! grep -q "Run Summary" "$log"; then
		bad+=("$f (exit $rc)")
		tail -5 "$log" >&2
	fi
	kill -0 "$DPID" 2>/dev/null || fail "blkstackd died during $f"
}

# results LOG...: "FAMILY.TEST pass|fail SKIPPED(0|1)" per test
results() {
	local f
	for f in "$@"; do
		awk -v fam="$(basename "$f" .log)" '
			/^  Test: / { if (t) print fam "." t, st, sk
				      t = $2; st = "fail"; sk = 0 }
			/\[SKIPPED\]/ { sk = 1 }
			/\.\.\.passed|^passed/ { st = "pass" }
			/FAILED$/ { st = "fail" }
			END { if (t) print fam "." t, st, sk }' "$f"
	done
}

families=$(iscsi-test-cu --list | grep -E '^ALL\.[A-Za-z0-9]+$')
[[ -n $families ]] || fail "iscsi-test-cu --list gave no families"
bad=()
for f in $families; do
	args=("$URL")
	[[ $f == ALL.MultipathIO ]] && args+=("$URL")
	# the read-only family wants a write-protected LUN: LUN 1
	[[ $f == ALL.ReadOnly ]] && args=("${URL%/0}/1")
	run_family "$f" "$T/$f.log" "${args[@]}"
done
mkdir "$T/lun2"
run_family ALL.GetLBAStatus "$T/lun2/ALL.GetLBAStatus.log" "${URL%/0}/2"

results "$T"/ALL.*.log >"$T/results"
pass=$(awk '$2 == "pass" && !$3' "$T/results" | wc -l)
skip=$(awk '$2 == "pass" && $3' "$T/results" | wc -l)
failed=$(awk '$2 != "pass"' "$T/results" | wc -l)
total=$(wc -l <"$T/results")
echo "iscsi-test-cu: $total tests: $pass passed, $failed failed, $skip skipped"

problems=()
declare -A failed_seen=() skip_used=()
while read -r name st sk; do
	if [[ $st != pass ]]; then
		failed_seen[$name]=1
		if [[ -n ${KNOWN_FAIL[$name]:-} ]]; then
			echo "  failed $name (known: ${KNOWN_FAIL[$name]})"
		else
			echo "  FAILED $name (not a known failure)"
			problems+=("new failure $name")
		fi
	elif ((sk)); then
		why=
		for p in "${!KNOWN_SKIP[@]}"; do
			# shellcheck disable=SC2053 # the key is a glob
			[[ $name == $p ]] && { why=${KNOWN_SKIP[$p]}; skip_used[$p]=1; }
		done
		if [[ -n $why ]]; then
			echo "  skipped $name (known: $why)"
		else
			echo "  SKIPPED $name (not a known skip)"
			problems+=("new skip $name")
		fi
	fi
done <"$T/results"
for k in "${!KNOWN_FAIL[@]}"; do
	[[ -n ${failed_seen[$k]:-} ]] ||
		problems+=("known failure $k did not fail (passes now, or was not run): update KNOWN_FAIL and docs/iscsi.md")
done
for p in "${!KNOWN_SKIP[@]}"; do
	[[ -n ${skip_used[$p]:-} ]] ||
		problems+=("known skip $p matched no skipped test: update KNOWN_SKIP and docs/iscsi.md")
done

# LUN 2 (LBPPBE 0): the GET LBA STATUS family passes whole
results "$T/lun2/ALL.GetLBAStatus.log" >"$T/results2"
[[ -s $T/results2 ]] || problems+=("no GET LBA STATUS results on LUN 2")
while read -r name st sk; do
	if [[ $st != pass ]] || ((sk)); then
		problems+=("LUN 2 (LBPPBE 0): $name $st (skipped: $sk)")
	else
		echo "  LUN 2 (LBPPBE 0): $name passed"
	fi
done <"$T/results2"

((${#bad[@]} == 0)) || fail "families that crashed or hung: ${bad[*]}"
stop_daemon
((${#problems[@]} == 0)) || fail "$(printf '%s; ' "${problems[@]}")"
((pass >= PASS_FLOOR)) || fail "$pass tests passed, below the floor $PASS_FLOOR"
echo "PASS: iscsi_test_cu"
