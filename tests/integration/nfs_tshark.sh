#!/usr/bin/env bash
# tshark (Wireshark's decoder, which blkstack did not write) reads a
# capture of NFS v4.2 traffic with blkstackd's nfs export on loopback:
# the vendored pynfs client (lib/nfs42_ops.py) sends WRITE, ALLOCATE,
# DEALLOCATE, SEEK, READ_PLUS and WRITE_SAME, and `blkstack nfs
# write-same` one more WRITE_SAME. Checked from the decoded fields:
# - no frame is Malformed;
# - the v4.2 ops are there by number (ALLOCATE 59, DEALLOCATE 62,
#   READ_PLUS 68, SEEK 69, WRITE_SAME 70), each answered NFS4_OK;
# - ALLOCATE / DEALLOCATE offsets and lengths as sent;
# - WRITE_SAME replies (write_response4): the byte counts, the committed
#   level (UNSTABLE4 for the UNSTABLE request, FILE_SYNC4 for the others)
#   and the NFS4ERR_INVAL of a block size 0;
# - SEEK's offset and READ_PLUS's hole/data contents.
# tshark 4.0 (Debian 12) decodes WRITE_SAME's *arguments* by an older
# draft's app_data_block4 (32-bit fields, no block size), not RFC 7862's,
# so its ADB fields are not checked and a WRITE_SAME call may show as
# Malformed; any other malformed frame fails the test.
# SKIP when tshark is missing or cannot capture on lo, or without pynfs.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/pynfs.bash"
source "$(dirname "$0")/lib/daemon.bash"
need python3 tshark
((EUID == 0)) || skip "the directory backend needs CAP_DAC_READ_SEARCH (root)"
pynfs_ready || skip "$PYNFS_WHY"
export PYNFS=$(cd "$PY" && pwd)

daemon_setup
mkdir -p "$T/share"
cat >>"$T/d.ini" <<EOC
[export d]
type = nfs
path = $T/share
listen = 127.0.0.1:$PORT
lease = 10
grace = 0
EOC
start_daemon "$T/d.ini"

CAP=$T/cap.pcapng
tshark -q -i lo -f "tcp port $PORT" -w "$CAP" >"$T/tshark.log" 2>&1 &
TPID=$!
for ((i = 0; i < 100; i++)); do
	grep -q 'Capturing on' "$T/tshark.log" && break
	kill -0 "$TPID" 2>/dev/null || skip "tshark cannot capture on lo: $(cat "$T/tshark.log")"
	sleep 0.1
done
grep -q 'Capturing on' "$T/tshark.log" || { kill "$TPID"; skip "tshark did not start capturing"; }
sleep 0.3

out=$(PATH=/usr/bin:/bin timeout 120 python3 "$(dirname "$0")/lib/nfs42_ops.py" "$PORT" "$T/share" 2>&1) ||
	{ echo "$out" >&2; kill "$TPID"; fail "nfs42_ops.py"; }
echo "$out" | sed 's/^/   /'
run_bs 0 nfs write-same -o 4M -b 8K -n 3 --pattern 5a --block-number-offset 16 \
	--first-block 100 "nfs://127.0.0.1:$PORT/f42"
[[ $OUT == *"server WRITE_SAME: 24576 bytes at 4194304 (FILE_SYNC)"* ]] || fail "write-same: $OUT"
sleep 0.5
kill -INT "$TPID"
wait "$TPID" || true
stop_daemon

D=(-r "$CAP" -d "tcp.port==$PORT,rpc" -o "tcp.desegment_tcp_streams:TRUE" -o "rpc.desegment_rpc_over_tcp:TRUE")
fields() {	# FILTER FIELD...: one line per matching frame
	local f=$1 e=() x
	shift
	for x; do e+=(-e "$x"); done
	tshark "${D[@]}" -Y "$f" -T fields -E separator=' ' -E aggregator=' ' "${e[@]}" 2>/dev/null
}

note "no Malformed frame but tshark 4.0's WRITE_SAME calls"
n=$(tshark "${D[@]}" -Y '_ws.malformed && !(nfs.opcode == 70 && rpc.msgtyp == 0)' 2>/dev/null | wc -l)
((n == 0)) || { tshark "${D[@]}" -Y '_ws.malformed' | head; fail "$n malformed frames"; }
n=$(tshark "${D[@]}" -Y '_ws.malformed' 2>/dev/null | wc -l)
echo "   WRITE_SAME calls tshark 4.0 calls malformed (its draft ADB layout): $n"

note "the v4.2 ops decoded by number, each answered"
for o in 59 62 68 69 70; do
	c=$(fields "rpc.msgtyp == 0 && nfs.opcode == $o" frame.number | wc -l)
	r=$(fields "rpc.msgtyp == 1 && nfs.opcode == $o" frame.number | wc -l)
	((c >= 1 && r >= 1)) || fail "op $o: $c calls, $r replies decoded"
	echo "   op $o: $c calls, $r replies"
done

note "ALLOCATE / DEALLOCATE as sent"
al=$(fields "rpc.msgtyp == 0 && nfs.opcode == 59" nfs.offset4 nfs.length4)
de=$(fields "rpc.msgtyp == 0 && nfs.opcode == 62" nfs.offset4 nfs.length4)
echo "   ALLOCATE: $al; DEALLOCATE: $de"
[[ $al == "1048576 1048576" ]] || fail "ALLOCATE fields: $al"
[[ $de == "0 32768" ]] || fail "DEALLOCATE fields: $de"

note "WRITE_SAME replies: status, count, committed level"
st=$(fields "rpc.msgtyp == 1 && nfs.opcode == 70" nfs.nfsstat4 | tr ' ' '\n' | sort -un | tr '\n' ' ')
echo "   statuses: $st"
grep -qw 0 <<<"$st" && grep -qw 22 <<<"$st" || fail "WRITE_SAME statuses (want 0 and NFS4ERR_INVAL 22): $st"
wr=$(fields "rpc.msgtyp == 1 && nfs.opcode == 70 && nfs.length4" nfs.length4 nfs.stable_how4 | sort -n)
echo "$wr" | sed 's/^/   count committed: /'
grep -qx "16384 0" <<<"$wr" || fail "the UNSTABLE pattern WRITE_SAME: $wr"
grep -qx "65536 2" <<<"$wr" || fail "the FILE_SYNC zero WRITE_SAME: $wr"
grep -qx "24576 2" <<<"$wr" || fail "blkstack nfs write-same: $wr"

note "SEEK's offset, READ_PLUS's contents"
so=$(fields "rpc.msgtyp == 1 && nfs.opcode == 69" nfs.offset4)
echo "   SEEK reply offset: $so"
[[ $so == 32768 ]] || fail "SEEK reply offset: $so"
rp=$(fields "rpc.msgtyp == 1 && nfs.opcode == 68" nfs.content.type nfs.offset4 nfs.length4 nfs.read.data_length)
echo "   READ_PLUS (types, offsets, hole length, data length): $rp"
[[ $rp == "1 0 0 32768 32768 32768" ]] ||
	fail "READ_PLUS contents (want a 32 KiB hole, then 32 KiB of data): $rp"
echo "PASS: nfs_tshark"
