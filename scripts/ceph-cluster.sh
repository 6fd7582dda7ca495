#!/usr/bin/env bash
# A throw-away one-node Ceph cluster for tests and benchmarks: one monitor
# and one OSD, no manager, on 127.0.0.1, authentication off, every file
# under DIR, and a pool `rbd` of size 1.
#
#   scripts/ceph-cluster.sh start DIR [PORT]   make and start (free port if none)
#   scripts/ceph-cluster.sh stop DIR           stop the daemons it started
#   scripts/ceph-cluster.sh env DIR            print `export CEPH_CONF=...`
#
# Environment: CEPH_STORE=memstore (default; data in RAM) or bluestore (a
# sparse file DIR/osd.0/block made by BlueStore), CEPH_STORE_SIZE=4G (memstore's capacity or
# the sparse file's size), CEPH_START_TIMEOUT=60 (seconds).
#
# Under DIR: ceph.conf, mon/ and osd.0/ (data), run/ (pid files, admin
# sockets), log/ (daemon and client logs, the cluster log). `stop` kills
# exactly the PIDs in DIR/run/*.pid (TERM, then KILL after 10 s) and
# leaves the files; remove DIR yourself. Exit 0, or 1 with the reason and
# the tail of the log that explains it.
set -euo pipefail

say() { echo "ceph-cluster: $*"; }
die() {
	echo "ceph-cluster: error: $1" >&2
	if [[ -n ${2:-} && -f $2 ]]; then
		echo "--- last lines of $2:" >&2
		tail -n 25 "$2" >&2
	fi
	# a failed start leaves nothing running
	if [[ ${STARTING:-0} == 1 ]]; then
		STARTING=0
		stop_cluster >&2 || true
	fi
	exit 1
}

usage() { die "usage: $0 start DIR [PORT] | stop DIR | env DIR"; }

(($# >= 2)) || usage
CMD=$1
DIR=$2
PORT=${3:-}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# run a client command against the cluster, bounded in time
cc() { timeout 20 ceph --conf "$DIR/ceph.conf" --connect-timeout 15 "$@"; }

pid_alive() {
	local f=$1 pid
	[[ -f $f ]] || return 1
	pid=$(cat "$f")
	[[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null
}

stop_cluster() {
	local f pid i
	[[ -d $DIR/run ]] || { say "nothing to stop in $DIR"; return 0; }
	# the OSD first, then the monitor
	for f in "$DIR/run/osd.0.pid" "$DIR/run/mon.a.pid"; do
		[[ -f $f ]] || continue
		pid=$(cat "$f")
		if ! [[ $pid =~ ^[0-9]+$ ]] || ! kill -0 "$pid" 2>/dev/null; then
			rm -f "$f"
			continue
		fi
		# only what we started: the PID must still be a ceph daemon
		# whose command line names this directory's config
		if ! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null |
			grep -qF -- "$DIR/ceph.conf"; then
			say "pid $pid in $f is not our daemon any more; left alone"
			rm -f "$f"
			continue
		fi
		say "stopping $(basename "$f" .pid) (pid $pid)"
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < 100; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			say "pid $pid still there after 10 s: KILL"
			kill -KILL "$pid" 2>/dev/null || true
		fi
		rm -f "$f"
	done
}

write_conf() {
	local fsid=$1 store=$2 size=$3
	cat >"$DIR/ceph.conf" <<EOF
# made by scripts/ceph-cluster.sh: a one-node test cluster, nothing more
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$PORT
mon initial members = a
public network = 127.0.0.1/32
auth cluster required = none
auth service required = none
auth client required = none
auth allow insecure global id reclaim = false
keyring = $DIR/keyring
run dir = $DIR/run
admin socket = $DIR/run/\$cluster-\$name.\$pid.asok
log file = $DIR/log/\$name.log
log to stderr = false
err to stderr = true
mon cluster log file = $DIR/log/cluster.log
ms bind ipv4 = true
ms bind ipv6 = false
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon max pg per osd = 1000
mon osd down out interval = 0
osd objectstore = $store
memstore device bytes = $size
bluestore block size = $size
bluestore block create = true
bluestore cache autotune = false
bluestore cache size = 128M
osd memory target = 939524096
osd op num shards = 1
osd op num threads per shard = 2
osd max object name len = 256
osd max object namespace len = 64
mon data avail warn = 1
mon data avail crit = 0
mon pg warn min per osd = 0
osd pool default pg autoscale mode = off

[mon]
mon data = $DIR/mon
pid file = $DIR/run/mon.a.pid

[osd]
osd data = $DIR/osd.0
pid file = $DIR/run/osd.0.pid
osd crush update on start = true

[client]
log file = $DIR/log/client.\$pid.log
admin socket = $DIR/run/client.\$pid.asok
EOF
}

start_cluster() {
	local store=${CEPH_STORE:-memstore} size=${CEPH_STORE_SIZE:-4G}
	local limit=${CEPH_START_TIMEOUT:-60} fsid uuid i t0 bytes
	t0=$(date +%s)
	for c in ceph-mon ceph-osd ceph monmaptool rados python3; do
		command -v "$c" >/dev/null ||
			die "$c not installed (scripts/deps.sh installs ceph-mon ceph-osd ceph-common)"
	done
	case $store in
	memstore | bluestore) ;;
	*) die "CEPH_STORE=$store: memstore or bluestore" ;;
	esac
	bytes=$(numfmt --from=iec "$size") || die "CEPH_STORE_SIZE=$size: not a size"
	if [[ -e $DIR/ceph.conf ]]; then
		pid_alive "$DIR/run/mon.a.pid" && die "a cluster already runs in $DIR"
		die "$DIR already holds a cluster's files; stop it and remove $DIR first"
	fi
	mkdir -p "$DIR"
	DIR=$(cd "$DIR" && pwd)
	mkdir -p "$DIR/mon" "$DIR/osd.0" "$DIR/run" "$DIR/log"
	STARTING=1
	[[ -n $PORT ]] || PORT=$(free_port)
	fsid=$(cat /proc/sys/kernel/random/uuid)
	uuid=$(cat /proc/sys/kernel/random/uuid)
	say "dir $DIR, monitor 127.0.0.1:$PORT, store $store ($size), fsid $fsid"
	write_conf "$fsid" "$store" "$bytes"
	: >"$DIR/keyring"

	say "monmap: monmaptool --create (mon.a at v2:127.0.0.1:$PORT)"
	monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$PORT]" \
		"$DIR/run/monmap" >"$DIR/log/monmaptool.log" 2>&1 ||
		die "monmaptool failed" "$DIR/log/monmaptool.log"

	say "mon.a: ceph-mon --mkfs"
	ceph-mon --conf "$DIR/ceph.conf" -i a --mkfs --monmap "$DIR/run/monmap" \
		>"$DIR/log/mon-mkfs.log" 2>&1 ||
		die "ceph-mon --mkfs failed" "$DIR/log/mon-mkfs.log"

	say "mon.a: start"
	ceph-mon --conf "$DIR/ceph.conf" -i a >"$DIR/log/mon-start.log" 2>&1 ||
		die "ceph-mon did not start" "$DIR/log/mon.a.log"
	for ((i = 0; i < 100; i++)); do
		pid_alive "$DIR/run/mon.a.pid" && break
		sleep 0.1
	done
	pid_alive "$DIR/run/mon.a.pid" || die "ceph-mon exited" "$DIR/log/mon.a.log"
	cc mon stat >"$DIR/log/mon-stat.log" 2>&1 ||
		die "the monitor does not answer" "$DIR/log/mon.a.log"

	say "osd.0: ceph osd new ($uuid)"
	i=$(cc osd new "$uuid" 2>"$DIR/log/osd-new.log") ||
		die "ceph osd new failed" "$DIR/log/osd-new.log"
	[[ $i == 0 ]] || die "ceph osd new gave id $i, expected 0"

	say "osd.0: ceph-osd --mkfs ($store)"
	ceph-osd --conf "$DIR/ceph.conf" -i 0 --mkfs --osd-uuid "$uuid" \
		>"$DIR/log/osd-mkfs.log" 2>&1 ||
		die "ceph-osd --mkfs failed" "$DIR/log/osd.0.log"

	say "osd.0: start"
	ceph-osd --conf "$DIR/ceph.conf" -i 0 >"$DIR/log/osd-start.log" 2>&1 ||
		die "ceph-osd did not start" "$DIR/log/osd.0.log"
	for ((i = 0; i < 10 * limit; i++)); do
		pid_alive "$DIR/run/osd.0.pid" ||
			{ ((i < 50)) && { sleep 0.1; continue; }; die "ceph-osd exited" "$DIR/log/osd.0.log"; }
		if cc osd dump 2>/dev/null | grep -q '^osd\.0 up'; then
			break
		fi
		(($(date +%s) - t0 < limit)) || die "osd.0 not up after ${limit} s" "$DIR/log/osd.0.log"
		sleep 0.2
	done

	say "pool rbd: create (size 1, 8 PGs, autoscale off), rbd pool init"
	cc osd pool create rbd 8 8 replicated --size 1 --autoscale-mode off \
		>"$DIR/log/pool.log" 2>&1 ||
		die "pool create failed" "$DIR/log/pool.log"
	cc osd pool set rbd min_size 1 >>"$DIR/log/pool.log" 2>&1 ||
		die "pool min_size failed" "$DIR/log/pool.log"
	timeout 30 rbd --conf "$DIR/ceph.conf" pool init rbd >>"$DIR/log/pool.log" 2>&1 ||
		die "rbd pool init failed" "$DIR/log/pool.log"

	say "pool rbd: wait until writable (rados put/get/rm)"
	echo probe >"$DIR/run/probe"
	while :; do
		if timeout 10 rados --conf "$DIR/ceph.conf" -p rbd put \
			blkstack-probe "$DIR/run/probe" >"$DIR/log/probe.log" 2>&1 &&
			timeout 10 rados --conf "$DIR/ceph.conf" -p rbd rm \
				blkstack-probe >>"$DIR/log/probe.log" 2>&1; then
			break
		fi
		(($(date +%s) - t0 < limit)) ||
			die "pool rbd not writable after ${limit} s" "$DIR/log/osd.0.log"
		sleep 0.5
	done
	rm -f "$DIR/run/probe"
	STARTING=0
	say "up in $(($(date +%s) - t0)) s: export CEPH_CONF=$DIR/ceph.conf (mon pid $(cat "$DIR/run/mon.a.pid"), osd pid $(cat "$DIR/run/osd.0.pid"))"
}

case $CMD in
start)
	start_cluster || exit 1
	;;
stop)
	[[ -d $DIR ]] || die "$DIR: no such directory"
	DIR=$(cd "$DIR" && pwd)
	stop_cluster
	;;
env)
	[[ -f $DIR/ceph.conf ]] || die "$DIR/ceph.conf: no cluster there"
	DIR=$(cd "$DIR" && pwd)
	echo "export CEPH_CONF=$DIR/ceph.conf"
	;;
*)
	usage
	;;
esac
