/* SPDX-License-Identifier: MIT */
/*
 * The nbd driver's block status: the server's base:allocation meta
 * context (nbd_aio_block_status) as the device's allocation map.
 *
 * The core's block_status op is synchronous and runs on the asking
 * thread (an export's I/O thread, the CLI), while the request
 * connections belong to the main loop. So block status has a handle of
 * its own, made on first use and shared under a lock; the call waits for
 * its answer with nbd_poll(), bounded by min(timeout, 5 s) in all. On any
 * failure the range is left undescribed, which the core reports as data:
 * never wrong, only less sparse. The handle is made again on the next call.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "drivers/nbd.h"

#define ST_MAX_WAIT_MS 5000
#define ST_CHUNK (1u << 30)	/* bytes asked per NBD_CMD_BLOCK_STATUS */
#define ST_MAX_ROUNDS 64

struct walk {
	bs_extent_fn fn;
	void *arg;
	uint64_t pos;		/* next byte to describe */
	bool stop;
};

static int extent_cb(void *user_data, const char *metacontext,
		     uint64_t offset, uint32_t *entries, size_t nr_entries,
		     int *error)
{
	struct walk *w = user_data;
	size_t i;

	if (strcmp(metacontext, LIBNBD_CONTEXT_BASE_ALLOCATION) || *error)
		return 0;
	if (offset != w->pos)
		return 0;	/* not what we asked: leave it to the core */
	for (i = 0; i + 1 < nr_entries && !w->stop; i += 2) {
		uint32_t len = entries[i], st = entries[i + 1];
		uint32_t fl = 0;

		if (!len)
			break;
		if (st & LIBNBD_STATE_HOLE)
			fl |= BS_EXT_HOLE;
		if (st & LIBNBD_STATE_ZERO)
			fl |= BS_EXT_ZERO;
		if (w->fn(w->arg, w->pos, len, fl))
			w->stop = true;
		w->pos += len;
	}
	return 0;
}

static int wait_ms_left(uint64_t until)
{
	uint64_t now = bs_now_ns();

	return now >= until ? 0 : (int)((until - now) / 1000000 + 1);
}

/* A connected status handle, or NULL with s->st_error set. */
static struct nbd_handle *st_handle(struct nbdc *s, uint64_t until)
{
	struct nbd_handle *h = s->st_h;
	int left;

	if (h && nbd_lib.nbd_aio_is_ready(h))
		return h;
	if (h)
		nbd_lib.nbd_close(h);
	s->st_h = NULL;
	h = nbd_lib.nbd_create();
	if (!h)
		goto fail;
	nbd_lib.nbd_set_handle_name(h, s->dev->name);
	if (nbd_lib.nbd_add_meta_context(h,
					 LIBNBD_CONTEXT_BASE_ALLOCATION) < 0 ||
	    nbd_lib.nbd_aio_connect_uri(h, s->o.uri) < 0)
		goto fail;
	while (!nbd_lib.nbd_aio_is_ready(h)) {
		if (nbd_lib.nbd_aio_is_dead(h) || nbd_lib.nbd_aio_is_closed(h))
			goto fail;
		left = wait_ms_left(until);
		if (!left) {
			snprintf(s->st_error, sizeof(s->st_error),
				 "not connected in time");
			goto out;
		}
		if (nbd_lib.nbd_poll(h, left) < 0)
			goto fail;
	}
	s->st_h = h;
	return h;
fail:
	snprintf(s->st_error, sizeof(s->st_error), "%s",
		 nbd_lib.nbd_get_error() ? nbd_lib.nbd_get_error() : "cannot connect");
out:
	if (h)
		nbd_lib.nbd_close(h);
	return NULL;
}

int nbdc_block_status(struct bs_dev *dev, uint64_t offset, uint64_t len,
		      bs_extent_fn fn, void *arg)
{
	struct nbdc *s = dev->priv;
	uint64_t wait = s->o.timeout_s * 1000ull < ST_MAX_WAIT_MS
			? s->o.timeout_s * 1000ull : ST_MAX_WAIT_MS;
	uint64_t until = bs_now_ns() + wait * 1000000ull;
	uint64_t end = offset + len;
	struct walk w = { fn, arg, offset, false };
	struct nbd_handle *h;
	unsigned rounds;

	/* set by the main loop at each decision */
	if (!__atomic_load_n(&s->st_offered, __ATOMIC_RELAXED))
		return 0;	/* the core reports it all as data */
	pthread_mutex_lock(&s->st_lock);
	s->st_calls++;
	h = st_handle(s, until);
	if (!h)
		goto failed;
	if (nbd_lib.nbd_can_meta_context(h,
					 LIBNBD_CONTEXT_BASE_ALLOCATION) != 1) {
		snprintf(s->st_error, sizeof(s->st_error),
			 "server did not agree to base:allocation");
		goto failed;
	}
	for (rounds = 0; w.pos < end && !w.stop && rounds < ST_MAX_ROUNDS;
	     rounds++) {
		uint64_t n = end - w.pos, before = w.pos;
		nbd_extent_callback ecb = { .callback = extent_cb,
					    .user_data = &w };
		int64_t cookie;
		int done = 0;

		if (n > ST_CHUNK)
			n = ST_CHUNK;
		cookie = nbd_lib.nbd_aio_block_status(h, n, w.pos, ecb,
					      NBD_NULL_COMPLETION, 0);
		if (cookie < 0)
			goto failed_close;
		while (!(done = nbd_lib.nbd_aio_command_completed(h, cookie))) {
			int left = wait_ms_left(until);

			if (!left) {
				snprintf(s->st_error, sizeof(s->st_error),
					 "no answer in time");
				goto timed_out;
			}
			if (nbd_lib.nbd_poll(h, left) < 0)
				goto failed_close;
		}
		if (done < 0)
			goto failed_close;
		if (w.pos == before)
			break;		/* described nothing: the core fills */
	}
	pthread_mutex_unlock(&s->st_lock);
	return 0;
failed_close:
	snprintf(s->st_error, sizeof(s->st_error), "%s",
		 nbd_lib.nbd_get_error() ? nbd_lib.nbd_get_error() : "failed");
timed_out:
	nbd_lib.nbd_close(h);
	s->st_h = NULL;
failed:
	s->st_failed++;
	pthread_mutex_unlock(&s->st_lock);
	return 0;
}

void nbdc_status_close(struct nbdc *s)
{
	pthread_mutex_lock(&s->st_lock);
	if (s->st_h)
		nbd_lib.nbd_close(s->st_h);
	s->st_h = NULL;
	pthread_mutex_unlock(&s->st_lock);
}
