/* SPDX-License-Identifier: MIT */
/*
 * The control socket: `blkstack -s SOCKET COMMAND ...` runs COMMAND from
 * the shared command table (lib/cmd/) inside the daemon, on its live
 * devices, and gets the output and exit code back (wire format in
 * include/blkstack/control.h). One command runs at a time, on the loop
 * thread; while it waits for its I/O the loop goes on serving clients, and
 * further control requests queue behind it.
 */
#include <errno.h>
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

#include "daemon.h"

#define CTL_MAX_CONNS 16
/* A client that sends no complete request in this time is dropped. */
#define CTL_IDLE_MS 30000

struct ctl_conn {
	struct ctl_server *ctl;
	int fd;
	uint8_t *in;
	size_t in_len;
	int argc;
	char **argv;		/* parsed request, waiting or running */
	bool running;
	bool gone;		/* the client hung up: no reply to send */
	uint8_t *out;		/* the reply being sent */
	size_t out_len, out_off;
	int timer;
	struct ctl_conn *next;
};

struct ctl_server {
	struct bsd *d;
	/* listening and accepting: the network server's (lib/export/net/) */
	struct bs_net_listener *nl;
	struct ctl_conn *conns;
	unsigned nconns;
	bool busy;
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
	if (!c->gone)
		bs_loop_del_fd(ctl->d->loop, c->fd);
	close(c->fd);
	free(c->in);
	free(c->argv);
	free(c->out);
	free(c);
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

static int reply(struct ctl_conn *c, int rc, const char *out, size_t outlen,
		 const char *err, size_t errlen)
{
	int e = bs_ctl_encode_reply(rc, out, outlen, err, errlen, &c->out,
				    &c->out_len);

	if (e)
		return e;
	c->out_off = 0;
	return bs_loop_mod_fd(c->ctl->d->loop, c->fd, EPOLLOUT);
}

static void run_one(struct ctl_conn *c)
{
	struct ctl_server *ctl = c->ctl;
	struct bs_cmd_env env = {
		.ctx = ctl->d->ctx,
		.in_daemon = true,
	};
	char *obuf = NULL, *ebuf = NULL, line[512];
	size_t olen = 0, elen = 0;
	int rc;

	env.out = open_memstream(&obuf, &olen);
	env.err = open_memstream(&ebuf, &elen);
	if (!env.out || !env.err) {
		if (env.out)
			fclose(env.out);
		if (env.err)
			fclose(env.err);
		free(obuf);
		free(ebuf);
		static const char msg[] = "blkstackd: out of memory\n";
		if (reply(c, 1, NULL, 0, msg, sizeof(msg) - 1))
			conn_free(c);
		return;
	}
	c->running = true;
	bs_error_clear();
	rc = bs_cmd_run(&env, c->argc, c->argv);
	c->running = false;
	fclose(env.out);
	fclose(env.err);
	argv_line(c->argc, c->argv, line, sizeof(line));
	if (rc)
		bsd_log("control: blkstack %s: exit %d: %.*s", line, rc,
			(int)strcspn(ebuf ? ebuf : "", "\n"), ebuf ? ebuf : "");
	else
		bsd_log("control: blkstack %s", line);
	free(c->argv);
	c->argv = NULL;
	if (c->gone)
		conn_free(c);	/* nobody to tell: the command still ran */
	else if (reply(c, rc, obuf, olen, ebuf, elen))
		conn_free(c);
	free(obuf);
	free(ebuf);
}

/* Run queued commands, one at a time (a command may run the loop). */
static void run_pending(struct ctl_server *ctl)
{
	struct ctl_conn *c;

	if (ctl->busy)
		return;
	ctl->busy = true;
	for (;;) {
		for (c = ctl->conns; c; c = c->next)
			if (c->argv && !c->running && !c->out)
				break;
		if (!c)
			break;
		run_one(c);
	}
	ctl->busy = false;
}

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
		/* no more input: the reply is all that is left */
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
		if (reply(c, 2, NULL, 0, msg, (size_t)len))
			conn_free(c);
	}
}

static void conn_write(struct ctl_conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off,
				 c->out_len - c->out_off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n < 0)
			break;
		c->out_off += (size_t)n;
	}
	conn_free(c);
}

static void on_conn(void *arg, uint32_t events)
{
	struct ctl_conn *c = arg;

	if ((c->running || c->argv) && (events & (EPOLLERR | EPOLLHUP))) {
		/* hung up while its command runs or waits: stop watching
		 * (HUP cannot be masked) and drop the reply */
		bs_loop_del_fd(c->ctl->d->loop, c->fd);
		c->gone = true;
		if (!c->running)
			conn_free(c);	/* queued only: never run it */
		return;
	}
	if (c->running)
		return;		/* its command answers when done */
	if (c->out) {
		conn_write(c);
		return;
	}
	if (c->argv)
		return;		/* queued behind a running command */
	if (events & (EPOLLERR | EPOLLHUP) && !(events & EPOLLIN)) {
		conn_free(c);
		return;
	}
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
		if (c->argv || c->running || c->out)
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
	if (!ctl)
		return;
	ctl_stop(ctl);
	while (ctl->conns)
		conn_free(ctl->conns);
	bs_net_listener_free(ctl->nl);
	free(ctl);
}
