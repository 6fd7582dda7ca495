#!/usr/bin/env bash
# blkstack -c FILE with mapper stacks: ls and explain name the file leg
# whose zeroes = write clears write_zeroes_unmap up a striped-over-linear
# stack; zeroout still zeroes it through the files; the new types are in
# --help; zero, mirror and error devices from a config.
source "$(dirname "$0")/lib/cli-common.bash"
make_tmp

# (the whole help text first: grep -q on a pipe would SIGPIPE blkstack)
run_bs 0 --help
for t in striped mirror zero error; do
	grep -Eq "^  $t( |\$)" <<<"$OUT" || fail "--help does not list device type $t"
done

cat >"$T/stack.ini" <<INI
[device m0]
type = mem
size = 4M

[device slowfile]
type = file
path = $T/slow.img
size = 4M
zeroes = write

[device m1]
type = mem
size = 4M

[device fastfile]
type = file
path = $T/fast.img
size = 4M

[device l0]
type = linear
devices = m0 slowfile

[device l1]
type = linear
devices = m1 fastfile

[device vol]
type = striped
devices = l0 l1
chunk = 128K
INI

run_bs 0 -c "$T/stack.ini" ls
note "ls:"$'\n'"$OUT"
grep -Eq '^vol +striped +16 MiB +no ' <<<"$OUT" || fail "ls vol: $OUT"
grep -Eq '^├─ l0 +linear +8 MiB +no ' <<<"$OUT" || fail "ls l0: $OUT"
grep -Eq '^│  └─ slowfile +file +4 MiB +no ' <<<"$OUT" || fail "ls slowfile: $OUT"
grep -Eq '^│  ├─ m0 +mem +4 MiB +yes ' <<<"$OUT" || fail "ls m0: $OUT"

run_bs 0 -c "$T/stack.ini" explain vol
note "explain vol:"$'\n'"$OUT"
head -1 <<<"$OUT" | grep -q 'vol (striped, 16 MiB): write_zeroes_unmap no: striped: cleared because l0 lacks it' ||
	fail "explain top line: $OUT"
grep -q 'l0 (linear, 8 MiB): write_zeroes_unmap no: linear: cleared because slowfile lacks it' <<<"$OUT" ||
	fail "explain l0: $OUT"
grep -q 'slowfile (file, 4 MiB): write_zeroes_unmap no: .*zeroes = write' <<<"$OUT" ||
	fail "explain slowfile: $OUT"
# the healthy half says why it is fine; only the file's own reason may
# depend on the host filesystem
grep -q 'm1 (mem, 4 MiB): write_zeroes_unmap yes' <<<"$OUT" || fail "explain m1: $OUT"

# fallocate WRITE_ZEROES is refused at the top; zeroout writes zeroes
run_bs 1 -c "$T/stack.ini" fallocate -w -l 1M vol
expect_err "blkstack: vol: fallocate: Operation not supported"
head -c $((4 << 20)) /dev/urandom >"$T/junk"
dd if="$T/junk" of="$T/slow.img" conv=notrunc status=none
dd if="$T/junk" of="$T/fast.img" conv=notrunc status=none
run_bs 0 -c "$T/stack.ini" zeroout vol
is_zero "$T/slow.img" 0 $((4 << 20)) || fail "zeroout left data in slow.img"
is_zero "$T/fast.img" 0 $((4 << 20)) || fail "zeroout left data in fast.img"

# knob 0 on a leaf in the config: explain blames it
cat >"$T/knob.ini" <<INI
[device a]
type = mem
size = 2M

[device b]
type = mem
size = 2M
write_zeroes_unmap = 0

[device mir]
type = mirror
devices = a b
INI
run_bs 0 -c "$T/knob.ini" explain mir
grep -q 'mir (mirror, 2 MiB): write_zeroes_unmap no: mirror: cleared because b lacks it' <<<"$OUT" ||
	fail "explain mir: $OUT"
grep -q 'b (mem, 2 MiB): write_zeroes_unmap no: knob write_zeroes_unmap=0 set by user' <<<"$OUT" ||
	fail "explain b: $OUT"
run_bs 0 -c "$T/knob.ini" info mir
grep -Eq '^  state +optimal' <<<"$OUT" || fail "info mir: $OUT"

# zero and error devices from a config
cat >"$T/zero.ini" <<INI
[device z]
type = zero
size = 1T

[device m]
type = mem
size = 1M

[device e]
type = error
devices = m
ops = write,write_zeroes
errno = ENOSPC
after = 5
INI
run_bs 0 -c "$T/zero.ini" ls
grep -Eq '^z +zero +1 TiB +yes ' <<<"$OUT" || fail "ls z: $OUT"
grep -Eq '^e +error +1 MiB +yes ' <<<"$OUT" || fail "ls e: $OUT"
run_bs 0 -c "$T/zero.ini" fallocate -w -l 1G z
run_bs 0 -c "$T/zero.ini" attr e error/after
[[ $OUT == 5 ]] || fail "attr error/after: $OUT"
run_bs 0 -c "$T/zero.ini" info e
grep -Eq '^  errno +ENOSPC' <<<"$OUT" || fail "info e: $OUT"
run_bs 0 -c "$T/zero.ini" zeroout --no-unmap e
# after=0: the first write fails with the chosen errno
sed -i 's/after = 5/after = 0/' "$T/zero.ini"
run_bs 1 -c "$T/zero.ini" zeroout --no-fallback --no-unmap e
[[ $ERR == *"No space left on device"* ]] || fail "error device: $ERR"

# a bad striped config: one line naming the component and both sizes
cat >"$T/bad.ini" <<INI
[device a]
type = mem
size = 1M

[device b]
type = mem
size = 2M

[device s]
type = striped
devices = a b
INI
run_bs 1 -c "$T/bad.ini" ls
expect_err "bad.ini:9:" "b has 2097152 bytes" "a has 1048576"
echo "ok"
