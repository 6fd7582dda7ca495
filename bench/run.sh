#!/usr/bin/env bash
# make bench: every benchmark in one run, side by side with the peers, as
# Markdown on stdout and in bench/results/latest.md. Not a test: numbers
# below target are findings, not failures.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
# a quick run (BENCH_QUICK=1) is a trial of the scripts, not a result:
# it never overwrites latest.md
out=${BENCH_OUT:-$(pick "${TMPDIR:-/tmp}/blkstack-bench-quick.md" bench/results/latest.md)}
tmp=$(mktemp)
# every script records the rows that miss a target here; printed last
BENCH_TARGETS=$(mktemp)
export BENCH_TARGETS
trap 'rm -f "$tmp" "$BENCH_TARGETS"' EXIT
{
	echo "# blkstack benchmarks"
	echo
	echo "Run $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo
	machine_info
	echo
	for b in ${BENCHES:-zeroing load datapath latency iscsi nvmf fs_overwrite rbd nfs nfs_rw}; do
		[ -x "bench/$b.sh" ] || continue
		echo "running bench/$b.sh" >&2
		start=$SECONDS
		if ! "bench/$b.sh"; then
			echo
			echo "**bench/$b.sh failed** (see its output above)"
		fi
		echo "bench/$b.sh took $((SECONDS - start)) s" >&2
		echo
	done
	targets_summary "$BENCH_TARGETS"
} | tee "$tmp"
mkdir -p "$(dirname "$out")"
cp "$tmp" "$out"
echo "written to $out" >&2
