/* SPDX-License-Identifier: MIT */
/*
 * The control socket: `blkstack -s SOCKET COMMAND ...` runs COMMAND from
 * the shared command table (lib/cmd/) inside the daemon, on its live
 * devices, and streams the output and exit code back (wire format in
 * include/blkstack/control.h). One command runs at a time; further
 * requests queue behind it.
 *
 * Threads: commands that wait for I/O (bs_cmd.threaded: fs, zeroout,
 * fallocate) run on the control thread, a one-thread bs_workers pool; they
 * reach the devices only through the sync wrappers, which post to the loop
 * and sleep (never a nested loop). The rest (ls, info, attr, explain,
 * help) do no I/O and run on the loop's thread. Either way the loop goes on
 * serving every client meanwhile.
 *
 * Streaming: a command's output goes through a stdio stream whose writes
 * frame the bytes into the connection's buffer (at most CTL_STREAM_MAX);
 * the loop sends it as the socket takes it. When the buffer is full the
 * command thread waits: a client that reads slowly slows the command, and
 * memory stays bounded whatever the command writes.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <blkstack/bdev.h>
#include <blkstack/cmd.h>
#include <blkstack/control.h>
#include <blkstack/export.h>
#include <blkstack/loop.h>
#include <blkstack/net.h>
#include <blkstack/workers.h>

#include "daemon.h"

#define CTL_MAX_CONNS 16
/* A client that sends no complete request in this time is dropped. */
#define CTL_IDLE_MS 30000
/* ... and one that reads nothing of its reply in this time. */
#define CTL_STALL_MS 30000
/* Reply bytes buffered per connection before the command waits. */
#define CTL_STREAM_MAX (256u << 10)

struct ctl_conn {
	struct ctl_server *ctl;
	int fd;
	uint8_t *in;
	size_t in_len;
	int argc;
	char **argv;		/* parsed request, waiting or running */
	bool running;		/* its command runs (thread or loop) */
	bool replying;		/* the reply began: send what is buffered */
	bool watched;		/* fd in the loop's epoll set */
	int timer;		/* idle (request) or stall (reply) */
	struct bs_job job;	/* a threaded command */
	int rc;			/* its exit code */
	char first_err[160];	/* first line of its error stream, for the log */
	/* shared with the control thread, under lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;	/* room in the buffer, or gone */
	uint8_t *out;		/* framed reply bytes, [out_off, out_len) */
	size_t out_len, out_off, out_cap;
	bool gone;		/* the client hung up: writes fail */
	bool kicked;		/* a post to send the buffer is pending */
	bool finished;		/* the exit frame is in the buffer */
	struct ctl_conn *next;
};

struct ctl_server {
	struct bsd *d;
	/* listening and accepting: the network server's (lib/export/net/) */
	struct bs_net_listener *nl;
	struct ctl_conn *conns;
	unsigned nconns;
	bool busy;
	bool stopping;		/* ctl_free(): start nothing new */
	struct bs_workers *thread;	/* the control thread, lazy */
};

static void conn_free(struct ctl_conn *c)
{
	struct ctl_server *ctl = c->ctl;
	struct ctl_conn **pp;

	for (pp = &ctl->conns; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			ctl->nconns--;
			break;
		}
	}
	if (c->timer > 0)
		bs_loop_cancel_timer(ctl->d->loop, c->timer);
	if (c->watched)
		bs_loop_del_fd(ctl->d->loop, c->fd);
	close(c->fd);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
	free(c->in);
	free(c->argv);
	free(c->out);
	free(c);
}

static void unwatch(struct ctl_conn *c)
{
	if (c->watched)
		bs_loop_del_fd(c->ctl->d->loop, c->fd);
	c->watched = false;
}

/* The client is gone (hung up, stalled, or the daemon stops). */
static void set_gone(struct ctl_conn *c)
{
	unwatch(c);
	pthread_mutex_lock(&c->lock);
	c->gone = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static void on_idle(void *arg)
{
	struct ctl_conn *c = arg;

	c->timer = 0;
	if (c->running)
		return;
	bsd_log("control: dropped a client that sent no command in %d s",
		CTL_IDLE_MS / 1000);
	conn_free(c);
}

static void on_stall(void *arg)
{
	struct ctl_conn *c = arg;

	c->timer = 0;
	bsd_log("control: dropped a client that read nothing of its reply "
		"in %d s", CTL_STALL_MS / 1000);
	set_gone(c);
	if (!c->running)
		conn_free(c);
}

/* Join argv for the log, bounded. */
static void argv_line(int argc, char **argv, char *buf, size_t size)
{
	size_t off = 0;
	int i;

	buf[0] = '\0';
	for (i = 0; i < argc && off + 1 < size; i++) {
		int n = snprintf(buf + off, size - off, "%s%s", i ? " " : "",
				 argv[i]);
		if (n < 0)
			break;
		off += (size_t)n;
	}
}

/* ---- the reply buffer ---------------------------------------------------- */

/*
 * Under c->lock: make room for @need more bytes, up to @limit buffered
 * (0: no limit). False when there is none now.
 */
static bool buf_room(struct ctl_conn *c, size_t need, size_t limit)
{
	size_t used = c->out_len - c->out_off, cap;
	uint8_t *p;

	if (limit && used + need > limit)
		return false;
	if (c->out_off) {
		memmove(c->out, c->out + c->out_off, used);
		c->out_len = used;
		c->out_off = 0;
	}
	if (used + need <= c->out_cap)
		return true;
	cap = c->out_cap ? c->out_cap : 4096;
	while (cap < used + need)
		cap *= 2;
	if (limit && cap > limit)
		cap = limit;
	p = realloc(c->out, cap);
	if (!p)
		return false;
	c->out = p;
	c->out_cap = cap;
	return true;
}

/* Under c->lock, with room: append one frame. */
static void buf_frame(struct ctl_conn *c, int kind, const void *data,
		      uint32_t len)
{
	bs_ctl_frame_hdr(c->out + c->out_len, kind, len);
	memcpy(c->out + c->out_len + BS_CTL_FRAME_HDR, data, len);
	c->out_len += BS_CTL_FRAME_HDR + len;
}

static void conn_write(struct ctl_conn *c);

/* On the loop: the control thread put bytes in the buffer. */
static void on_kick(void *arg)
{
	struct ctl_conn *c = arg;

	pthread_mutex_lock(&c->lock);
	c->kicked = false;
	pthread_mutex_unlock(&c->lock);
	if (!c->gone)
		conn_write(c);
}

/* Remember the first line of the error stream for the log. */
static void note_err(struct ctl_conn *c, const char *buf, size_t size)
{
	size_t have = strlen(c->first_err), n;

	if (have + 1 >= sizeof(c->first_err) ||
	    (have && strchr(c->first_err, '\n')))
		return;
	n = size < sizeof(c->first_err) - 1 - have ? size :
	    sizeof(c->first_err) - 1 - have;
	memcpy(c->first_err + have, buf, n);
	c->first_err[have + n] = '\0';
}

/*
 * Frame one piece of a write of the command's output (@kind 'o') or error
 * stream ('e'): on the control thread it waits for room; on the loop's
 * thread (a quick command) the buffer grows instead. Returns the bytes
 * taken (at most BS_CTL_MAX_FRAME), or -1 with errno EPIPE once the
 * client is gone.
 */
static ssize_t stream_piece(struct ctl_conn *c, int kind, const char *buf,
			    size_t size, bool on_loop)
{
	size_t n = size < BS_CTL_MAX_FRAME ? size : BS_CTL_MAX_FRAME;
	bool post = false;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		size_t used = c->out_len - c->out_off;

		if (c->gone) {
			pthread_mutex_unlock(&c->lock);
			errno = EPIPE;
			return -1;
		}
		if (buf_room(c, BS_CTL_FRAME_HDR + n,
			     on_loop ? 0 : CTL_STREAM_MAX))
			break;
		if (on_loop) {
			pthread_mutex_unlock(&c->lock);
			errno = ENOMEM;
			return -1;
		}
		/* a smaller piece may fit now */
		if (n > 4096 && used + BS_CTL_FRAME_HDR + 4096 <=
		    CTL_STREAM_MAX) {
			n = CTL_STREAM_MAX - used - BS_CTL_FRAME_HDR;
			continue;
		}
		pthread_cond_wait(&c->cond, &c->lock);
	}
	buf_frame(c, kind, buf, (uint32_t)n);
	if (!on_loop && !c->kicked) {
		c->kicked = true;
		post = true;
	}
	pthread_mutex_unlock(&c->lock);
	/*
	 * Posts run in order, all before the job's completion (posted by
	 * the pool after run() returns): the connection outlives them.
	 */
	while (post && bs_loop_post(c->ctl->d->loop, on_kick, c) == -ENOMEM)
		usleep(1000);
	return (ssize_t)n;
}

/* A cookie write must take everything (stdio does not retry a short one). */
static ssize_t stream_write(struct ctl_conn *c, int kind, const char *buf,
			    size_t size)
{
	bool on_loop = bs_loop_is_current(c->ctl->d->loop);
	size_t done = 0;

	if (kind == BS_CTL_ERR) {
		pthread_mutex_lock(&c->lock);
		note_err(c, buf, size);
		pthread_mutex_unlock(&c->lock);
	}
	while (done < size) {
		ssize_t n = stream_piece(c, kind, buf + done, size - done,
					 on_loop);

		if (n < 0)
			return done ? (ssize_t)done : -1;
		done += (size_t)n;
	}
	return (ssize_t)size;
}

static ssize_t out_write(void *cookie, const char *buf, size_t size)
{
	return stream_write(cookie, BS_CTL_OUT, buf, size);
}

static ssize_t err_write(void *cookie, const char *buf, size_t size)
{
	return stream_write(cookie, BS_CTL_ERR, buf, size);
}

/* ---- sending ------------------------------------------------------------- */

static void conn_write(struct ctl_conn *c)
{
	struct bs_loop *loop = c->ctl->d->loop;
	bool sent = false, fail = false, empty, finished;

	pthread_mutex_lock(&c->lock);
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off,
				 c->out_len - c->out_off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n < 0) {
			fail = true;
			break;
		}
		c->out_off += (size_t)n;
		sent = true;
	}
	if (sent)
		pthread_cond_broadcast(&c->cond);	/* room */
	empty = c->out_off == c->out_len;
	finished = c->finished;
	pthread_mutex_unlock(&c->lock);

	if (fail) {
		set_gone(c);
		if (!c->running)
			conn_free(c);
		return;
	}
	if (empty && finished) {
		conn_free(c);	/* all said */
		return;
	}
	/* a client that reads nothing for CTL_STALL_MS is dropped */
	if (sent || empty) {
		if (c->timer > 0)
			bs_loop_cancel_timer(loop, c->timer);
		c->timer = 0;
	}
	if (!empty && c->timer <= 0) {
		c->timer = bs_loop_add_timer(loop, CTL_STALL_MS, on_stall, c);
		if (c->timer < 0)
			c->timer = 0;
	}
	if (c->watched)
		bs_loop_mod_fd(loop, c->fd, empty ? 0 : EPOLLOUT);
}

/* Queue the exit frame; the connection closes once it is sent. */
static void finish(struct ctl_conn *c, int rc)
{
	uint8_t code[4] = { (uint8_t)((uint32_t)rc >> 24),
			    (uint8_t)((uint32_t)rc >> 16),
			    (uint8_t)((uint32_t)rc >> 8), (uint8_t)rc };
	bool ok;

	pthread_mutex_lock(&c->lock);
	ok = buf_room(c, BS_CTL_FRAME_HDR + sizeof(code), 0);
	if (ok) {
		buf_frame(c, BS_CTL_EXIT, code, sizeof(code));
		c->finished = true;
	}
	pthread_mutex_unlock(&c->lock);
	c->replying = true;
	if (!ok || c->gone) {
		conn_free(c);	/* nobody to tell, or no memory to tell it */
		return;
	}
	conn_write(c);
}

/* The reply's magic, before any frame; false when out of memory. */
static bool begin_reply(struct ctl_conn *c)
{
	bool ok;

	pthread_mutex_lock(&c->lock);
	ok = buf_room(c, BS_CTL_REPLY_MAGIC, 0);
	if (ok) {
		memcpy(c->out + c->out_len, bs_ctl_reply_magic,
		       BS_CTL_REPLY_MAGIC);
		c->out_len += BS_CTL_REPLY_MAGIC;
	}
	pthread_mutex_unlock(&c->lock);
	c->replying = true;
	return ok;
}

/* Send one error line and exit code @rc without running anything. */
static void reply_error(struct ctl_conn *c, int rc, const char *msg,
			size_t len)
{
	bool ok;

	pthread_mutex_lock(&c->lock);
	ok = buf_room(c, BS_CTL_FRAME_HDR + len, 0);
	if (ok)
		buf_frame(c, BS_CTL_ERR, msg, (uint32_t)len);
	pthread_mutex_unlock(&c->lock);
	if (!ok) {
		conn_free(c);
		return;
	}
	finish(c, rc);
}

/* ---- running ------------------------------------------------------------- */

static void run_pending(struct ctl_server *ctl);

static void log_done(struct ctl_conn *c)
{
	char line[512];

	argv_line(c->argc, c->argv, line, sizeof(line));
	if (c->rc)
		bsd_log("control: blkstack %s: exit %d: %.*s", line, c->rc,
			(int)strcspn(c->first_err, "\n"), c->first_err);
	else
		bsd_log("control: blkstack %s", line);
	free(c->argv);
	c->argv = NULL;
}

/* The command's streams: framed into the connection's buffer. */
static int open_streams(struct ctl_conn *c, struct bs_cmd_env *env)
{
	cookie_io_functions_t out_fns = { .write = out_write };
	cookie_io_functions_t err_fns = { .write = err_write };

	env->out = fopencookie(c, "w", out_fns);
	env->err = fopencookie(c, "w", err_fns);
	if (!env->out || !env->err) {
		if (env->out)
			fclose(env->out);
		if (env->err)
			fclose(env->err);
		return -ENOMEM;
	}
	/* whole frames, not one per byte; flushed at the command's end */
	setvbuf(env->out, NULL, _IOFBF, BS_CTL_MAX_FRAME);
	setvbuf(env->err, NULL, _IOLBF, 4096);
	return 0;
}

static int run_cmd(struct ctl_conn *c)
{
	struct bs_cmd_env env = {
		.ctx = c->ctl->d->ctx,
		.in_daemon = true,
		.exports = c->ctl->d->set,
	};
	int rc;

	if (open_streams(c, &env))
		return -ENOMEM;
	bs_error_clear();
	rc = bs_cmd_run(&env, c->argc, c->argv);
	fclose(env.out);	/* the last bytes go out (or fail: gone) */
	fclose(env.err);
	return rc;
}

/* On the control thread. */
static int job_run(struct bs_job *job)
{
	struct ctl_conn *c = (struct ctl_conn *)((char *)job -
						 offsetof(struct ctl_conn, job));

	c->rc = run_cmd(c);
	return 0;
}

/* A command returned c->rc (< 0: it could not run): log it and answer. */
static void command_ended(struct ctl_conn *c)
{
	if (c->rc < 0) {
		static const char msg[] = "blkstackd: out of memory\n";

		c->rc = 1;
		snprintf(c->first_err, sizeof(c->first_err), "%s", msg);
		log_done(c);
		reply_error(c, 1, msg, sizeof(msg) - 1);
		return;
	}
	log_done(c);
	finish(c, c->rc);	/* nobody to tell when gone: it ran */
}

/* Back on the loop: the threaded command ended. */
static void job_done(struct bs_job *job)
{
	struct ctl_conn *c = (struct ctl_conn *)((char *)job -
						 offsetof(struct ctl_conn, job));
	struct ctl_server *ctl = c->ctl;

	c->running = false;
	ctl->busy = false;
	command_ended(c);
	run_pending(ctl);
}

static void start_one(struct ctl_conn *c)
{
	struct ctl_server *ctl = c->ctl;
	const struct bs_cmd *cmd = c->argc ? bs_cmd_find(c->argv[0]) : NULL;

	if (!begin_reply(c)) {
		bsd_log("control: dropped a client: out of memory");
		conn_free(c);
		return;
	}
	c->running = true;
	if (cmd && cmd->threaded) {
		if (!ctl->thread && bs_workers_new(ctl->d->loop, 1, 1,
						   &ctl->thread))
			ctl->thread = NULL;
		if (ctl->thread) {
			ctl->busy = true;
			c->job.run = job_run;
			c->job.done = job_done;
			bs_workers_submit(ctl->thread, &c->job);
			return;
		}
		bsd_log("control: no control thread (%s): running on the loop",
			bs_last_error());
	}
	/* quick: on the loop, the output buffered whole */
	ctl->busy = true;
	c->rc = run_cmd(c);
	ctl->busy = false;
	c->running = false;
	command_ended(c);
}

/* Start queued commands, one at a time, in arrival order. */
static void run_pending(struct ctl_server *ctl)
{
	struct ctl_conn *c;

	while (!ctl->busy && !ctl->stopping) {
		for (c = ctl->conns; c; c = c->next)
			if (c->argv && !c->running && !c->replying)
				break;
		if (!c)
			break;
		start_one(c);
	}
}

/* ---- reading ------------------------------------------------------------- */

static void conn_read(struct ctl_conn *c)
{
	int err;

	for (;;) {
		size_t cap = BS_CTL_HDR + BS_CTL_MAX_REQUEST;
		ssize_t n;

		if (c->in_len == cap) {
			err = -E2BIG;
			goto bad;
		}
		n = recv(c->fd, c->in + c->in_len, cap - c->in_len,
			 MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			conn_free(c);	/* gone before asking anything */
			return;
		}
		c->in_len += (size_t)n;
		err = bs_ctl_parse_request(c->in, c->in_len, &c->argc,
					   &c->argv);
		if (err == -EAGAIN)
			continue;
		if (err)
			goto bad;
		if (c->timer > 0)
			bs_loop_cancel_timer(c->ctl->d->loop, c->timer);
		c->timer = 0;
		free(c->in);	/* no more input: the reply is all that is left */
		c->in = NULL;
		bs_loop_mod_fd(c->ctl->d->loop, c->fd, 0);
		run_pending(c->ctl);
		return;
	}
bad:
	{
		char msg[160];
		int len = snprintf(msg, sizeof(msg), "blkstackd: bad control "
				   "request: %s\n", err == -E2BIG ?
				   "too large" : "malformed");
		bsd_log("control: %.*s", len - 1, msg);
		if (c->timer > 0)
			bs_loop_cancel_timer(c->ctl->d->loop, c->timer);
		c->timer = 0;
		if (!begin_reply(c)) {
			conn_free(c);
			return;
		}
		reply_error(c, 2, msg, (size_t)len);
	}
}

static void on_conn(void *arg, uint32_t events)
{
	struct ctl_conn *c = arg;

	if (events & (EPOLLERR | EPOLLHUP) &&
	    (c->argv || c->replying || !(events & EPOLLIN))) {
		/* hung up (HUP cannot be masked): drop what it asked for;
		 * a command running still ends, its output goes nowhere */
		set_gone(c);
		if (!c->running)
			conn_free(c);
		return;
	}
	if (c->replying) {
		if (events & EPOLLOUT)
			conn_write(c);
		return;
	}
	if (c->argv)
		return;		/* queued behind a running command */
	conn_read(c);
}

/* A client connected (the listener paused itself on EMFILE and the like). */
static void on_accept(void *arg, int fd, const char *peer)
{
	struct ctl_server *ctl = arg;
	struct ctl_conn *c, **pp;

	(void)peer;
	if (ctl->nconns >= CTL_MAX_CONNS) {
		bsd_log("control: refused a client: %u already connected",
			ctl->nconns);
		close(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (c)
		c->in = malloc(BS_CTL_HDR + BS_CTL_MAX_REQUEST);
	if (!c || !c->in || bs_loop_add_fd(ctl->d->loop, fd, EPOLLIN, on_conn,
					   c)) {
		if (c)
			free(c->in);
		free(c);
		close(fd);
		bsd_log("control: dropped a client: out of memory");
		return;
	}
	c->ctl = ctl;
	c->fd = fd;
	c->watched = true;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	c->timer = bs_loop_add_timer(ctl->d->loop, CTL_IDLE_MS, on_idle, c);
	/* at the tail: queued commands run in arrival order */
	for (pp = &ctl->conns; *pp; pp = &(*pp)->next)
		;
	*pp = c;
	ctl->nconns++;
}

unsigned ctl_pending(const struct ctl_server *ctl)
{
	const struct ctl_conn *c;
	unsigned n = 0;

	for (c = ctl ? ctl->conns : NULL; c; c = c->next)
		if (c->argv || c->running || c->replying)
			n++;
	return n;
}

static void ctl_log(void *arg, const char *msg)
{
	(void)arg;
	bsd_log("%s", msg);
}

int ctl_start(struct bsd *d, const char *path)
{
	struct ctl_server *ctl;
	struct bs_net_listen_cfg cfg = {
		.addr = path,
		.name = "control",
		.is_unix = true,
		.backlog = 16,
		.accept = on_accept,
		.log = ctl_log,
	};
	int err;

	/* commands change devices: the owner only, from the start */
	bs_net_limits_default(&cfg.limits);
	cfg.limits.socket_mode = 0600;
	ctl = calloc(1, sizeof(*ctl));
	if (!ctl)
		return -ENOMEM;
	ctl->d = d;
	cfg.owner = ctl;
	err = bs_net_listen(d->loop, &cfg, &ctl->nl);
	switch (err) {
	case 0:
		break;
	case -ENAMETOOLONG:
		err = bs_error(err, "control socket %s: path too long for a "
			       "UNIX socket", path);
		break;
	case -EEXIST:
		err = bs_error(err, "control socket %s: exists and is not a "
			       "socket", path);
		break;
	case -EADDRINUSE:
		err = bs_error(err, "control socket %s: in use by another "
			       "running blkstackd", path);
		break;
	default:
		err = bs_error(err, "control socket %s: %s", path,
			       strerror(-err));
	}
	if (err) {
		free(ctl);
		return err;
	}
	d->ctl = ctl;
	return 0;
}

void ctl_stop(struct ctl_server *ctl)
{
	/* no new clients; the socket file goes */
	if (ctl && ctl->nl)
		bs_net_listener_stop(ctl->nl);
}

void ctl_free(struct ctl_server *ctl)
{
	struct ctl_conn *c;

	if (!ctl)
		return;
	ctl_stop(ctl);
	ctl->stopping = true;
	/* a command still running ends first: its writes fail from now on,
	 * its I/O is served by the loop that bs_workers_free() runs */
	for (c = ctl->conns; c; c = c->next)
		if (c->running)
			set_gone(c);
	bs_workers_free(ctl->thread);
	ctl->thread = NULL;
	while (ctl->conns)
		conn_free(ctl->conns);
	bs_net_listener_free(ctl->nl);
	free(ctl);
}
