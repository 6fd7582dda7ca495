#!/usr/bin/env bash
# The NVMe/TCP target's fabrics rules seen by pynvmeof (a client blkstack
# did not write), issue 14:
# - discovery: two nvmf exports on two ports; the discovery controller of
#   either listener lists both subsystems, each at its own port;
# - allow_hosts: a host NQN not on the list gets Connect refused with
#   Connect Invalid Host (SCT 1, SC 84h), a listed one connects;
# - KATO: a host that asks for a 2 s keep alive timeout and then sends no
#   Keep Alive loses its queue within KATO + the 1 s granularity (+ 1 s
#   for the tick), and the daemon says why;
# - Disconnect: a Fabrics Disconnect capsule (pynvmeof has none, so a raw
#   one on its admin socket) is answered with success and the queue closes.
# check: alone (a KATO of 2 s must close the queue within 5 s)
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need python3
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
PORT2=$(free_port)
GOOD=nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-00000000600d
cat >>"$T/d.ini" <<EOC
[device da]
type = file
path = $T/a.img
size = 16M
[device db]
type = file
path = $T/b.img
size = 16M
[export s0]
type = nvmf
listen = 127.0.0.1:$PORT
device = da
[export s1]
type = nvmf
listen = 127.0.0.1:$PORT2
device = db
allow_hosts = $GOOD
EOC
start_daemon "$T/d.ini"
N0=nqn.2026-12.org.blkstack:s0
N1=nqn.2026-12.org.blkstack:s1

note "discovery on either port lists both subsystems at their ports"
for p in "$PORT" "$PORT2"; do
	out=$(timeout 30 $PY "$p" - discover 2>&1) || fail "discover: $out"
	echo "$out"
	(($(wc -l <<<"$out") == 2)) || fail "discovery on $p: not 2 entries"
	grep -q "^$N0 127.0.0.1 $PORT " <<<"$out" || fail "$N0 missing on $p"
	grep -q "^$N1 127.0.0.1 $PORT2 " <<<"$out" || fail "$N1 missing on $p"
done

note "allow_hosts: another host NQN is refused with Connect Invalid Host"
out=$(timeout 30 $PY "$PORT2" "$N1" badhost \
	nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-0000000000ba 2>&1) ||
	fail "badhost: $out"
echo "$out"
# pynvmeof reports the status field without the phase bit: SCT 1, SC 84h
grep -Eq 'refused status=0x(184|84)$' <<<"$out" || fail "not Connect Invalid Host: $out"
grep -q 'is not allowed on' "$T/d.log" || fail "no log line for the refusal"
out=$(timeout 30 $PY "$PORT2" "$N1" badhost "$GOOD" 2>&1) &&
	fail "the allowed host was refused too: $out"
grep -q 'connect was accepted' <<<"$out" || fail "allowed host: $out"

note "KATO: no Keep Alive within 2 s closes the queue"
out=$(timeout 40 $PY "$PORT" "$N0" kato 2000 2>&1) || fail "kato: $out"
echo "$out"
secs=$(sed -n 's/^closed after \([0-9]*\) s$/\1/p' <<<"$out")
kill -0 "$DPID" || { tail -20 "$T/d.log" >&2; fail "blkstackd died"; }
[[ -n $secs ]] || fail "kato: $out"
((secs >= 2 && secs <= 5)) || fail "closed after $secs s, not within KATO + 2 s"
grep -q 'keep alive timeout' "$T/d.log" || fail "no keep alive line in the log"

note "Disconnect: a Fabrics Disconnect is answered, then the queue closes"
out=$(timeout 30 $PY "$PORT" "$N0" disconnect 2>&1) || fail "disconnect: $out"
echo "$out"
grep -qx 'status=0' <<<"$out" || fail "Disconnect not answered with success"
grep -qx 'eof' <<<"$out" || fail "the queue stayed open after Disconnect"
grep -q 'the host disconnected the queue' "$T/d.log" || fail "no log line"
stop_daemon
echo PASS
