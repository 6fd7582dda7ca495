#!/usr/bin/env bash
# The nbd client driver against real NBD servers, each on a UNIX socket
# of the test's own (or 127.0.0.1), stopped by PID:
#   - nbdkit's file plugin: WRITE_ZEROES, TRIM, FUA, flush, multi-conn,
#     base:allocation, but no fast zero -> no unmap zeroing, and explain
#     says so; 4 connections opened (info, and nbdkit's own log); bytes
#     written through blkstack are in nbdkit's file and the other way
#     round; block status maps nbdkit's holes; fio verify (crc32c)
#     through a blkstack NBD export stacked on the remote export;
#   - nbdkit with the nozero filter: no WRITE_ZEROES, explain says why
#     there is no unmap zeroing; zeroing still reads back zeroes;
#   - nbdkit's file plugin with fast zero advertised (nozero filter,
#     zeromode=plugin fastzeromode=ignore: zero requests reach the file
#     plugin unchanged): unmap zeroing; a zero that may unmap frees the
#     file's blocks (du), one with NOUNMAP (NO_HOLE) keeps them;
#   - qemu-nbd --discard=unmap: fast zero and TRIM -> unmap zeroing, du;
#   - blkstackd itself (a second daemon exporting a file): unmap zeroing
#     from its SEND_FAST_ZERO, bytes land in its file.
source "$(dirname "$0")/lib/cli-common.bash"
source "$(dirname "$0")/lib/daemon.bash"
need nbdkit qemu-nbd qemu-io qemu-img nbdinfo fio jq python3
has_type nbd || skip "blkstack built without the nbd driver"
fio --enghelp=nbd >/dev/null 2>&1 || skip "fio has no nbd engine"
daemon_setup

PIDS=()
APID=
cleanup() {
	local p
	for p in "${PIDS[@]}" $APID; do
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	daemon_cleanup
}
trap cleanup EXIT

# start_nbdkit NAME ARGS...: nbdkit in the foreground on $T/NAME.sock
start_nbdkit() {
	local name=$1 i
	shift
	nbdkit -f -v -U "$T/$name.sock" "$@" >"$T/$name.log" 2>&1 &
	PIDS+=($!)
	for ((i = 0; i < 100; i++)); do
		[[ -S $T/$name.sock ]] && return 0
		sleep 0.05
	done
	cat "$T/$name.log" >&2
	fail "nbdkit $name did not start"
}

truncate -s 64M "$T/k.img" "$T/nz.img" "$T/fz.img" "$T/q.img" "$T/a.img"
start_nbdkit k file "$T/k.img"
start_nbdkit nz --filter=nozero file "$T/nz.img"
start_nbdkit fz --filter=nozero file "$T/fz.img" zeromode=plugin \
	fastzeromode=ignore
qemu-nbd -f raw -t --discard=unmap -k "$T/q.sock" "$T/q.img" \
	>"$T/q.log" 2>&1 &
PIDS+=($!)

# blkstackd A: a file exported over NBD, the remote end for B's device
PA=$(free_port)
cat >"$T/a.ini" <<EOC
[daemon]
state_dir = $T/state-a
control = $T/ctl-a.sock

[device vol]
type = file
path = $T/a.img

[export vol]
type = nbd
device = vol
listen = 127.0.0.1:$PA
EOC
"$BSD" -f -c "$T/a.ini" >>"$T/a.log" 2>&1 &
APID=$!
for ((i = 0; i < 200; i++)); do
	grep -q 'ready:' "$T/a.log" && break
	kill -0 "$APID" 2>/dev/null || { cat "$T/a.log" >&2; fail "blkstackd A died"; }
	sleep 0.05
done
for ((i = 0; i < 100; i++)); do
	[[ -S $T/q.sock ]] && break
	sleep 0.05
done

cat >>"$T/d.ini" <<EOC
[device k]
type = nbd
uri = nbd+unix:///?socket=$T/k.sock
connections = 4

[device nz]
type = nbd
uri = nbd+unix:///?socket=$T/nz.sock

[device fz]
type = nbd
uri = nbd+unix:///?socket=$T/fz.sock

[device q]
type = nbd
uri = nbd+unix:///?socket=$T/q.sock

[device a]
type = nbd
uri = nbd://127.0.0.1:$PA/vol

[export k]
type = nbd
device = k
socket = $T/ek.sock

[export nz]
type = nbd
device = nz
socket = $T/enz.sock

[export fz]
type = nbd
device = fz
socket = $T/efz.sock

[export q]
type = nbd
device = q
socket = $T/eq.sock

[export a]
type = nbd
device = a
listen = 127.0.0.1:$PORT
EOC
start_daemon "$T/d.ini"
EK="nbd+unix:///k?socket=$T/ek.sock"
ENZ="nbd+unix:///nz?socket=$T/enz.sock"
EFZ="nbd+unix:///fz?socket=$T/efz.sock"
EQ="nbd+unix:///q?socket=$T/eq.sock"
EA="nbd://127.0.0.1:$PORT/a"

wait_live() {
	local i
	for ((i = 0; i < 100; i++)); do
		ctl 0 info "$1"
		[[ $OUT == *"state"*"live"* ]] && return 0
		sleep 0.1
	done
	fail "$1 not live: $OUT"
}
for d in k nz fz q a; do wait_live $d; done

note "nbdkit file: no fast zero -> no unmap zeroing, and explain says so"
ctl 0 explain k
[[ $OUT == *"write_zeroes_unmap no"*"can_fast_zero=0"*"server does not offer fast zero"* ]] ||
	fail "explain k: $OUT"
ctl 0 info k
[[ $OUT == *"can_zero 1"*"can_fast_zero 0"*"can_multi_conn 1"*"base:allocation 1"* ]] ||
	fail "info k facts: $OUT"
[[ $OUT == *"discard"*"yes: server offers TRIM"* && $OUT == *"fua"*"yes: server offers FUA"* ]] ||
	fail "info k decisions: $OUT"
[[ $(nbd_flag "$EK" can_fast_zero) == false ]] || fail "export k offers fast zero"
[[ $(nbd_flag "$EK" can_zero) == true ]] || fail "export k lacks write zeroes"

note "multi-conn: 4 connections to nbdkit"
for ((i = 0; i < 50; i++)); do
	ctl 0 info k
	[[ $OUT == *"connections"*"4 ready of 4"* ]] && break
	sleep 0.1
done
[[ $OUT == *"connections"*"4 ready of 4"*"server offers multi-conn"* ]] ||
	fail "not 4 connections: $OUT"
n=$(grep -c 'newstyle negotiation: flags: export' "$T/k.log" || true)
((n >= 4)) || fail "nbdkit saw $n handshakes, want >= 4 (4 I/O)"

note "bytes through blkstack land in nbdkit's file, and back"
head -c 8M /dev/urandom >"$T/pat"
timeout 60 qemu-img convert -n -f raw -O raw "$T/pat" "$EK" || fail "convert to k"
cmp -n 8M "$T/pat" "$T/k.img" || fail "k.img differs from what was written"
head -c 4M /dev/urandom >"$T/pat2"
dd if="$T/pat2" of="$T/k.img" bs=1M seek=16 conv=notrunc status=none
timeout 60 qemu-img convert -f raw -O raw "$EK" "$T/back.img" || fail "convert from k"
cmp -n 4M -i $((16 << 20)):0 "$T/back.img" "$T/pat2" || fail "read back differs"
ctl 0 info k
[[ $OUT =~ conn\.2\ +ready\ \(connects\ 1,\ lost\ 0,\ requests\ [1-9] ]] ||
	fail "connection 2 carried no requests: $OUT"

note "block status: nbdkit's holes seen through blkstack's export"
timeout 20 nbdinfo --map "$EK" >"$T/map" || fail "nbdinfo --map"
grep -Eq '^ *[0-9]+ +[0-9]+ +3 +hole,zero' "$T/map" || { cat "$T/map"; fail "no hole in the map"; }
grep -Eq '^ *0 +[0-9]+ +0 +data' "$T/map" || { cat "$T/map"; fail "no data at 0"; }

note "zeroing without unmap zeroing keeps nbdkit's blocks (NO_HOLE)"
before=$(allocated "$T/k.img")
timeout 60 qemu-io -f raw "$EK" -c "write -z -u 0 8M" -c "read -P 0 0 8M" \
	>"$T/qio.log" 2>&1 || { cat "$T/qio.log"; fail "qemu-io zero k"; }
after=$(allocated "$T/k.img")
((after + (1 << 20) >= before)) || fail "k.img lost blocks without unmap zeroing: $before -> $after"
is_zero "$T/k.img" 0 $((8 << 20)) || fail "k.img not zero after zeroing"

note "fio verify through a blkstack export stacked on nbdkit (crc32c)"
fio_verify k "$EK" --size=16M --offset=32M --offset_increment=16M \
	--numjobs=2 --iodepth=16

note "nbdkit nozero: no WRITE_ZEROES, explain says why"
ctl 0 explain nz
[[ $OUT == *"write_zeroes_unmap no"*"can_zero=0"*"server does not offer WRITE_ZEROES"* ]] ||
	fail "explain nz: $OUT"
ctl 0 info nz
[[ $OUT == *"max_write_zeroes"*" 0"* ]] || fail "nz has write zeroes: $OUT"
timeout 20 qemu-io -f raw "$ENZ" -c "write -P 0x5a 0 1M" -c "write -z 0 1M" \
	-c "read -P 0 0 1M" >"$T/qnz.log" 2>&1 || { cat "$T/qnz.log"; fail "zero nz"; }

note "nbdkit file with fast zero advertised: unmap zeroing frees blocks"
ctl 0 explain fz
[[ $OUT == *"write_zeroes_unmap yes"*"can_fast_zero=1"*"unmap zeroing"* ]] ||
	fail "explain fz: $OUT"
[[ $(nbd_flag "$EFZ" can_fast_zero) == true ]] || fail "export fz lacks fast zero"
timeout 60 qemu-io -f raw "$EFZ" -c "write -P 0x33 0 16M" -c flush \
	>"$T/qfz.log" 2>&1 || { cat "$T/qfz.log"; fail "fill fz"; }
before=$(allocated "$T/fz.img")
((before >= (15 << 20))) || fail "fz.img not allocated: $before"
timeout 60 qemu-io -f raw "$EFZ" -c "write -z 0 8M" -c "read -P 0 0 8M" \
	>>"$T/qfz.log" 2>&1 || { cat "$T/qfz.log"; fail "NOUNMAP zero fz"; }
mid=$(allocated "$T/fz.img")
((mid + (1 << 20) >= before)) || fail "NOUNMAP zeroing freed blocks: $before -> $mid"
timeout 60 qemu-io -f raw "$EFZ" -c "write -z -u 0 8M" -c "read -P 0 0 8M" \
	-c "read -P 0x33 8M 8M" >>"$T/qfz.log" 2>&1 ||
	{ cat "$T/qfz.log"; fail "unmap zero fz"; }
after=$(allocated "$T/fz.img")
((after + (6 << 20) <= mid)) || fail "unmap zeroing kept blocks: $mid -> $after"

note "qemu-nbd --discard=unmap: fast zero and TRIM -> unmap zeroing"
ctl 0 explain q
[[ $OUT == *"write_zeroes_unmap yes"*"can_fast_zero=1"*"can_trim=1"* ]] ||
	fail "explain q: $OUT"
timeout 60 qemu-io -f raw "$EQ" -c "write -P 0x44 0 8M" -c flush \
	>"$T/qq.log" 2>&1 || { cat "$T/qq.log"; fail "fill q"; }
cmp -n 1M <(head -c 1M /dev/zero | tr '\0' 'D') "$T/q.img" || fail "q.img lacks the bytes"
before=$(allocated "$T/q.img")
timeout 60 qemu-io -f raw "$EQ" -c "write -z -u 0 8M" -c "read -P 0 0 8M" \
	>>"$T/qq.log" 2>&1 || { cat "$T/qq.log"; fail "zero q"; }
after=$(allocated "$T/q.img")
((after + (6 << 20) <= before)) || fail "q.img kept blocks: $before -> $after"

note "blkstackd as the server: unmap zeroing from its fast zero"
ctl 0 explain a
[[ $OUT == *"write_zeroes_unmap yes"*"can_fast_zero=1"* ]] || fail "explain a: $OUT"
timeout 60 qemu-img convert -n -f raw -O raw "$T/pat" "$EA" || fail "convert to a"
cmp -n 8M "$T/pat" "$T/a.img" || fail "a.img differs from what was written"
before=$(allocated "$T/a.img")
timeout 60 qemu-io -f raw "$EA" -c "write -z -u 0 8M" -c "read -P 0 0 8M" \
	>"$T/qa.log" 2>&1 || { cat "$T/qa.log"; fail "zero a"; }
after=$(allocated "$T/a.img")
((after + (6 << 20) <= before)) || fail "a.img kept blocks: $before -> $after"

stop_daemon
kill -TERM "$APID"
wait "$APID" || fail "blkstackd A exited $?"
APID=
note "PASS"
