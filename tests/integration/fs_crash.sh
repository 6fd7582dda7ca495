#!/usr/bin/env bash
# Crash ordering of FALLOC_FL_WRITE_ZEROES on blkstack's ext4: an image full
# of a stale pattern gets a filesystem, then `fs fallocate -w` of a large
# range is SIGKILLed at random points, round after round. After e2fsck -fy
# no file may expose a pattern byte (a block marked written before its
# zeroes were durable would), and e2fsck -fn must then be clean. Then the
# same for `fs put` of random data.
source "$(dirname "$0")/lib/cli-common.bash"
has_type file || skip "no 'file' device type in this build"
command -v e2fsck >/dev/null || skip "e2fsck not installed"
make_tmp

BASE="$T/base.img"
IMG="$T/fs.img"
DEV="file:$IMG"
PATTERN='STALE!PATTERN'
ROUNDS=${ROUNDS:-10}
LIMIT=${LIMIT:-35} # seconds for all rounds

{ yes "$PATTERN" || true; } | head -c 256M >"$BASE"
run_bs 0 fs mkfs "file:$BASE"
run_bs 0 info --json "file:$BASE"
jq -e '.write_zeroes_unmap == true' <<<"$OUT" >/dev/null ||
	skip "the file device here has no write_zeroes_unmap"

# exposes FILE...: does any of the files read back a pattern byte?
exposes() {
	local p
	for p in "$@"; do
		"$BS" fs cat "$DEV" "$p" 2>/dev/null | grep -aFq "$PATTERN" && {
			echo "$p exposes stale bytes" >&2
			return 0
		}
	done
	return 1
}

# All regular files of / and /lost+found (where e2fsck puts orphans).
files() {
	local d
	for d in / /lost+found/; do
		"$BS" fs ls -l "$DEV" "$d" 2>/dev/null |
			awk -v d="$d" '$1 ~ /^-/ { print d $NF }'
	done
}

note "an unkilled run: the time it takes, zeroes read back"
cp "$BASE" "$IMG" && sync "$IMG"
t0=$(date +%s%N)
run_bs 0 fs fallocate -w -o 5000 -l 200M "$DEV" /f
t1=$(date +%s%N)
dur_ms=$(((t1 - t0) / 1000000))
((dur_ms > 0)) || dur_ms=1
echo "fallocate -w 200M took ${dur_ms} ms"
exposes /f && fail "an unkilled WRITE_ZEROES file exposes stale bytes"
e2fsck -fn "$IMG" >/dev/null 2>&1 || fail "e2fsck -fn after an unkilled run"

start=$SECONDS
killed=0
for ((r = 1; r <= ROUNDS; r++)); do
	((SECONDS - start < LIMIT)) || { note "time is up after $((r - 1)) rounds"; break; }
	cp "$BASE" "$IMG" && sync "$IMG"
	# a random point inside the run (up to 1.2 x its unkilled time)
	delay_ms=$((RANDOM % (dur_ms * 12 / 10 + 1)))
	"$BS" fs fallocate -w -o $((RANDOM * 7)) -l 200M "$DEV" /f \
		>/dev/null 2>&1 &
	pid=$!
	sleep "$(printf '0.%03d' "$delay_ms")"
	if kill -KILL "$pid" 2>/dev/null; then
		killed=$((killed + 1))
	else
		# it had finished: aim earlier from now on
		dur_ms=$((dur_ms * 2 / 3 + 1))
	fi
	wait "$pid" 2>/dev/null || true
	rc=0
	e2fsck -fy "$IMG" >"$T/fsck.log" 2>&1 || rc=$?
	((rc < 4)) || { cat "$T/fsck.log" >&2; fail "round $r: e2fsck -fy exit $rc"; }
	rc=0
	e2fsck -fn "$IMG" >"$T/fsck.log" 2>&1 || rc=$?
	((rc == 0)) || { cat "$T/fsck.log" >&2; fail "round $r: e2fsck -fn not clean after -fy"; }
	mapfile -t list < <(files)
	state=
	[[ " ${list[*]:-} " == *" /f "* ]] && state=$("$BS" fs map "$DEV" /f 2>/dev/null |
		awk '$NF == "written" {w++} $NF == "unwritten" {u++}
		     END {printf "%d written, %d unwritten extents", w, u}' || true)
	echo "round $r: killed after ${delay_ms} ms; files: ${list[*]:-none}; /f: ${state:-absent}"
	if ((${#list[@]})) && exposes "${list[@]}"; then
		fail "round $r: stale bytes visible after the crash"
	fi
	# the filesystem is usable again: write zeroes finishes now
	run_bs 0 fs fallocate -w -l 1M "$DEV" /after
	exposes /after && fail "round $r: /after exposes stale bytes"
done
echo "$killed of $((r - 1)) runs killed mid-way"

note "the same for fs put (whole blocks are allocated unwritten first)"
head -c 64M /dev/urandom >"$T/data"
cp "$BASE" "$IMG" && sync "$IMG"
t0=$(date +%s%N)
run_bs 0 fs put "$DEV" "$T/data" /p
dur_ms=$((($(date +%s%N) - t0) / 1000000 + 1))
"$BS" fs cat "$DEV" /p | cmp - "$T/data" || fail "fs put: /p differs"
for ((r = 1; r <= ROUNDS / 2; r++)); do
	((SECONDS - start < LIMIT + 10)) || break
	cp "$BASE" "$IMG" && sync "$IMG"
	delay_ms=$((RANDOM % (dur_ms * 12 / 10 + 1)))
	"$BS" fs put "$DEV" "$T/data" /p >/dev/null 2>&1 &
	pid=$!
	sleep "$(printf '0.%03d' "$delay_ms")"
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	rc=0
	e2fsck -fy "$IMG" >"$T/fsck.log" 2>&1 || rc=$?
	((rc < 4)) || { cat "$T/fsck.log" >&2; fail "put round $r: e2fsck -fy exit $rc"; }
	e2fsck -fn "$IMG" >"$T/fsck.log" 2>&1 || { cat "$T/fsck.log" >&2; fail "put round $r: not clean after -fy"; }
	mapfile -t list < <(files)
	echo "put round $r: killed after ${delay_ms} ms; files: ${list[*]:-none}"
	if ((${#list[@]})) && exposes "${list[@]}"; then
		fail "put round $r: stale bytes visible after the crash"
	fi
done
echo "PASS"
