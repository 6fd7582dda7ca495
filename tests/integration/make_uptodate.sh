#!/usr/bin/env bash
# A second `make` with nothing changed does nothing: no object deleted as
# an intermediate, no test relinked (issue 10 item 17). Runs after
# `make check` has built build/ and build/asan/; `make -q` asks without
# building and exits 1 when anything would be remade.
set -uo pipefail
cd "$(dirname "$0")/../.."

checked=0
for b in "build" "build/asan SAN=1"; do
	dir=${b%% *}
	[[ -d $dir/obj ]] || continue
	# shellcheck disable=SC2086
	if ! make -q BUILD=$b all >/dev/null 2>&1; then
		echo "FAIL: make BUILD=$b all would rebuild with nothing changed:"
		# shellcheck disable=SC2086
		make -n BUILD=$b all 2>&1 | head -5
		exit 1
	fi
	echo "-- $dir up to date"
	checked=$((checked + 1))
done
((checked)) || { echo "SKIP: no build tree (run make first)"; exit 77; }
echo "PASS"
