/* SPDX-License-Identifier: MIT */
/*
 * Device I/O of a command: the per-command context, requests with a next
 * step, errors as sense, and the LU's write gate that makes COMPARE AND
 * WRITE atomic against every other write of the unit.
 *
 * The gate: plain writes (WRITE, WRITE AND VERIFY, WRITE SAME, UNMAP) are
 * admitted side by side; a COMPARE AND WRITE (or ORWRITE, also a
 * read-modify-write) is admitted alone, once the
 * writes admitted before it are done, and whatever arrives while it waits
 * or runs waits behind it, in arrival order. The whole unit is the range:
 * COMPARE AND WRITE is rare (cluster locks), one block long, and a range
 * tree per unit would cost every write more than the rare wait does.
 * Waiters are resumed on their own loop (bs_loop_send()). A command that
 * writes another unit (EXTENDED COPY) enters that unit's gate, one gate
 * at a time.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bufpool.h>

#include "export/scsi/internal.h"

struct scsi_io *scsi_io_new(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	struct scsi_io *io = calloc(1, sizeof(*io));
	uint64_t nblocks;

	if (!io) {
		scsi_check(cmd, SK_HARDWARE_ERROR, A_INTERNAL_FAILURE);
		return NULL;
	}
	io->cmd = cmd;
	io->lu = lu;
	io->loop = bs_loop_current();
	scsi_lu_geometry(lu, &nblocks, &io->bs);
	scsi_core(cmd)->io = io;
	return io;
}

int scsi_io_buf(struct scsi_io *io, size_t len)
{
	io->buf_len = len;
	io->buf = bs_buf_get(len);
	if (!io->buf) {
		scsi_check(io->cmd, SK_HARDWARE_ERROR, A_INTERNAL_FAILURE);
		scsi_io_end(io);
		return -ENOMEM;
	}
	return 0;
}

void scsi_io_end(struct scsi_io *io)
{
	struct bs_scsi_cmd *cmd = io->cmd;

	if (io->fini)
		io->fini(io);
	if (io->gate)
		scsi_gate_leave(io);
	if (io->buf)
		bs_buf_put(io->buf, io->buf_len);
	free(io->ext);
	scsi_core(cmd)->io = NULL;
	free(io);
	scsi_finish(cmd);
}

void scsi_io_fail(struct scsi_io *io, int err)
{
	scsi_check_errno(io->cmd, err, io->write);
	scsi_io_end(io);
}

static void io_done(struct bs_req *req)
{
	struct scsi_io *io = req->priv;

	if (req->result < 0) {
		scsi_io_fail(io, req->result);
		return;
	}
	if (__atomic_load_n(&scsi_core(io->cmd)->aborted, __ATOMIC_RELAXED)) {
		/* aborted by task management: no further step (the long
		 * chunk loops of WRITE SAME, VERIFY, copies stop here); the
		 * status becomes TASK ABORTED as the task leaves the set */
		scsi_io_end(io);
		return;
	}
	io->step(io);
}

void scsi_io_submit(struct scsi_io *io, enum bs_op op, uint32_t flags,
		    uint64_t lba, uint64_t n, void *buf, scsi_io_fn step)
{
	io->step = step;
	bs_req_init(&io->req, op, flags, lba * io->bs, n * io->bs, buf, io_done,
		    io);
	bs_submit(io->lu->dev, &io->req);
}

/* ---- the write gate ------------------------------------------------------ */

static bool gate_admits(const struct scsi_gate *g, bool excl)
{
	if (g->excl)
		return false;
	return excl ? g->writes == 0 : true;
}

static void gate_take(struct scsi_gate *g, struct scsi_io *io)
{
	if (io->gate == 2)
		g->excl = true;
	else
		g->writes++;
}

static void gate_go(void *arg)
{
	struct scsi_io *io = arg;

	io->gate_go(io);
}

void scsi_gate_enter(struct scsi_io *io, bool excl, scsi_io_fn go)
{
	scsi_gate_enter_unit(io, io->lu, excl, go);
}

void scsi_gate_enter_unit(struct scsi_io *io, struct bs_scsi_lu *lu,
			  bool excl, scsi_io_fn go)
{
	struct bs_scsi_tgt *t = lu->tgt;
	struct scsi_gate *g = &lu->gate;
	bool now;

	io->gate = excl ? 2 : 1;
	io->gate_lu = lu;
	io->gate_go = go;
	pthread_mutex_lock(&t->lock);
	now = !g->head && gate_admits(g, excl);
	if (now) {
		gate_take(g, io);
	} else {
		io->gate_next = NULL;
		if (g->tail)
			g->tail->gate_next = io;
		else
			g->head = io;
		g->tail = io;
	}
	pthread_mutex_unlock(&t->lock);
	if (now)
		go(io);
}

void scsi_gate_leave(struct scsi_io *io)
{
	struct bs_scsi_tgt *t = io->gate_lu->tgt;
	struct scsi_gate *g = &io->gate_lu->gate;
	struct scsi_io *run = NULL, **tail = &run, *w;

	pthread_mutex_lock(&t->lock);
	if (io->gate == 2)
		g->excl = false;
	else
		g->writes--;
	io->gate = 0;
	io->gate_lu = NULL;
	while ((w = g->head) && gate_admits(g, w->gate == 2)) {
		g->head = w->gate_next;
		if (!g->head)
			g->tail = NULL;
		gate_take(g, w);
		w->gate_next = NULL;
		*tail = w;
		tail = &w->gate_next;
	}
	pthread_mutex_unlock(&t->lock);
	while ((w = run)) {
		run = w->gate_next;
		w->work.fn = gate_go;
		w->work.arg = w;
		w->work.next = NULL;
		bs_loop_send(w->loop, &w->work);
	}
}
