/* SPDX-License-Identifier: MIT */
/* A library's socket driven from the loop (include/blkstack/fdpump.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/epoll.h>

#include <blkstack/bdev.h>
#include <blkstack/fdpump.h>
#include <blkstack/loop.h>

struct bs_fdpump {
	struct bs_loop *loop;
	const struct bs_fdpump_ops *ops;
	void *lib;
	int fd;			/* watched descriptor, -1 none */
	uint32_t events;	/* what it is watched for */
	unsigned tick_ms;
	int timer;
	bool failed;		/* service failed: wait for update() */
	bool *gone;		/* set when freed from inside a callback */
};

static void unwatch(struct bs_fdpump *p)
{
	if (p->fd >= 0)
		bs_loop_del_fd(p->loop, p->fd);
	p->fd = -1;
	p->events = 0;
}

static void on_fd(void *arg, uint32_t revents);

int bs_fdpump_update(struct bs_fdpump *p)
{
	int fd;
	uint32_t ev;
	int err;

	if (p->failed)
		p->failed = false;
	fd = p->ops->get_fd(p->lib);
	ev = fd >= 0 ? p->ops->events(p->lib) & (EPOLLIN | EPOLLOUT) : 0;
	if (fd != p->fd) {
		/* a new connection (or none): follow it */
		unwatch(p);
		if (fd < 0)
			return 0;
		err = bs_loop_add_fd(p->loop, fd, ev, on_fd, p);
		if (err)
			return bs_error(err, "fdpump: cannot watch fd %d", fd);
		p->fd = fd;
		p->events = ev;
		return 0;
	}
	if (fd >= 0 && ev != p->events) {
		err = bs_loop_mod_fd(p->loop, fd, ev);
		if (err == -ENOENT) {
			/*
			 * The library closed its socket and got the same
			 * number back for a new one: the kernel dropped the
			 * old registration with the close. Watch it anew.
			 */
			bs_loop_del_fd(p->loop, fd);
			err = bs_loop_add_fd(p->loop, fd, ev, on_fd, p);
		}
		if (err)
			return bs_error(err, "fdpump: cannot watch fd %d", fd);
		p->events = ev;
	}
	return 0;
}

static void on_fd(void *arg, uint32_t revents)
{
	struct bs_fdpump *p = arg;
	bool gone = false;
	int err;

	if (p->failed)
		return;
	p->gone = &gone;
	err = p->ops->service(p->lib, revents);
	if (gone)
		return;		/* the callback freed the pump */
	p->gone = NULL;
	if (err) {
		/* stop watching a dead connection; the owner decides */
		unwatch(p);
		p->failed = true;
		if (p->ops->on_error) {
			p->gone = &gone;
			p->ops->on_error(p->lib, err);
			if (gone)
				return;
			p->gone = NULL;
		}
		return;
	}
	bs_fdpump_update(p);
}

static void on_tick(void *arg)
{
	struct bs_fdpump *p = arg;
	bool gone = false;

	p->timer = 0;
	if (p->ops->tick) {
		p->gone = &gone;
		p->ops->tick(p->lib);
		if (gone)
			return;
		p->gone = NULL;
	}
	if (!p->failed)
		bs_fdpump_update(p);
	p->timer = bs_loop_add_timer(p->loop, p->tick_ms, on_tick, p);
}

int bs_fdpump_new(struct bs_loop *loop, const struct bs_fdpump_ops *ops,
		  void *lib, unsigned tick_ms, struct bs_fdpump **out)
{
	struct bs_fdpump *p = calloc(1, sizeof(*p));
	int err;

	if (!p)
		return -ENOMEM;
	p->loop = loop;
	p->ops = ops;
	p->lib = lib;
	p->fd = -1;
	p->tick_ms = tick_ms;
	err = bs_fdpump_update(p);
	if (!err && tick_ms) {
		p->timer = bs_loop_add_timer(loop, tick_ms, on_tick, p);
		if (p->timer < 0)
			err = p->timer;
	}
	if (err) {
		unwatch(p);
		free(p);
		return err;
	}
	*out = p;
	return 0;
}

void bs_fdpump_free(struct bs_fdpump *p)
{
	if (!p)
		return;
	unwatch(p);
	if (p->timer > 0)
		bs_loop_cancel_timer(p->loop, p->timer);
	if (p->gone)
		*p->gone = true;
	free(p);
}
