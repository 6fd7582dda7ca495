#!/usr/bin/env bash
# blkstackd start-up as an operator meets it: a start that fails leaves
# the disk exactly as it was (no state directory, no backing image, no
# log) whether the mistake is in a later section, names a missing device
# or backing file, or meets a port already in use; files that existed are
# kept. And the README's own config examples start as written (inline
# comments and all).
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need python3
make_tmp
HOLD=
cleanup() {
	if [[ -n $HOLD ]]; then kill "$HOLD" 2>/dev/null || true; wait "$HOLD" 2>/dev/null || true; fi
	daemon_cleanup
}
trap cleanup EXIT
PORT=$(free_port)

D=$T/disk
mkdir "$D"
truncate -s 1M "$D/old.img"
chmod 0640 "$D/old.img"

# conf EXTRA...: a config whose start would create a state directory two
# levels deep, the log in it and new.img, then the EXTRA lines.
conf() {
	cat >"$T/c.ini" <<EOC
[daemon]
state_dir = $D/state/sub     # made by the start
control = $D/ctl.sock        ; the control socket

[device new]
type = file
path = $D/new.img            # created sparse by the start
size = 1G

[device old]
type = file
path = $D/old.img

[export new]
type = nbd
device = new
listen = 127.0.0.1:$PORT
socket = $D/nbd.sock
EOC
	printf '%s\n' "$@" >>"$T/c.ini"
}

snapshot() { (cd "$D" && find . -printf '%p %y %m %s\n' | sort); }

# failed_start NAME EXPECT...: both in the foreground and in the
# background, exit 1 with one line, and the disk as it was before.
failed_start() {
	local name=$1 mode rc before after
	shift
	before=$(snapshot)
	for mode in -f ""; do
		rc=0
		timeout 30 "$BSD" $mode -c "$T/c.ini" >"$T/out" 2>"$T/err" || rc=$?
		ERR=$(cat "$T/err")
		((rc == 1)) || fail "$name ${mode:-(background)}: exit $rc: $ERR"
		[[ $ERR != *Sanitizer* && $ERR != *"runtime error"* ]] ||
			fail "$name: sanitizer: $ERR"
		expect_err "$@"
		after=$(snapshot)
		[[ $after == "$before" ]] ||
			fail "$name ${mode:-(background)}: the disk changed:"$'\n'"$(diff <(echo "$before") <(echo "$after"))"
	done
}

note "an error in a later section creates nothing"
conf "[device later]" "type = mem" "size = 1G" "colour = red"
failed_start later_section c.ini:22 "later: unknown key 'colour'"
conf "[device later]" "type = mem" "sise = 1G"
failed_start misspelled c.ini:21 "later: unknown key 'sise'"
conf "[device later]" "type = mem" "size = 0x10M"
failed_start bad_size c.ini:21 "not a size"

note "a device whose backing file is missing: what came before is removed"
conf "[device gone]" "type = file" "path = $D/gone.img"
failed_start missing_file c.ini:19 "gone.img does not exist"
conf "[device odd]" "type = file" "path = $D/odd.img" "size = 1000"
failed_start odd_size c.ini:19 "not a multiple of the logical block size"

note "an export of a missing device creates nothing"
conf "[export b]" "type = nbd" "device = nosuch" "listen = 127.0.0.1:$PORT"
failed_start missing_device c.ini:21 "export b: device 'nosuch' does not exist"

note "a port already in use creates nothing"
python3 - "$PORT" >"$T/hold.out" <<'PY' &
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
print("ready", flush=True)
time.sleep(60)
PY
HOLD=$!
for ((i = 0; i < 100; i++)); do grep -q ready "$T/hold.out" && break; sleep 0.05; done
grep -q ready "$T/hold.out" || fail "could not hold port $PORT"
conf
failed_start port_in_use "127.0.0.1:$PORT" "in use"
kill "$HOLD"; wait "$HOLD" 2>/dev/null || true; HOLD=

note "the same config starts once the port is free; what it made stays"
conf
timeout 30 "$BSD" -c "$T/c.ini" || fail "background start failed"
DPID=$(cat "$D/state/sub/blkstackd.pid")
[[ -f $D/new.img && -f $D/state/sub/blkstackd.log ]] || fail "not created"
[[ $(stat -c %a "$D/new.img") == 600 ]] || fail "new.img mode $(stat -c %a "$D/new.img")"
[[ $(stat -c %a "$D/old.img") == 640 ]] || fail "old.img mode changed"
kill -TERM "$DPID"
for ((i = 0; i < 200; i++)); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.05; done
kill -0 "$DPID" 2>/dev/null && fail "daemon did not stop"
DPID=

note "a failed start keeps what an earlier start made"
conf "[export b]" "type = nbd" "device = nosuch"
failed_start kept c.ini:21 "device 'nosuch' does not exist"
[[ -f $D/new.img && -f $D/state/sub/blkstackd.log ]] || fail "earlier files removed"

note "the README's config examples work as written"
python3 - README.md "$T/readme" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
blocks = re.findall(r"```ini\n(.*?)```", text, re.S)
cli = [b for b in blocks if "[device" in b and "[export" not in b]
daemon = [b for b in blocks if "[daemon]" in b]
assert cli and daemon, "README lacks the ini examples"
open(sys.argv[2] + "-cli.ini", "w").write(cli[0])
open(sys.argv[2] + "-daemon.ini", "w").write(daemon[0])
PY
R=$T/r
mkdir -p "$R/cli"
# only the places change: the examples' own words, comments included, stay
sed -e "s#/var/lib/blkstack#$R/cli#g" "$T/readme-cli.ini" >"$R/cli.ini"
grep -q '^\[device' "$R/cli.ini" || fail "README cli example: $(cat "$R/cli.ini")"
run_bs 0 -c "$R/cli.ini" ls
[[ $OUT == *disk0* && $OUT == *slow* ]] || fail "README cli example: ls: $OUT"
sed -e "s#/var/lib/blkstack#$R/state#g" -e "s#/run/#$R/#g" \
	-e "s#/srv/#$R/#g" -e "s#:10809#:$PORT#g" "$T/readme-daemon.ini" >"$R/d.ini"
grep -q ' # ' "$R/d.ini" || fail "README daemon example lost its comments"
CTL=$R/blkstack.sock
: >"$T/d.log"
start_daemon "$R/d.ini"
[[ -d $R/state && -f $R/disk0.img ]] || fail "README daemon example: paths"
[[ ! -e "$R/state      # default ./var" && $(ls "$R") != *'#'* ]] ||
	fail "a comment became part of a path: $(ls "$R")"
ctl 0 ls
[[ $OUT == *disk0* ]] || fail "README daemon example: ls: $OUT"
stop_daemon
echo "ok"
