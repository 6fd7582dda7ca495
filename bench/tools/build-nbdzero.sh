#!/usr/bin/env bash
# Builds bench/tools/nbdzero.c (libnbd) into OUT. Exit 77 with a reason
# when libnbd's headers are missing (scripts/deps.sh installs libnbd-dev).
set -euo pipefail
OUT=$1
SRC=$(cd "$(dirname "$0")" && pwd)/nbdzero.c
if ! pkg-config --exists libnbd 2>/dev/null; then
	echo "nbdzero: libnbd-dev is not installed (scripts/deps.sh)" >&2
	exit 77
fi
mkdir -p "$(dirname "$OUT")"
if [ ! -x "$OUT" ] || [ "$SRC" -nt "$OUT" ]; then
	# shellcheck disable=SC2046
	cc -std=gnu17 -O2 -g -Wall -Wextra -Werror -Wshadow -Wmissing-prototypes \
		-o "$OUT" "$SRC" $(pkg-config --cflags --libs libnbd)
fi
