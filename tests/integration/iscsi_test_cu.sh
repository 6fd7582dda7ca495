#!/usr/bin/env bash
# libiscsi's iscsi-test-cu against the target (issue 13, part 1): every
# family in its own process (a crash or hang ends one family, not the
# run), --dataloss on a scratch thin-provisioned LUN (a file device that
# punches holes), MultipathIO with the same LUN as a second path, ReadOnly
# on LUN 1 (the same device, read-only). The
# test counts passed / failed / skipped tests (a test that printed
# [SKIPPED] and passed counts as skipped), prints every failure, and
# asserts: no family crashed or hung, and at least PASS_FLOOR passed (the
# count reached when this was written, so a regression shows). The
# counts and the reasons for the remaining failures are in docs/iscsi.md.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need iscsi-test-cu python3
PASS_FLOOR=${PASS_FLOOR:-200}
daemon_setup
cat >>"$T/d.ini" <<EOC
[device scratch]
type = file
path = $T/scratch.img
size = 64M
[export cu]
type = iscsi
unit.0 = scratch
unit.1 = scratch
unit.1.readonly = 1
listen = 127.0.0.1:$PORT
EOC
start_daemon "$T/d.ini"
URL=iscsi://127.0.0.1:$PORT/iqn.2026-12.org.blkstack:cu/0

families=$(iscsi-test-cu --list | grep -E '^ALL\.[A-Za-z0-9]+$')
[[ -n $families ]] || fail "iscsi-test-cu --list gave no families"
bad=()
for f in $families; do
	args=("$URL")
	[[ $f == ALL.MultipathIO ]] && args+=("$URL")
	# the read-only family wants a write-protected LUN: LUN 1
	[[ $f == ALL.ReadOnly ]] && args=("${URL%/0}/1")
	rc=0
	timeout 300 iscsi-test-cu --dataloss -v -t "$f" "${args[@]}" \
		>"$T/$f.log" 2>&1 || rc=$?
	# CUnit returns 0 with failures inside; a signal or timeout is >= 124
	if ((rc >= 124)) || ! grep -q "Run Summary" "$T/$f.log"; then
		bad+=("$f (exit $rc)")
		tail -5 "$T/$f.log" >&2
	fi
	kill -0 "$DPID" 2>/dev/null || fail "blkstackd died during $f"
done

cat "$T"/ALL.*.log | awk '
	/^  Test: / { if (name) print name, st, sk; name = $2; st = "fail"; sk = 0 }
	/\[SKIPPED\]/ { sk = 1 }
	/\.\.\.passed|^passed/ { st = "pass" }
	/FAILED$/ { st = "fail" }
	END { if (name) print name, st, sk }' >"$T/results"
pass=$(awk '$2 == "pass" && !$3' "$T/results" | wc -l)
skip=$(awk '$2 == "pass" && $3' "$T/results" | wc -l)
failed=$(awk '$2 != "pass"' "$T/results" | wc -l)
total=$(wc -l <"$T/results")
echo "iscsi-test-cu: $total tests: $pass passed, $failed failed, $skip skipped"
for f in "$T"/ALL.*.log; do
	fam=$(basename "$f" .log)
	awk -v fam="$fam" '
		/^  Test: / { if (t && !ok) print "  FAILED " fam "." t; t = $2; ok = 0 }
		/\.\.\.passed|^passed/ { ok = 1 }
		/FAILED$/ { ok = 0 }
		END { if (t && !ok) print "  FAILED " fam "." t }' "$f"
done
for f in "$T"/ALL.*.log; do
	fam=$(basename "$f" .log)
	awk -v fam="$fam" '/^  Test: / { t = $2; s = 0 }
		/\[SKIPPED\]/ && !s { s = 1; sub(/.*\[SKIPPED\] */, "");
			print "  skipped " fam "." t ": " $0 }' "$f"
done
((${#bad[@]} == 0)) || fail "families that crashed or hung: ${bad[*]}"
stop_daemon
((pass >= PASS_FLOOR)) || fail "$pass tests passed, below the floor $PASS_FLOOR"
echo "PASS: iscsi_test_cu"
