# Shared by the NFS server's tests (sourced after daemon.bash).

# nfs_dir_export INI NAME DIR PORT [LINE...]: append an nfs export NAME of
# the host directory DIR on 127.0.0.1:PORT to INI, with a short lease and
# no grace period (so that a test's first OPEN is not refused), then any
# further config LINEs ("inline = 0").
nfs_dir_export() {
	local ini=$1 name=$2 dir=$3 port=$4
	shift 4
	{
		printf '[export %s]\ntype = nfs\npath = %s\n' "$name" "$dir"
		printf 'listen = 127.0.0.1:%s\nlease = 5\ngrace = 0\n' "$port"
		if (($#)); then printf '%s\n' "$@"; fi
	} >>"$ini"
}

# nfsio_build: bench/tools/nfsio (libnfs's async API) into $NFSIO; fails
# with the reason as the last line of $T/nfsio.build.
nfsio_build() {
	NFSIO=$BUILD/bench/nfsio
	bench/tools/build-nfsio.sh "$NFSIO" 2>"$T/nfsio.build"
}

# nfsio_why: why nfsio_build failed
nfsio_why() { tail -1 "$T/nfsio.build"; }
