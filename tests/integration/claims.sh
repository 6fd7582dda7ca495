#!/usr/bin/env bash
# Device protection (issue 10 item 11, issue 11 item 6), as a user sees it:
#  - `blkstack fs mkfs` over an existing ext4 fails without -F, works with;
#  - through the control socket, fs mkfs / zeroout / fallocate / fs put on
#    an exported device fail naming the export, reading still works;
#  - `blkstack` (another process) cannot write, nor open, an image a
#    daemon serves: the OFD lock; after the daemon stops it can;
#  - two mappers taking one component: the start fails naming the holder.
# Every refusal is checked against a checksum of the image: nothing written.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need python3 sha256sum
has_type file || skip "no 'file' device type in this build"
daemon_setup
sum() { sha256sum "$1" | cut -d' ' -f1; }

note "fs mkfs over an existing ext4: refused without -F, done with it"
truncate -s 64M "$T/x.img"
run_bs 0 fs mkfs -L first "file:$T/x.img"
s0=$(sum "$T/x.img")
run_bs 1 fs mkfs "file:$T/x.img"
expect_err "fs mkfs" "an ext4 filesystem (label 'first')" "give -F (--force) to replace it"
[[ $(sum "$T/x.img") == "$s0" ]] || fail "mkfs without -F changed the image"
run_bs 0 fs mkfs -F -L second "file:$T/x.img"
[[ $(sum "$T/x.img") != "$s0" ]] || fail "mkfs -F did not make a new filesystem"
run_bs 0 fs stat "file:$T/x.img"
if command -v e2fsck >/dev/null; then
	e2fsck -fn "$T/x.img" >/dev/null 2>&1 || fail "e2fsck after mkfs -F"
fi
# other signatures count too: an xfs superblock on a blank image
truncate -s 0 "$T/x.img"
truncate -s 64M "$T/x.img"
printf 'XFSB' | dd of="$T/x.img" conv=notrunc status=none
s0=$(sum "$T/x.img")
run_bs 1 fs mkfs "file:$T/x.img"
expect_err "an xfs filesystem" "-F"
[[ $(sum "$T/x.img") == "$s0" ]] || fail "mkfs over xfs changed the image"

note "a daemon serves vol0 (exported) and spare (not exported)"
truncate -s 64M "$T/vol0.img"
run_bs 0 fs mkfs "file:$T/vol0.img"
cat >>"$T/d.ini" <<EOC
[device vol0]
type = file
path = $T/vol0.img
[device spare]
type = file
path = $T/spare.img
size = 64M
[export vol0]
type = nbd
device = vol0
listen = 127.0.0.1:$PORT
EOC
start_daemon "$T/d.ini"
s0=$(sum "$T/vol0.img")

note "destructive commands through the control socket: refused, holder named"
echo hello >"$T/h.txt"
for cmd in "fs mkfs vol0" "fs mkfs -F vol0" "zeroout -l 1M vol0" \
	"fallocate -z -l 1M vol0" "fallocate -p -l 1M vol0" \
	"fs put vol0 $T/h.txt /h" "fs mkdir vol0 /d"; do
	# shellcheck disable=SC2086
	ctl 1 $cmd
	expect_err "vol0" "in use by export nbd/vol0"
done
[[ $(sum "$T/vol0.img") == "$s0" ]] || fail "a refused command wrote to vol0"
ctl 1 zeroout -l 1M vol0
expect_err "in use by export nbd/vol0; --force runs beside it"
ctl 0 fs ls vol0 /
ctl 0 info vol0
[[ $OUT == *"in use by"*"export nbd/vol0 (write)"* ]] || fail "info names no holder: $OUT"
# a device no export holds: the daemon zeroes it
ctl 0 zeroout -l 1M spare

note "another process on the served images: refused by the lock"
for cmd in "zeroout -l 1M" "fs mkfs -F" "fallocate -z -l 1M" "info"; do
	# shellcheck disable=SC2086
	run_bs 1 $cmd "file:$T/vol0.img"
	expect_err "$T/vol0.img: in use by process $DPID (blkstackd): it holds a write lock"
done
run_bs 1 info "file:$T/vol0.img,readonly=1"
expect_err "$T/vol0.img: in use by process $DPID (blkstackd)"
run_bs 1 zeroout -l 1M "file:$T/spare.img"
expect_err "$T/spare.img: in use by process $DPID (blkstackd)"
[[ $(sum "$T/vol0.img") == "$s0" ]] || fail "another process wrote to vol0"
# a second daemon on the same image (other socket, other port)
cat >"$T/d2.ini" <<EOC
[daemon]
state_dir = $T/state2
control = $T/ctl2.sock
[device again]
type = file
path = $T/vol0.img
[export again]
type = nbd
device = again
socket = $T/nbd2.sock
EOC
rc=0; timeout 30 "$BSD" -f -c "$T/d2.ini" >"$T/d2.log" 2>&1 || rc=$?
((rc != 0)) || fail "a second daemon opened the served image"
grep -q "$T/vol0.img: in use by process $DPID (blkstackd): it holds a write lock" "$T/d2.log" ||
	fail "second daemon: $(cat "$T/d2.log")"
[[ $(sum "$T/vol0.img") == "$s0" ]] || fail "the second daemon wrote to vol0"
# --force: beside the export, on a range the user knows no client uses
ctl 0 zeroout --force -o 60M -l 1M vol0
ctl 0 fs ls vol0 /
stop_daemon

note "the daemon gone, its locks went with it"
run_bs 0 zeroout -l 1M "file:$T/spare.img"
run_bs 0 fs ls "file:$T/vol0.img"

note "two mappers taking one component: refused, naming the holder"
truncate -s 16M "$T/leg.img"
s1=$(sum "$T/leg.img")
cat >"$T/two.ini" <<EOC
[device leg]
type = file
path = $T/leg.img
[device other]
type = mem
size = 16M
[device l0]
type = linear
devices = leg
[device m1]
type = mirror
devices = leg other
EOC
run_bs 1 -c "$T/two.ini" ls
expect_err "m1: component leg: in use by mapper linear/l0"
printf '[daemon]\nstate_dir = %s\ncontrol = %s\n' "$T/state3" "$T/ctl3.sock" \
	>"$T/d3.ini"
cat "$T/two.ini" - >>"$T/d3.ini" <<EOC
[export l0]
type = nbd
device = l0
socket = $T/nbd3.sock
EOC
rc=0; timeout 30 "$BSD" -f -c "$T/d3.ini" >"$T/d3.log" 2>&1 || rc=$?
((rc != 0)) || fail "the daemon started with two mappers on one leg"
grep -q "m1: component leg: in use by mapper linear/l0" "$T/d3.log" ||
	fail "no holder named: $(cat "$T/d3.log")"
[[ $(sum "$T/leg.img") == "$s1" ]] || fail "the refused stack wrote to leg"
[[ ! -e $T/state3 ]] || fail "a refused start created its state dir"
# serving a component a mapper holds: refused before anything is made
cat >"$T/d4.ini" <<EOC
[daemon]
state_dir = $T/state4
control = $T/ctl4.sock
[device new]
type = file
path = $T/new.img
size = 16M
[device l0]
type = linear
devices = new
[export new]
type = nbd
device = new
socket = $T/nbd4.sock
EOC
rc=0; timeout 30 "$BSD" -f -c "$T/d4.ini" >"$T/d4.log" 2>&1 || rc=$?
((rc != 0)) || fail "the daemon served a mapper's component"
grep -q "export new: new: in use by mapper linear/l0" "$T/d4.log" ||
	fail "no holder named: $(cat "$T/d4.log")"
[[ ! -e $T/new.img && ! -e $T/state4 ]] || fail "a refused start created files"
# claim = shared on both: the user vouches that they do not overlap
sed -i 's/^devices = leg.*$/&\nclaim = shared/' "$T/two.ini"
run_bs 0 -c "$T/two.ini" ls
[[ $OUT == *l0*m1* ]] || fail "shared stacks not listed: $OUT"
echo PASS
