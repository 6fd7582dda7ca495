#!/usr/bin/env bash
# Builds bench/tools/nfsio.c (libnfs's asynchronous API) into OUT.
# Exit 77 with a reason when libnfs's headers are missing (scripts/deps.sh
# installs libnfs-dev). libnfs 4.x gets NFSIO_GROW_COMPOUND (see nfsio.c).
set -euo pipefail
OUT=$1
SRC=$(cd "$(dirname "$0")" && pwd)/nfsio.c
if ! pkg-config --exists libnfs 2>/dev/null || [ ! -f /usr/include/nfsc/libnfs.h ]; then
	echo "nfsio: libnfs-dev is not installed (scripts/deps.sh)" >&2
	exit 77
fi
defs=()
[[ $(pkg-config --modversion libnfs) == 4.* ]] && defs=(-DNFSIO_GROW_COMPOUND)
mkdir -p "$(dirname "$OUT")"
if [ ! -x "$OUT" ] || [ "$SRC" -nt "$OUT" ]; then
	# shellcheck disable=SC2046
	cc -std=gnu17 -O2 -g -Wall -Wextra -Werror -Wshadow -Wmissing-prototypes \
		"${defs[@]}" -o "$OUT" "$SRC" $(pkg-config --cflags --libs libnfs) -ldl
fi
