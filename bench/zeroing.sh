#!/usr/bin/env bash
# Table 1 of the cover letter, and the same over NBD: how long does it take
# to make SIZE of zeroes, by writing them and by unmap zeroing?
#
#   (a) dd if=/dev/zero bs=2M oflag=direct          the baseline
#   (b) blkstack fallocate -w on a file device      local unmap zeroing
#   (c) qemu-io write -z -u against blkstackd       over NBD
#   (d) the same against nbdkit (file plugin) and qemu-nbd
#
# Two cases each: a new file (as in the cover letter), and a file whose
# range holds written data (zeroing must really change something).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_dir

SIZES=${ZERO_SIZES:-$(pick 1 "1 10")}	# GiB

prefill() {	# FILE GIB: GIB of non-zero data, written and synced (not timed)
	rm -f "$1"
	dd if=/dev/zero bs=2M count=$(($2 * 512)) status=none | tr '\0' 'x' |
		dd of="$1" bs=2M iflag=fullblock oflag=direct status=none
	sync "$1"
}

qemu_io_zero() {	# URI GIB
	local args=() i
	for ((i = 0; i < $2; i++)); do
		args+=(-c "write -z -u ${i}G 1G")
	done
	bounded qemu-io -f raw "${args[@]}" "$1"
}

echo "### Zeroing: writing zeroes vs unmap zeroing"
echo
echo "| size | case | method | seconds | speed-up vs dd | reads back zero |"
echo "|---:|---|---|---:|---:|:---:|"
for g in $SIZES; do
	bytes=$((g << 30))
	img=$BENCH_DIR/z.img
	rm -f "$img"
	t_dd=$(time_cmd dd if=/dev/zero of="$img" bs=2M count=$((g * 512)) oflag=direct)
	echo "| ${g} GiB | new file | (a) dd 2M direct | $t_dd | 1.00 | $(is_zero_file "$img" 0 "$bytes") |"
	rm -f "$img"

	for case in new data; do
		for m in blkstack blkstackd nbdkit qemu-nbd; do
			rm -f "$img"
			if [ "$case" = data ]; then prefill "$img" "$g"; else truncate -s "${g}G" "$img"; fi
			port=$(free_port)
			case $m in
			blkstack)
				label="(b) blkstack fallocate -w"
				t=$(time_cmd "$BLKSTACK" fallocate -w -l "${g}G" "file:$img")
				;;
			blkstackd)
				label="(c) qemu-io write -z -u → blkstackd"
				start_blkstackd "$img" "$port"
				t=$(time_cmd qemu_io_zero "nbd://127.0.0.1:$port/vol0" "$g")
				stop_server >/dev/null
				;;
			nbdkit)
				label="(d) qemu-io write -z -u → nbdkit file"
				start_nbdkit "$img" "$port"
				t=$(time_cmd qemu_io_zero "nbd://127.0.0.1:$port/vol0" "$g")
				stop_server >/dev/null
				;;
			qemu-nbd)
				label="(d) qemu-io write -z -u → qemu-nbd"
				start_qemu_nbd "$img" "$port"
				t=$(time_cmd qemu_io_zero "nbd://127.0.0.1:$port/vol0" "$g")
				stop_server >/dev/null
				;;
			esac
			z=$(is_zero_file "$img" 0 "$bytes")
			echo "| ${g} GiB | $case | $label | $t | $(ratio "$t_dd" "$t") | $z |"
		done
	done
	rm -f "$img"
done
echo
echo "Target: unmap zeroing of 10 GiB at least 100x faster than writing zeroes,"
echo "locally and through NBD (the seed saw 3x on an NVMe SSD)."
