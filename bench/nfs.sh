#!/usr/bin/env bash
# NFS v4.2 WRITE_SAME: N GiB of zeroes written to a file over NFS by
#   1. WRITE_SAME to blkstackd's ext4 export (a file device: unmap
#      zeroing) — the server's bs_write_same(), FALLOC_FL_WRITE_ZEROES in
#      the fs layer, written extents at metadata cost;
#   2. WRITE_SAME to blkstackd's host-directory export — the same
#      function; the host filesystem here has no FALLOC_FL_WRITE_ZEROES,
#      so the server writes the zeroes;
#   3. the client fallback to blkstackd (--fallback: bs_write_same() in
#      the client, WRITEs + COMMIT);
#   4. the client fallback to nfs-ganesha (which answers WRITE_SAME with
#      NFS4ERR_NOTSUPP): WRITEs + COMMIT;
#   5. plain WRITEs of a file of zeroes to ganesha (`blkstack nfs put`).
# Seconds of the whole command (connect, open, close included) and the
# time the command prints for the WRITE_SAME / WRITEs themselves; the
# bytes read back as zeroes. Markdown on stdout.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_dir
GIB=$(pick 1 ${NFS_GIB:-10})
LEN=$((GIB << 30))
# the rows that write every zero on the host directory take ~9 s/GiB
# here: a smaller size keeps a server-side WRITE_SAME under the client's
# 60 s RPC timeout (the table says per row, the speed-up is per GiB)
DGIB=$((GIB < 2 ? GIB : 2))

# the time the command printed ("... in 0.053 s")
said() { sed -n 's/.* in \([0-9.]*\) s$/\1/p' "$BENCH_DIR/out" | tail -1; }
# run CMD...: its wall seconds, output in $BENCH_DIR/out
run() {
	local s e
	s=$(date +%s.%N)
	bounded "$@" >"$BENCH_DIR/out" 2>&1 || { cat "$BENCH_DIR/out" >&2; echo FAILED; return 0; }
	e=$(date +%s.%N)
	awk -v s="$s" -v e="$e" 'BEGIN {printf "%.3f", e - s}'
}
path_of() {
	if grep -q "server WRITE_SAME" "$BENCH_DIR/out"; then echo "server WRITE_SAME"
	elif grep -q "fallback" "$BENCH_DIR/out"; then echo "client fallback: $(sed -n 's/.*done here, \([a-z-]*\) by.*/\1/p' "$BENCH_DIR/out") by WRITEs"
	else echo "WRITEs"; fi
}

# ---- blkstackd: an ext4 export and a directory export ----
truncate -s $((GIB + 2))G "$BENCH_DIR/fs.img"
"$BLKSTACK" fs mkfs "file:$BENCH_DIR/fs.img" >/dev/null
mkdir -p "$BENCH_DIR/share" "$BENCH_DIR/state"
P1=$(free_port)
P2=$(free_port)
cat >"$BENCH_DIR/bd.ini" <<CONF
[daemon]
state_dir = $BENCH_DIR/state
[device fs]
type = file
path = $BENCH_DIR/fs.img
[export e4]
type = nfs
device = fs
listen = 127.0.0.1:$P1
lease = 10
grace = 0
[export dir]
type = nfs
path = $BENCH_DIR/share
listen = 127.0.0.1:$P2
lease = 10
grace = 0
CONF
start_server blkstackd "$P1" "$BLKSTACKD" -f -c "$BENCH_DIR/bd.ini"
wait_port "$P2" 15

echo "### NFS: ${GIB} GiB of zeroes over NFS v4.2 (WRITE_SAME vs WRITEs)"
echo
echo "| server, backend | method | GiB | path taken | command s | WRITE_SAME / WRITEs s | speed-up vs WRITEs to ganesha (per GiB) | host bytes after |"
echo "|---|---|---:|---|---:|---:|---:|---:|"
declare -a ROWS=()
row() {	# SERVER METHOD GIB SECONDS BYTES
	ROWS+=("$1|$2|$3|$(path_of)|$4|$(said)|$5")
}
before=$(du -B1 "$BENCH_DIR/fs.img" | cut -f1)
t=$(run "$BLKSTACK" nfs write-same -b 1M -n $((GIB * 1024)) --zero "nfs://127.0.0.1:$P1/z")
row "blkstackd, ext4 on a file device" "write-same --zero" "$GIB" "$t" "image +$(($(du -B1 "$BENCH_DIR/fs.img" | cut -f1) - before))"
t=$(run "$BLKSTACK" nfs write-same -b 1M -n $((DGIB * 1024)) --zero "nfs://127.0.0.1:$P2/z")
row "blkstackd, host directory" "write-same --zero" "$DGIB" "$t" "$(du -B1 "$BENCH_DIR/share/z" | cut -f1)"
rm -f "$BENCH_DIR/share/z"
t=$(run "$BLKSTACK" nfs write-same --fallback -b 1M -n $((DGIB * 1024)) --zero "nfs://127.0.0.1:$P2/f")
row "blkstackd, host directory" "write-same --zero --fallback" "$DGIB" "$t" "$(du -B1 "$BENCH_DIR/share/f" | cut -f1)"
rm -f "$BENCH_DIR/share/f"
stop_server >/dev/null

# ---- nfs-ganesha (VFS), if installed and root ----
if command -v ganesha.nfsd >/dev/null && ((EUID == 0)) &&
	ls /usr/lib/*/ganesha/libfsalvfs.so >/dev/null 2>&1; then
	G=$BENCH_DIR/gexport
	mkdir -p "$G" "$BENCH_DIR/grec"
	GP=$(free_port)
	cat >"$BENCH_DIR/ganesha.conf" <<CONF
NFS_CORE_PARAM { Protocols = 4; NFS_Port = $GP; Bind_addr = 127.0.0.1; Enable_NLM = false; Enable_RQUOTA = false; }
NFSv4 { Graceless = true; Lease_Lifetime = 10; RecoveryBackend = fs; RecoveryRoot = $BENCH_DIR/grec; Minor_Versions = 1, 2; }
EXPORT { Export_Id = 1; Path = $G; Pseudo = /export; Protocols = 4; Access_Type = RW; Squash = No_Root_Squash; SecType = sys; FSAL { Name = VFS; } }
LOG { Default_Log_Level = EVENT; }
CONF
	start_server ganesha "$GP" ganesha.nfsd -F -f "$BENCH_DIR/ganesha.conf" \
		-L "$BENCH_DIR/ganesha.log" -p "$BENCH_DIR/ganesha.pid" -N NIV_EVENT
	t=$(run "$BLKSTACK" nfs write-same -b 1M -n $((GIB * 1024)) --zero "nfs://127.0.0.1:$GP/export/z")
	row "nfs-ganesha $(dpkg-query -W -f '${Version}' nfs-ganesha 2>/dev/null), VFS" "write-same --zero" "$GIB" "$t" "$(du -B1 "$G/z" | cut -f1)"
	rm -f "$G/z"
	truncate -s "$LEN" "$BENCH_DIR/zeroes"
	t_w=$(run "$BLKSTACK" nfs put "$BENCH_DIR/zeroes" "nfs://127.0.0.1:$GP/export/p")
	row "nfs-ganesha, VFS" "put of a file of zeroes" "$GIB" "$t_w" "$(du -B1 "$G/p" | cut -f1)"
	rm -f "$G/p" "$BENCH_DIR/zeroes"
	STOP_SECONDS=10 stop_server >/dev/null
else
	t_w=-
	echo "(nfs-ganesha not installed or not root: its rows are left out)"
	echo
fi
for r in "${ROWS[@]}"; do
	IFS='|' read -r s m g p c w b <<<"$r"
	echo "| $s | $m | $g | $p | $c | ${w:--} | $(ratio "$(awk -v t="$t_w" -v g="$GIB" 'BEGIN {if (t+0 > 0) printf "%.4f", t / g; else print "-"}')" "$(awk -v t="$c" -v g="$g" 'BEGIN {if (t+0 > 0) printf "%.4f", t / g; else print "-"}')") | $b |"
done
echo
echo "Speed-up = seconds per GiB of plain WRITEs to ganesha / this row's (whole commands)."
own_targets_summary >/dev/null 2>&1 || true
