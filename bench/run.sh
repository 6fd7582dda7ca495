#!/usr/bin/env bash
# make bench: every benchmark in one run, side by side with the peers, as
# Markdown on stdout and in bench/results/latest.md. Not a test: numbers
# below target are findings, not failures.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
out=bench/results/latest.md
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
{
	echo "# blkstack benchmarks"
	echo
	echo "Run $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo
	machine_info
	echo
	for b in ${BENCHES:-zeroing load datapath fs_overwrite}; do
		[ -x "bench/$b.sh" ] || continue
		echo "running bench/$b.sh" >&2
		if ! "bench/$b.sh"; then
			echo
			echo "**bench/$b.sh failed** (see its output above)"
		fi
		echo
	done
} | tee "$tmp"
mkdir -p bench/results
cp "$tmp" "$out"
echo "written to $out" >&2
