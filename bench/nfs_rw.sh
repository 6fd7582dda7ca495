#!/usr/bin/env bash
# NFS throughput beside nfs-ganesha, serving the same host directory (one
# server at a time): sequential write of an N GiB file of random bytes
# (`blkstack nfs put`), then sequential reads of it (`blkstack nfs cat`,
# and libnfs's `nfs-cat` over NFS 4.0 as a second, independent client),
# each checked byte for byte against the source. Server CPU seconds per
# GiB and peak RSS from time -v. Markdown on stdout.
#
# A second table comes from bench/tools/nfsio (libnfs's asynchronous
# API over NFS 4.0, many requests in flight; Debian's fio has no NFS
# engine): 1 MiB sequential writes at queue depth 1 and 8 and reads at 8
# over an N GiB file, 4 KiB random reads and writes at depth 1 and 16
# for JOB_SECONDS each, and a verified check (random writes of a pattern,
# read back at the same offsets). IOPS, MiB/s, p50/p99 latency, and the
# server's CPU seconds per GiB of that row (from /proc, the server
# process only). Left out, with a note, when libnfs-dev is missing.
#
# Knobs: NFS_RW_GIB (default 2; 1 with BENCH_QUICK=1), JOB_SECONDS.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_dir
NFSIO=$BUILD/bench/nfsio
HAVE_NFSIO=0
if "$BENCH_ROOT/bench/tools/build-nfsio.sh" "$NFSIO"; then HAVE_NFSIO=1; fi

GIB=$(pick 1 "${NFS_RW_GIB:-2}")
SHARE=$BENCH_DIR/rwshare
# the file lives in a subdirectory: libnfs's nfs-cat mounts the URL's
# directory and refuses an empty export path (a file in the root)
mkdir -p "$SHARE/d" "$BENCH_DIR/state"
SRC=$BENCH_DIR/rw.src
head -c $((GIB << 30)) /dev/urandom >"$SRC"
HAVE_LIBNFS=$(command -v nfs-cat >/dev/null && echo 1 || echo 0)

declare -a ROWS=()
# one server: put, cat twice (the second finds the file in the page cache),
# nfs-cat; fills ROWS with "server|client op|seconds|MiB/s"
measure() {	# NAME PORT PATH-ON-SERVER [nfs-cat URL or -]
	local name=$1 url=nfs://127.0.0.1:$2$3/d/f t op again
	rm -f "$SHARE/d/f"
	sync
	t=$(time_cmd "$BLKSTACK" nfs put "$SRC" "$url") || true
	ROWS+=("$name|sequential write (blkstack nfs put)|$t")
	cmp -s "$SRC" "$SHARE/d/f" || { echo "bench: $name: the file differs after put" >&2; ROWS[-1]+="|WRONG"; }
	for op in 1 2; do
		t=$(time_cmd bash -c "set -o pipefail; '$BLKSTACK' nfs cat '$url' | cmp -s - '$SRC'") || true
		again=""
		((op == 1)) || again=", again"
		ROWS+=("$name|sequential read (blkstack nfs cat)$again|$t")
	done
	if [[ $4 != - ]]; then
		t=$(time_cmd bash -c "set -o pipefail; nfs-cat '$4' | cmp -s - '$SRC'") || true
		ROWS+=("$name|sequential read (libnfs nfs-cat, NFS 4.0)|$t")
	fi
}

# ---- nfsio rows: one bounded libnfs load per row ----
declare -a IO_ROWS=()	# "server|workload|iops|mibs|p50|p99|cpu s/GiB|bytes"
server_ticks() {	# the running server's user+system CPU, in clock ticks
	local child
	child=$(pgrep -P "$SERVER_PID" | head -1)
	awk '{print $14 + $15}' "/proc/$child/stat" 2>/dev/null || echo 0
}
nfsio_row() {	# NAME LABEL URL NFSIO_ARGS...
	local name=$1 label=$2 url=$3 t0 t1 out iops=FAILED mibs=- p50=- p99=- cpg=- ok=right
	shift 3
	sync
	t0=$(server_ticks)
	if ! out=$(bounded "$NFSIO" "$@" "$url" 2>"$BENCH_DIR/nfsio.err"); then
		ok=FAILED
		tail -2 "$BENCH_DIR/nfsio.err" >&2
	fi
	t1=$(server_ticks)
	kv() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$out"; }
	if [[ -n $out ]]; then
		iops=$(kv iops) mibs=$(kv mibs) p50=$(kv p50_us) p99=$(kv p99_us)
		cpg=$(awk -v c=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v b="$(kv bytes)" \
			'BEGIN {if (b > 0) printf "%.2f", c / hz / (b / 1073741824); else print "-"}')
	fi
	IO_ROWS+=("$name|$label|$iops|$mibs|$p50|$p99|$cpg|$ok")
}
# Each sequential write makes a file of its own name: nfs-ganesha caches
# names for a while, and after an rm on the host its LOOKUP of the old
# name still finds the deleted file (it holds it open), so a write under
# that name would overwrite that file's pages in the cache instead of
# making a new file (seen: 10x faster pwrites, and no file on the host).
measure_nfsio() {	# NAME URL-OF-THE-DIRECTORY URL-QUERY
	local name=$1 dir=$2 q=$3 qd url
	((HAVE_NFSIO)) || return 0
	for qd in 1 8; do
		url="$dir/n$qd$q"
		nfsio_row "$name" "1 MiB sequential write, qd $qd" "$url" \
			-m seq -o write -b 1M -q "$qd" -s "${GIB}G" -C -t "$CLIENT_TIMEOUT"
		[[ $(stat -c %s "$SHARE/d/n$qd" 2>/dev/null) == $((GIB << 30)) ]] ||
			IO_ROWS[-1]="${IO_ROWS[-1]%|*}|WRONG (no ${GIB} GiB file on the host)"
		# the other rows use the last file written
		((qd == 8)) || rm -f "$SHARE/d/n$qd"
	done
	nfsio_row "$name" "1 MiB sequential read, qd 8" "$url" \
		-m seq -o read -b 1M -q 8 -s "${GIB}G" -C -t "$CLIENT_TIMEOUT"
	for qd in 1 16; do
		nfsio_row "$name" "4 KiB random read, qd $qd" "$url" \
			-m rand -o read -b 4k -q "$qd" -s "${GIB}G" -t "$JOB_SECONDS"
	done
	for qd in 1 16; do
		nfsio_row "$name" "4 KiB random write, qd $qd" "$url" \
			-m rand -o write -b 4k -q "$qd" -s "${GIB}G" -t "$JOB_SECONDS"
	done
	# the bytes: 4000 random blocks of a pattern, read back at the same
	# offsets (the same seed draws the same offsets)
	nfsio_row "$name" "4 KiB random write then read, verified (4000 blocks)" "$url" \
		-m rand -o write -b 4k -q 16 -s "${GIB}G" -n 4000 -S 42 -V -t "$CLIENT_TIMEOUT"
	if [[ ${IO_ROWS[-1]} == *"|right" ]]; then
		IO_ROWS=("${IO_ROWS[@]:0:${#IO_ROWS[@]}-1}")
		nfsio_row "$name" "4 KiB random write then read, verified (4000 blocks)" "$url" \
			-m rand -o read -b 4k -q 16 -s "${GIB}G" -n 4000 -S 42 -V -t "$CLIENT_TIMEOUT"
	fi
	rm -f "$SHARE/d/n8"
}

echo "### NFS throughput: ${GIB} GiB, one file, the same host directory"
echo

# ---- blkstackd's host-directory export ----
P=$(free_port)
cat >"$BENCH_DIR/rw.ini" <<CONF
[daemon]
state_dir = $BENCH_DIR/state
${BD_EVENT_LOOP:+event_loop = $BD_EVENT_LOOP}
[export dir]
type = nfs
path = $SHARE
listen = 127.0.0.1:$P
lease = 10
grace = 0
${BD_SEND_BUFFER:+send_buffer = $BD_SEND_BUFFER}
CONF
start_server blkstackd "$P" "$BLKSTACKD" -f -c "$BENCH_DIR/rw.ini"
libnfs_url=-
((HAVE_LIBNFS)) && libnfs_url="nfs://127.0.0.1/d/f?version=4&nfsport=$P"
measure blkstackd "$P" "" "$libnfs_url"
BD_SEQ_TICKS=$(server_ticks)
measure_nfsio blkstackd "nfs://127.0.0.1/d" "?version=4&nfsport=$P"
read -r BD_CPU BD_RSS <<<"$(stop_server)"

# ---- nfs-ganesha (VFS) on the same directory ----
G_CPU=- G_RSS=- G_SEQ_TICKS=-
if command -v ganesha.nfsd >/dev/null && ((EUID == 0)) &&
	ls /usr/lib/*/ganesha/libfsalvfs.so >/dev/null 2>&1; then
	GP=$(free_port)
	mkdir -p "$BENCH_DIR/grec"
	cat >"$BENCH_DIR/rwg.conf" <<CONF
NFS_CORE_PARAM { Protocols = 4; NFS_Port = $GP; Bind_addr = 127.0.0.1; Enable_NLM = false; Enable_RQUOTA = false; }
NFSv4 { Graceless = true; Lease_Lifetime = 10; RecoveryBackend = fs; RecoveryRoot = $BENCH_DIR/grec; Minor_Versions = 0, 1, 2; }
EXPORT { Export_Id = 1; Path = $SHARE; Pseudo = /export; Protocols = 4; Access_Type = RW; Squash = No_Root_Squash; SecType = sys; FSAL { Name = VFS; } }
LOG { Default_Log_Level = EVENT; }
CONF
	start_server ganesha "$GP" ganesha.nfsd -F -f "$BENCH_DIR/rwg.conf" \
		-L "$BENCH_DIR/rwg.log" -p "$BENCH_DIR/rwg.pid" -N NIV_EVENT
	libnfs_url=-
	((HAVE_LIBNFS)) && libnfs_url="nfs://127.0.0.1/export/d/f?version=4&nfsport=$GP"
	measure nfs-ganesha "$GP" /export "$libnfs_url"
	G_SEQ_TICKS=$(server_ticks)
	measure_nfsio nfs-ganesha "nfs://127.0.0.1/export/d" "?version=4&nfsport=$GP"
	read -r G_CPU G_RSS <<<"$(STOP_SECONDS=10 stop_server)"
else
	echo "(nfs-ganesha not installed or not root: its rows are left out)"
	echo
fi

# nfs-ganesha's third field ("server|op|value|...": seconds, IOPS) per op
ganesha_by_op() {	# NAME-OF-AN-ASSOCIATIVE-ARRAY ROW...
	local -n by_op=$1
	local r f
	shift
	for r in "$@"; do
		IFS='|' read -r -a f <<<"$r"
		# shellcheck disable=SC2034,SC2004 # by_op: the caller's associative array
		[[ ${f[0]} == nfs-ganesha ]] && by_op[${f[1]}]=${f[2]}
	done
	return 0
}

# the table: MiB/s, and against ganesha's row of the same client op
declare -A GANESHA=()
ganesha_by_op GANESHA "${ROWS[@]}"
echo "| client op | server | seconds | MiB/s | x nfs-ganesha | bytes |"
echo "|---|---|---:|---:|---:|---|"
for r in "${ROWS[@]}"; do
	IFS='|' read -r s o t w <<<"$r"
	mibs=$(awk -v t="$t" -v g="$GIB" 'BEGIN {if (t+0 > 0) printf "%.0f", g * 1024 / t; else print "-"}')
	x=-
	[[ $s == blkstackd ]] && x=$(ratio "${GANESHA[$o]:-}" "$t")
	echo "| $o | $s | $t | $mibs | $x | ${w:-right} |"
done
echo
# CPU seconds per GiB the server moved in the rows above (every row is GIB
# GiB): its CPU time when they were done (the nfsio rows came after)
ticks_s() { awk -v t="$1" -v hz="$(getconf CLK_TCK)" 'BEGIN {if (t == "-") print "-"; else printf "%.2f", t / hz}'; }
BD_CPU=$(ticks_s "$BD_SEQ_TICKS") G_CPU=$(ticks_s "$G_SEQ_TICKS")
nrows() { local r k=0; for r in "${ROWS[@]}"; do [[ $r == "$1|"* ]] && k=$((k + 1)); done; echo "$k"; }
cpg() { awk -v c="$1" -v g="$2" -v n="$3" 'BEGIN {if (c != "-" && g * n > 0) printf "%.2f", c / (g * n); else print "-"}'; }
echo "Server CPU per GiB moved, over all its rows of this table: blkstackd $(cpg "$BD_CPU" "$GIB" "$(nrows blkstackd)") s/GiB (peak RSS over both tables $(mib "$BD_RSS") MiB), nfs-ganesha $(cpg "$G_CPU" "$GIB" "$(nrows nfs-ganesha)") s/GiB (peak RSS $([[ $G_RSS == - ]] && echo - || mib "$G_RSS") MiB)."
echo "'x nfs-ganesha' above 1.0: blkstackd is faster for that client and operation. Both servers write to and read from the same directory on the same disk, one after the other; the client is the same program for both."
echo
if ((HAVE_NFSIO)); then
	declare -A G_IOPS=()
	ganesha_by_op G_IOPS "${IO_ROWS[@]}"
	echo "### NFS I/O with libnfs (bench/tools/nfsio, NFS 4.0, requests in flight = qd): ${GIB} GiB file, random rows ${JOB_SECONDS} s"
	echo
	echo "| workload | server | IOPS | MiB/s | p50 us | p99 us | server CPU s/GiB | x nfs-ganesha | bytes |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|---|"
	for r in "${IO_ROWS[@]}"; do
		IFS='|' read -r s o i m p50 p99 c ok <<<"$r"
		x=-
		[[ $s == blkstackd ]] && x=$(ratio "$i" "${G_IOPS[$o]:-}")
		echo "| $o | $s | $i | $m | $p50 | $p99 | $c | $x | $ok |"
	done
	echo
	echo "Sequential writes end with a COMMIT, inside the time (libnfs writes UNSTABLE4). 'x nfs-ganesha' is the IOPS ratio; latency is per request, sent to answered."
else
	echo "(bench/tools/nfsio not built: libnfs-dev is missing, scripts/deps.sh; its rows are left out)"
fi
rm -f "$SRC" "$SHARE/d/f"
own_targets_summary >/dev/null 2>&1 || true
