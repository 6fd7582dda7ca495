/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the NFS server's input path without a socket: record
 * marking (fragments, the size cap), the RPC call header and credentials,
 * COMPOUND decoding and every op handler, over a host-directory backend
 * in a temporary directory made once per process. Server state (clients,
 * sessions, opens, files) carries over from one input to the next, as on
 * a long connection.
 *
 * Each reply must fit the room nfs_reply_room() read from its call (the
 * budget's reply room), unless it is a replay from the reply cache.
 *
 * WRITE_SAME is served, so one input could ask the backend to write up to
 * the maximum file size: the sink's maximum is capped at 1 MiB here (larger
 * ranges answer FBIG), so a run never fills the disk.
 *
 * Input layout:
 *   byte 0   feed granularity: bytes per feed is 1 + byte * 31; when
 *            odd, each call is first run as on a connection's I/O thread
 *            (nowait) and, where that stops at an op, run on from there
 *            (conn.c's way); when even, run whole (a worker's)
 *   rest     the client's byte stream (record-marked RPC calls)
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <blkstack/write_same.h>

#include "export/nfs/nfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct nfs_server *srv;
static uint8_t *reply;

/* the dir backend's ops, with_ws_sink capped (above) */
#define FUZZ_WS_MAX (1u << 20)
static const struct nfs_backend_ops *dir_ops;
static struct nfs_backend_ops capped_ops;

struct ws_cap {
	int (*fn)(void *arg, const struct bs_ws_sink *sink);
	void *arg;
};

static int ws_capped(void *arg, const struct bs_ws_sink *sink)
{
	struct ws_cap *w = arg;
	struct bs_ws_sink s = *sink;

	s.max_size = FUZZ_WS_MAX;
	return w->fn(w->arg, &s);
}

static int with_ws_sink_capped(struct nfs_backend *b, const struct nfs_fh *fh,
			       int (*fn)(void *arg,
					 const struct bs_ws_sink *sink),
			       void *arg)
{
	struct ws_cap w = { .fn = fn, .arg = arg };

	return dir_ops->with_ws_sink(b, fh, ws_capped, &w);
}

static struct nfs_server *server(void)
{
	static char dir[] = "/tmp/fuzz_nfs_rpc.XXXXXX";

	if (srv)
		return srv;
	if (!mkdtemp(dir))
		abort();
	srv = calloc(1, sizeof(*srv));
	reply = malloc(NFS_MAX_REPLY);
	if (!srv || !reply)
		abort();
	pthread_mutex_init(&srv->lock, NULL);
	srv->refs = 1;
	srv->lease = 3600;
	srv->grace = 0;
	srv->boot = nfs_now() - 1;
	srv->export_id = 1;
	srv->boot_tag = 2;
	if (nfs_backend_dir_open(&srv->be, dir))
		abort();
	dir_ops = srv->be.ops;
	capped_ops = *dir_ops;
	capped_ops.with_ws_sink = with_ws_sink_capped;
	srv->be.ops = &capped_ops;
	return srv;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nfs_server *s = server();
	struct nfs_rm rm;
	struct nfs_call *call = malloc(sizeof(*call));
	size_t step, used = 0, n;
	bool nowait;

	if (!call)
		abort();
	if (size < 1) {
		free(call);
		return 0;
	}
	step = 1 + (size_t)data[0] * 31;
	nowait = data[0] & 1;
	data++;
	size--;
	nfs_rm_init(&rm, 256 * 1024);
	while (used < size) {
		size_t k = size - used < step ? size - used : step;
		long r = nfs_rm_feed(&rm, data + used, k);

		if (r < 0)
			break;
		used += (size_t)r;
		if (rm.ready) {
			size_t room = nfs_reply_room(rm.buf, rm.len);

			n = 0;
			if (!nfs_call_start(call, s, 1, rm.buf, rm.len, reply,
					    NFS_MAX_REPLY) &&
			    nfs_call_run(call, nowait, &n) == -EAGAIN)
				nfs_call_run(call, false, &n);
			/* the budget's room for the reply held it (a
			 * replay from the slot's cache may be longer) */
			if (n > room && !(call->compound && call->run.replayed))
				abort();
			nfs_rm_next(&rm);
		}
	}
	nfs_rm_free(&rm);
	free(call);
	return 0;
}
