#!/usr/bin/env bash
# NFS throughput beside nfs-ganesha, serving the same host directory (one
# server at a time): sequential write of an N GiB file of random bytes
# (`blkstack nfs put`), then sequential reads of it (`blkstack nfs cat`,
# and libnfs's `nfs-cat` over NFS 4.0 as a second, independent client),
# each checked byte for byte against the source. Server CPU seconds per
# GiB and peak RSS from time -v. Markdown on stdout.
#
# Random-access rows are missing: Debian's fio has no NFS engine and the
# userspace clients here (blkstack nfs, libnfs's utilities, pynfs) read
# and write whole files only.
#
# Knobs: NFS_RW_GIB (default 2; 1 with BENCH_QUICK=1).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_dir

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

echo "### NFS throughput: ${GIB} GiB, one file, the same host directory"
echo

# ---- blkstackd's host-directory export ----
P=$(free_port)
cat >"$BENCH_DIR/rw.ini" <<CONF
[daemon]
state_dir = $BENCH_DIR/state
[export dir]
type = nfs
path = $SHARE
listen = 127.0.0.1:$P
lease = 10
grace = 0
CONF
start_server blkstackd "$P" "$BLKSTACKD" -f -c "$BENCH_DIR/rw.ini"
libnfs_url=-
((HAVE_LIBNFS)) && libnfs_url="nfs://127.0.0.1/d/f?version=4&nfsport=$P"
measure blkstackd "$P" "" "$libnfs_url"
read -r BD_CPU BD_RSS <<<"$(stop_server)"

# ---- nfs-ganesha (VFS) on the same directory ----
G_CPU=- G_RSS=-
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
	read -r G_CPU G_RSS <<<"$(STOP_SECONDS=10 stop_server)"
else
	echo "(nfs-ganesha not installed or not root: its rows are left out)"
	echo
fi

# the table: MiB/s, and against ganesha's row of the same client op
declare -A GANESHA=()
for r in "${ROWS[@]}"; do
	IFS='|' read -r s o t w <<<"$r"
	[[ $s == nfs-ganesha ]] && GANESHA[$o]=$t
done
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
# CPU seconds per GiB the server moved (every row is GIB GiB)
nrows() { local r k=0; for r in "${ROWS[@]}"; do [[ $r == "$1|"* ]] && k=$((k + 1)); done; echo "$k"; }
cpg() { awk -v c="$1" -v g="$2" -v n="$3" 'BEGIN {if (c != "-" && g * n > 0) printf "%.2f", c / (g * n); else print "-"}'; }
echo "Server CPU per GiB moved, over all its rows: blkstackd $(cpg "$BD_CPU" "$GIB" "$(nrows blkstackd)") s/GiB (peak RSS $(mib "$BD_RSS") MiB), nfs-ganesha $(cpg "$G_CPU" "$GIB" "$(nrows nfs-ganesha)") s/GiB (peak RSS $([[ $G_RSS == - ]] && echo - || mib "$G_RSS") MiB)."
echo "'x nfs-ganesha' above 1.0: blkstackd is faster for that client and operation. Both servers write to and read from the same directory on the same disk, one after the other; the client is the same program for both."
rm -f "$SRC" "$SHARE/d/f"
own_targets_summary >/dev/null 2>&1 || true
