#!/usr/bin/env bash
# tshark (Wireshark's decoder, which blkstack did not write) reads a
# capture of an NVMe/TCP session with blkstackd's target on loopback
# (issue 14): pynvmeof identify, writes in capsule and through R2T
# (in_capsule = 16K), reads
# (C2HData) and the discovery log. Checked from the decoded fields:
# - no frame is Malformed;
# - the PDU types of a session are all there: ICReq/ICResp, CapsuleCmd/
#   CapsuleResp, H2CData, C2HData, R2T;
# - ICResp: PFV 0, MAXH2CDATA 1 MiB;
# - every CapsuleResp's CID is the CID of a command the host sent, and
#   every command got one (pynvmeof keeps SQ flow control on);
# - opcodes: Fabrics Connect / Property Set, Identify, Write, Read (and Get
#   Log Page, 02h too); Identify Controller MDTS 8 and SUBNQN decoded.
#   (tshark 4.0 does not decode Identify Namespace DLFEAT: not checked.)
# SKIP when tshark is missing or cannot capture on lo.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need python3 tshark
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
if [[ -z ${PEERS:-} ]]; then
	for PEERS in "$ROOT/../shared/peers" "$ROOT/../../shared/peers"; do
		[[ -d $PEERS ]] && break
	done
fi
[[ -d $PEERS/pynvmeof/src ]] || skip "no pynvmeof in $PEERS"
export PYNVMEOF=$PEERS/pynvmeof BUILD
PY="python3 $(dirname "$0")/lib/nvmf_py.py"
daemon_setup
cat >>"$T/d.ini" <<EOC
[device da]
type = file
path = $T/a.img
size = 16M
[export s0]
type = nvmf
listen = 127.0.0.1:$PORT
in_capsule = 16K
device = da
EOC
start_daemon "$T/d.ini"
NQN=nqn.2026-12.org.blkstack:s0

CAP=$T/cap.pcapng
tshark -q -i lo -f "tcp port $PORT" -w "$CAP" >"$T/tshark.log" 2>&1 &
TPID=$!
# wait until it captures (or SKIP if it cannot)
for ((i = 0; i < 100; i++)); do
	grep -q 'Capturing on' "$T/tshark.log" && break
	kill -0 "$TPID" 2>/dev/null || skip "tshark cannot capture on lo: $(cat "$T/tshark.log")"
	sleep 0.1
done
grep -q 'Capturing on' "$T/tshark.log" || { kill "$TPID"; skip "tshark did not start capturing"; }
sleep 0.3

note "a session: identify, writes (in capsule and R2T), reads, discovery"
out=$(timeout 30 $PY "$PORT" "$NQN" identify 2>&1) || fail "identify: $out"
out=$(timeout 60 $PY "$PORT" "$NQN" rw 2>&1) || fail "rw: $out"
out=$(timeout 30 $PY "$PORT" - discover 2>&1) || fail "discover: $out"
sleep 0.5
kill -INT "$TPID"
wait "$TPID" || true
stop_daemon

D=(-r "$CAP" -d "tcp.port==$PORT,nvme-tcp" -o "tcp.desegment_tcp_streams:TRUE")
# fields FILTER FIELD...: one line per matching frame, fields space separated
fields() {
	local f=$1 e=() x
	shift
	for x; do e+=(-e "$x"); done
	tshark "${D[@]}" -Y "$f" -T fields -E separator=' ' "${e[@]}" 2>/dev/null
}

note "no Malformed frame"
n=$(tshark "${D[@]}" -Y '_ws.malformed' 2>/dev/null | wc -l)
((n == 0)) || { tshark "${D[@]}" -Y '_ws.malformed' | head; fail "$n malformed frames"; }

note "every PDU type of a session decoded"
types=$(fields nvme-tcp nvme-tcp.type | tr ' ,' '\n\n' | sort -un | tr '\n' ' ')
echo "types: $types"
for t in 0 1 4 5 6 7 9; do
	grep -qw "$t" <<<"$types" || fail "no PDU of type $t decoded"
done

note "ICResp: PFV 0, MAXH2CDATA 1 MiB"
ic=$(fields nvme-tcp.icresp nvme-tcp.icresp.pfv nvme-tcp.icresp.maxdata | sort -u)
echo "icresp: $ic"
[[ $ic == "0 1048576" ]] || fail "ICResp fields: $ic"

note "every command answered under its CID"
# per TCP stream: CIDs of commands (host to port) and of responses
tshark "${D[@]}" -Y "nvme-tcp.type == 4" -T fields -e tcp.stream \
	-e nvme.cmd.cid -e nvme.fabrics.cmd.cid 2>/dev/null |
	awk '{print $1, ($2 != "" ? $2 : $3)}' | sort >"$T/cmds"
tshark "${D[@]}" -Y "nvme-tcp.type == 5" -T fields -e tcp.stream \
	-e nvme.cqe.cid 2>/dev/null | awk '{print $1, $2}' | sort >"$T/rsps"
wc -l "$T/cmds" "$T/rsps"
(($(wc -l <"$T/cmds") >= 10)) || fail "too few commands decoded"
diff "$T/cmds" "$T/rsps" || fail "commands and responses differ by CID"

note "opcodes and Identify fields"
opc=$(fields nvme.cmd.opc nvme.cmd.opc | sort -u | tr '\n' ' ')
echo "opcodes: $opc"
for o in 0x01 0x02 0x06; do
	grep -qw "$o" <<<"$opc" || fail "no opcode $o decoded"
done
fct=$(fields nvme.fabrics.cmd.fctype nvme.fabrics.cmd.fctype | sort -u | tr '\n' ' ')
echo "fabrics: $fct"
grep -qw 0x01 <<<"$fct" || fail "no Fabrics Connect decoded"
mdts=$(fields nvme.cmd.identify.ctrl.mdts nvme.cmd.identify.ctrl.mdts | sort -u)
[[ $mdts == 8 ]] || fail "Identify Controller MDTS decoded as '$mdts'"
sub=$(fields nvme.cmd.identify.ctrl.subnqn nvme.cmd.identify.ctrl.subnqn | sort -u)
[[ $sub == "$NQN" ]] || fail "Identify Controller SUBNQN decoded as '$sub'"
echo PASS
