#!/usr/bin/env bash
# Device write errors in the middle of every fs operation (issue 10 item 1).
# An error device over the image fails every write once N have passed; for
# each operation N sweeps from 0 until the operation succeeds. After each
# run, on the image:
#   - the command exits 0 and e2fsck -fn is clean, or
#   - it exits 1 with one error line naming the subcommand, and either
#     e2fsck -fn is clean, or the superblock says "not clean" (and no
#     block is in use but free in the on-disk bitmap), the line
#     says to run e2fsck -f, a read-write open refuses until then, and
#     e2fsck -fy repairs it (exit 0 or 1, then -fn clean) without touching
#     the files the operation did not name.
# docs/fs.md ("When an operation fails") states this guarantee.
# check: alone (CPU-heavy sweeps, already two at a time; it timed out under load once)
source "$(dirname "$0")/lib/cli-common.bash"
has_type file || skip "no 'file' device type in this build"
has_type error || skip "no 'error' device type in this build"
command -v e2fsck >/dev/null || skip "e2fsck not installed"
command -v dumpe2fs >/dev/null || skip "dumpe2fs not installed"
command -v debugfs >/dev/null || skip "debugfs not installed"
make_tmp

BASE="$T/base.img"
IMG="$T/w.img"
MAX_N=120 # writes an operation may make here before it succeeds

truncate -s 32M "$BASE"
run_bs 0 fs mkfs "file:$BASE"
head -c 3M /dev/urandom >"$T/keep"
OTHER=$T/other
head -c 1M /dev/urandom >"$OTHER"
head -c 2M /dev/urandom >"$T/new"
run_bs 0 fs put "file:$BASE" "$T/keep" /keep
run_bs 0 fs put "file:$BASE" "$T/other" /other
run_bs 0 fs put "file:$BASE" "$T/new" /victim
run_bs 0 fs mkdir "file:$BASE" /d
BIGX=$(head -c 2000 /dev/zero | tr '\0' x)
run_bs 0 fs setfattr "file:$BASE" /victim user.big "$BIGX"
e2fsck -fn "$BASE" >/dev/null 2>&1 || fail "the base image is not clean"

config() {
	cat >"$T/e.ini" <<INI
[device f]
type = file
path = $IMG

[device e]
type = error
devices = f
ops = write
errno = EIO
after = $1
INI
}

# check_other: /other (never named by an operation) is intact, as
# e2fsprogs' debugfs reads it (an independent reader, and without a
# sanitizer's start-up cost on each of the ~200 runs)
check_other() {
	debugfs -R "cat /other" "$IMG" 2>/dev/null | cmp -s - "$OTHER" ||
		fail "$1: /other changed"
}

runs=0 dirty=0
# sweep NAME ARGS...: the blkstack fs ARGS (DEV is "e") for every N
sweep() {
	local name=$1 n rc out state
	shift
	for ((n = 0; n <= MAX_N; n++)); do
		cp --sparse=always "$BASE" "$IMG"
		config "$n"
		rc=0
		"$BS" -c "$T/e.ini" fs "$@" >"$T/out" 2>"$T/err" || rc=$?
		ERR=$(cat "$T/err")
		runs=$((runs + 1))
		[[ $ERR != *Sanitizer* && $ERR != *"runtime error:"* ]] ||
			{ echo "$ERR" >&2; fail "$name n=$n: sanitizer report"; }
		((rc == 0 || rc == 1)) || { echo "$ERR" >&2; fail "$name n=$n: exit $rc"; }
		if ((rc == 1)); then
			expect_err "fs $1" "Input/output error"
		fi
		rc2=0
		out=$(e2fsck -fn "$IMG" 2>&1) || rc2=$?
		if ((rc2 != 0)); then
			((rc == 1)) || { echo "$out" >&2; fail "$name n=$n: exit 0 but e2fsck -fn exit $rc2"; }
			dirty=$((dirty + 1))
			# an allocation is on disk before anything links it:
			# blocks can leak (-), never be in use yet free (+)
			! grep -Eq 'Block bitmap differences:.*\+[(0-9]' <<<"$out" ||
				{ echo "$out" >&2; fail "$name n=$n: blocks in use but free on disk"; }
			state=$(dumpe2fs -h "$IMG" 2>/dev/null | awk -F: '/^Filesystem state/ { gsub(/^ +/, "", $2); print $2 }')
			[[ $state == "not clean"* ]] ||
				{ echo "$out" >&2; fail "$name n=$n: e2fsck -fn exit $rc2 with state '$state'"; }
			[[ $ERR == *"run e2fsck -f"* ]] ||
				fail "$name n=$n: e2fsck needed but the error does not say so: $ERR"
			run_bs 1 fs mkdir "file:$IMG" /x
			expect_err "not cleanly unmounted" "e2fsck"
			rc2=0
			e2fsck -fy "$IMG" >"$T/fsck" 2>&1 || rc2=$?
			((rc2 <= 1)) || { cat "$T/fsck" >&2; fail "$name n=$n: e2fsck -fy exit $rc2"; }
			out=$(e2fsck -fn "$IMG" 2>&1) ||
				{ echo "$out" >&2; fail "$name n=$n: not clean after e2fsck -fy"; }
		fi
		check_other "$name n=$n"
		if ((rc == 0)); then
			note "$name: succeeds once $n writes pass"
			return 0
		fi
	done
	fail "$name: still failing with $MAX_N writes passing"
}

# The sweeps are independent (each its own copy of the image, config and
# output files): two run at a time, one per CPU of the test machine.
# psweep NAME ARGS...: sweep in the background, in its own directory
nsw=0
psweep() {
	nsw=$((nsw + 1))
	if (($(jobs -rp | wc -l) >= 2)); then
		wait -n || true
	fi
	(
		T=$T/sweep$nsw
		mkdir -p "$T"
		IMG=$T/w.img
		runs=0 dirty=0
		sweep "$@"
		echo "$runs $dirty" >"$T/counts"
	) >"$T/sweep$nsw.log" 2>&1 &
}

psweep "put" put e "$T/new" /new
psweep "put over a file" put e "$T/new" /keep
psweep "fallocate" fallocate -l 4M e /keep
psweep "fallocate -w" fallocate -w -o 1M -l 4M e /keep
psweep "fallocate -z" fallocate -z -o 4097 -l 1M e /keep
psweep "fallocate -p" fallocate -p -o 4097 -l 1M e /keep
psweep "truncate" truncate -s 1000000 e /keep
psweep "rm" rm e /keep
psweep "mkdir" mkdir e /d/sub
psweep "mv" mv e /keep /d/keep2
psweep "mv over a file" mv e /keep /victim
LONG=$(printf '/target%.0s' $(seq 500))
psweep "ln -s (a block)" ln -s e "$LONG" /d/sl
psweep "ln -s (fast)" ln -s e keep /d/sl
psweep "ln" ln e /keep /d/k2
psweep "chmod" chmod e 600 /keep
psweep "touch -d" touch -d 1.5 e /keep
psweep "mknod" mknod e /d/c c 1 3
psweep "setfattr (in the inode)" setfattr e /keep user.s small
psweep "setfattr (a new block)" setfattr e /keep user.big "$BIGX"
psweep "setfattr (the block rewritten)" setfattr e /victim user.more more
psweep "setfattr -x (the block freed)" setfattr -x user.big e /victim
wait

# every sweep's lines in order, then its verdict (a sweep that failed
# wrote no counts)
bad=0
for ((i = 1; i <= nsw; i++)); do
	cat "$T/sweep$i.log"
	if [[ -f $T/sweep$i/counts ]]; then
		read -r r d <"$T/sweep$i/counts"
		runs=$((runs + r)) dirty=$((dirty + d))
	else
		bad=$((bad + 1))
	fi
done
((bad == 0)) || fail "$bad of $nsw sweeps failed (their lines above)"
echo "$runs runs, $dirty left for e2fsck -fy"
echo "PASS"
