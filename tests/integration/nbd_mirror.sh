#!/usr/bin/env bash
# A mirror served by blkstackd loses a leg while a client writes: every
# acknowledged write reads back (through the export and from the surviving
# leg), `blkstack -s ... info` says degraded and names the leg, and the
# capability above is restacked from the live leg.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need qemu-io python3
has_type mirror || skip "no mirror mapper in this build"
daemon_setup
cat >>"$T/d.ini" <<EOC
[device good]
type = file
path = $T/good.img
size = 64M
[device back]
type = mem
size = 64M
zeroes = write
[device flaky]
type = error
devices = back
ops = write
after = 150
[device m]
type = mirror
devices = good flaky
[export m]
type = nbd
device = m
listen = 127.0.0.1:$PORT
EOC
start_daemon "$T/d.ini"
U=nbd://127.0.0.1:$PORT/m

ctl 0 info m
[[ $OUT == *optimal* ]] || fail "mirror not optimal at start: $OUT"
ctl 0 explain m
[[ $OUT == *"write_zeroes_unmap no"* || $OUT == *": no"* ]] ||
	fail "explain: the zeroes=write leg should clear unmap: $OUT"

note "400 writes of 64 KiB; the flaky leg fails after 150 of them"
args=()
for ((i = 0; i < 400; i++)); do
	args+=(-c "write -P $((i % 250 + 1)) $((i * 64))k 64k")
done
timeout 120 qemu-io -f raw "$U" "${args[@]}" >"$T/w.log" 2>&1 ||
	{ tail "$T/w.log"; fail "writes failed although one leg lives"; }
grep -qi error "$T/w.log" && fail "a write reported an error: $(grep -i error "$T/w.log" | head -3)"

ctl 0 info m
[[ $OUT == *degraded* ]] || fail "info does not say degraded: $OUT"
[[ $OUT == *flaky* ]] || fail "info does not name the faulty leg: $OUT"

note "every acknowledged write reads back through the export"
args=()
for ((i = 0; i < 400; i++)); do
	args+=(-c "read -P $((i % 250 + 1)) $((i * 64))k 64k")
done
timeout 120 qemu-io -f raw "$U" "${args[@]}" >"$T/r.log" 2>&1 || true
grep -q 'Pattern verification failed' "$T/r.log" && fail "mirror lost data"
note "... and from the surviving leg's file itself"
python3 - "$T/good.img" <<'PY' || fail "surviving leg lacks acknowledged data"
import sys
f = open(sys.argv[1], "rb")
for i in range(400):
    f.seek(i * 65536)
    b = f.read(65536)
    if b != bytes([i % 250 + 1]) * 65536:
        sys.exit("block %d differs" % i)
PY

note "the live leg alone decides the capability now"
ctl 0 explain m
[[ $OUT == *faulty* || $OUT == *"not counted"* ]] || fail "explain ignores the faulty leg: $OUT"
stop_daemon
echo "PASS"
