/* SPDX-License-Identifier: MIT */
/*
 * The NFS client's connection: ONC RPC (RFC 5531) calls over TCP with
 * record marking, AUTH_SYS credentials, one call at a time. A reply is
 * matched by its xid; replies to older xids (a call that timed out) are
 * skipped. A call has one deadline, timeout_secs from its start, for
 * sending it and for every byte received until its reply is whole:
 * a peer that keeps sending replies to other xids, or trickles bytes,
 * cannot hold it longer.
 */
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <blkstack/bdev.h>

#include "nfsclient/internal.h"

int nfsc_rpc_open(struct bs_nfs *nfs, const char *host, uint16_t port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	struct timeval tv = { .tv_sec = nfs->timeout_secs };
	char portstr[8];
	int fd = -1, rc, one = 1, err = -ECONNREFUSED;

	snprintf(portstr, sizeof(portstr), "%u", port);
	rc = getaddrinfo(host, portstr, &hints, &res);
	if (rc)
		return bs_error(-EHOSTUNREACH, "nfs %s: %s", nfs->peer,
				gai_strerror(rc));
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
			    ai->ai_protocol);
		if (fd < 0) {
			err = -errno;
			continue;
		}
		/* bounds connect(); calls wait by poll(), to their deadline */
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		err = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return bs_error(err, "nfs %s: connect: %s", nfs->peer,
				strerror(-err));
	nfs->fd = fd;
	return 0;
}

void nfsc_rpc_close(struct bs_nfs *nfs)
{
	if (nfs->fd >= 0)
		close(nfs->fd);
	nfs->fd = -1;
}

/* One call in progress: its deadline and what it met on the way. */
struct call {
	int64_t deadline;	/* CLOCK_MONOTONIC ms */
	bool sent;		/* the whole request went out */
	unsigned skipped;	/* replies to other xids */
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* the call's deadline passed: -ETIMEDOUT, saying where it was */
static int late(struct bs_nfs *nfs, const struct call *k)
{
	if (!k->sent)
		return bs_error(-ETIMEDOUT, "nfs %s: the call could not be "
				"sent within %u s", nfs->peer,
				nfs->timeout_secs);
	if (k->skipped)
		return bs_error(-ETIMEDOUT, "nfs %s: no reply within %u s "
				"(%u replies to other calls skipped)",
				nfs->peer, nfs->timeout_secs, k->skipped);
	return bs_error(-ETIMEDOUT, "nfs %s: no reply within %u s",
			nfs->peer, nfs->timeout_secs);
}

/* until the socket is ready for @events: 0, or late(), or -errno */
static int wait_fd(struct bs_nfs *nfs, const struct call *k, short events)
{
	struct pollfd pfd = { .fd = nfs->fd, .events = events };
	int64_t left;
	int r;

	for (;;) {
		left = k->deadline - now_ms();
		if (left <= 0)
			return late(nfs, k);
		r = poll(&pfd, 1, left > INT_MAX ? INT_MAX : (int)left);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return bs_error(-errno, "nfs %s: poll: %s", nfs->peer,
					strerror(errno));
	}
}

static int send_all(struct bs_nfs *nfs, const struct call *k,
		    const uint8_t *p, size_t len)
{
	int err;

	while (len) {
		ssize_t n;

		if ((err = wait_fd(nfs, k, POLLOUT)))
			return err;
		n = send(nfs->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return bs_error(-errno, "nfs %s: send: %s", nfs->peer,
					strerror(errno));
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int recv_all(struct bs_nfs *nfs, const struct call *k, uint8_t *p,
		    size_t len)
{
	int err;

	while (len) {
		ssize_t n;

		if ((err = wait_fd(nfs, k, POLLIN)))
			return err;
		n = recv(nfs->fd, p, len, MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n == 0)
			return bs_error(-ECONNRESET, "nfs %s: the server "
					"closed the connection", nfs->peer);
		if (n < 0)
			return bs_error(-errno, "nfs %s: receive: %s",
					nfs->peer, strerror(errno));
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* One record (all its fragments) into nfs->resp. */
static int recv_record(struct bs_nfs *nfs, const struct call *k)
{
	uint8_t mark[4];
	bool last = false;
	int err;

	nfs->resp_len = 0;
	while (!last) {
		uint32_t m, flen;

		if ((err = recv_all(nfs, k, mark, 4)))
			return err;
		m = xdr_be32(mark);
		last = m & RPC_LAST_FRAG;
		flen = m & RPC_FRAG_LEN;
		if (flen > NFSC_BUF_SIZE - nfs->resp_len)
			return bs_error(-EMSGSIZE, "nfs %s: a reply of more "
					"than %u bytes", nfs->peer,
					NFSC_BUF_SIZE);
		if ((err = recv_all(nfs, k, nfs->resp + nfs->resp_len,
				    flen)))
			return err;
		nfs->resp_len += flen;
	}
	return 0;
}

void nfsc_rpc_call_header(struct bs_nfs *nfs, struct xdr_enc *e,
			  uint32_t proc)
{
	size_t body, start;

	xdr_put_u32(e, 0);		/* record mark, set when sent */
	xdr_put_u32(e, 0);		/* xid, set when sent */
	xdr_put_enum(e, RPC_CALL);
	xdr_put_u32(e, RPC_VERSION);
	xdr_put_u32(e, NFS4_PROGRAM);
	xdr_put_u32(e, NFS4_VERSION);
	xdr_put_u32(e, proc);
	/* credential: AUTH_SYS */
	xdr_put_enum(e, RPC_AUTH_SYS);
	body = xdr_enc_len(e);
	xdr_put_u32(e, 0);		/* body length, patched */
	start = xdr_enc_len(e);
	xdr_put_u32(e, (uint32_t)time(NULL));
	xdr_put_cstring(e, nfs->machine, RPC_AUTHSYS_NAME_MAX);
	xdr_put_u32(e, nfs->uid);
	xdr_put_u32(e, nfs->gid);
	xdr_put_u32(e, 0);		/* no more groups */
	xdr_patch_u32(e, body, (uint32_t)(xdr_enc_len(e) - start));
	/* verifier: AUTH_NONE */
	xdr_put_enum(e, RPC_AUTH_NONE);
	xdr_put_u32(e, 0);
}

static int reply_header(struct bs_nfs *nfs, struct xdr_dec *d)
{
	uint32_t stat, len;

	if (xdr_get_enum(d) != RPC_REPLY)
		return bs_error(-EBADMSG, "nfs %s: not an RPC reply",
				nfs->peer);
	stat = xdr_get_enum(d);
	if (xdr_dec_err(d))
		return bs_error(-EBADMSG, "nfs %s: short RPC reply", nfs->peer);
	if (stat == RPC_MSG_DENIED) {
		uint32_t why = xdr_get_enum(d);

		if (why == RPC_AUTH_ERROR)
			return bs_error(-EACCES, "nfs %s: RPC call refused: "
					"authentication error %u", nfs->peer,
					xdr_get_enum(d));
		return bs_error(-EPROTONOSUPPORT, "nfs %s: RPC version "
				"refused", nfs->peer);
	}
	xdr_get_enum(d);		/* verifier flavor */
	xdr_get_opaque_ref(d, &len, RPC_AUTH_MAX);
	stat = xdr_get_enum(d);
	if (xdr_dec_err(d))
		return bs_error(-EBADMSG, "nfs %s: short RPC reply", nfs->peer);
	switch (stat) {
	case RPC_SUCCESS:
		return 0;
	case RPC_PROG_UNAVAIL:
		return bs_error(-EPROTONOSUPPORT, "nfs %s: no NFS service",
				nfs->peer);
	case RPC_PROG_MISMATCH: {
		uint32_t lo = xdr_get_u32(d), hi = xdr_get_u32(d);

		return bs_error(-EPROTONOSUPPORT, "nfs %s: NFS version 4 "
				"not served (versions %u to %u)", nfs->peer,
				lo, hi);
	}
	case RPC_GARBAGE_ARGS:
		return bs_error(-EINVAL, "nfs %s: the server could not "
				"decode the call (GARBAGE_ARGS)", nfs->peer);
	}
	return bs_error(-EIO, "nfs %s: RPC call failed (accept status %u)",
			nfs->peer, stat);
}

int nfsc_rpc_call(struct bs_nfs *nfs, size_t len, struct xdr_dec *d)
{
	uint32_t xid = ++nfs->xid;
	struct call k = {
		.deadline = now_ms() + (int64_t)nfs->timeout_secs * 1000,
	};
	int err;

	if (nfs->fd < 0)
		return bs_error(-ENOTCONN, "nfs %s: not connected", nfs->peer);
	xdr_set_be32(nfs->req, RPC_LAST_FRAG | (uint32_t)(len - 4));
	xdr_set_be32(nfs->req + 4, xid);
	if ((err = send_all(nfs, &k, nfs->req, len)))
		goto broken;
	k.sent = true;
	for (;;) {
		if ((err = recv_record(nfs, &k)))
			goto broken;
		xdr_dec_init(d, nfs->resp, nfs->resp_len);
		if (xdr_get_u32(d) == xid)
			break;
		/* a late reply to an earlier call: skipped, within the
		 * same deadline */
		k.skipped++;
	}
	return reply_header(nfs, d);
broken:
	/* the stream is out of step: no later call can use it */
	nfsc_rpc_close(nfs);
	return err;
}
