/* SPDX-License-Identifier: MIT */
/*
 * One NVMe/TCP queue of the nvmf host driver (lib/drivers/nvmf_queue.c)
 * against a scripted controller on a loopback socket: the ICReq it sends,
 * a read completed by a C2HData with SUCCESS, and malformed or hostile
 * PDUs (data outside the command, an unknown PDU type, a short MAXH2CDATA,
 * a C2HTermReq) that must lose the queue with a reason and fail its
 * commands back, never crash. R2T: answered in parts; a repeated,
 * overlapping or early second R2T loses the queue; the H2CData waiting
 * for a target that reads nothing stays bounded. Success only with all
 * the data (in order, SUCCESS with LAST_PDU), and command IDs with a
 * generation, so a repeated completion never ends the slot's next one.
 * ICResp CPDA bounds, digest flags as agreed, a PDU length bound from the
 * largest read.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/crc32c.h"
#include "drivers/nvmf.h"
#include "helpers/th.h"

struct st {
	int events, last_err;
	int done, done_err;
	uint16_t done_status;
};

static void ev(void *owner, struct nvq *q, int err)
{
	struct st *s = owner;

	(void)q;
	s->events++;
	s->last_err = err;
}

static void cmd_done(void *arg, const uint8_t *cqe, int err)
{
	struct st *s = arg;

	s->done++;
	s->done_err = err;
	s->done_status = cqe ? (uint16_t)(get16(cqe + 14) >> 1) : 0xffff;
}

struct rig {
	struct bs_loop *loop;
	struct nvq q;
	struct st st;
	int lfd, cfd;
};

/* Socket buffers of a few KiB on both ends (set before connecting). */
static bool small_bufs;

static void spin(struct rig *r, int *flag, int want)
{
	int i;

	for (i = 0; i < 200 && *flag < want; i++)
		bs_loop_run_once(r->loop, 10);
	assert_true(*flag >= want);
}

/*
 * Up to ICReq read by the "controller" (asking for digests @ask: bit 0
 * header, bit 1 data); then answer @maxh2c, @cpda and digests @dgst.
 */
static void rig_up_ic(struct rig *r, uint32_t maxh2c, uint8_t cpda,
		      uint8_t ask, uint8_t dgst)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	uint8_t ic[128] = { 0 }, resp[128] = { 0 };
	char port[16];
	ssize_t n = 0;
	int i;

	memset(r, 0, sizeof(*r));
	assert_int_equal(bs_loop_new(&r->loop), 0);
	r->lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (small_bufs) {
		int sz = 4096;

		setsockopt(r->lfd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	}
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(r->lfd, (void *)&a, sizeof(a)), 0);
	assert_int_equal(listen(r->lfd, 1), 0);
	getsockname(r->lfd, (void *)&a, &al);
	snprintf(port, sizeof(port), "%u", ntohs(a.sin_port));
	assert_int_equal(nvq_open(&r->q, r->loop, "127.0.0.1", port, 1, 4,
				  ask & 1, ask & 2, ev, &r->st), 0);
	if (small_bufs) {
		int sz = 4096;

		setsockopt(r->q.fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	}
	r->cfd = accept(r->lfd, NULL, NULL);
	assert_true(r->cfd >= 0);
	for (i = 0; i < 200 && n < 128; i++) {
		ssize_t k;

		bs_loop_run_once(r->loop, 10);
		k = recv(r->cfd, ic + n, sizeof(ic) - (size_t)n, MSG_DONTWAIT);
		if (k > 0)
			n += k;
	}
	assert_int_equal(n, 128);
	assert_int_equal(ic[0], 0x00);		/* ICReq */
	assert_int_equal(ic[2], 128);
	assert_int_equal(get32(ic + 4), 128);
	resp[0] = 0x01;
	resp[2] = 128;
	put32(resp + 4, 128);
	resp[10] = cpda;
	resp[11] = dgst;
	put32(resp + 12, maxh2c);
	assert_int_equal(send(r->cfd, resp, sizeof(resp), 0), 128);
	spin(r, &r->st.events, 1);
}

static void rig_up(struct rig *r, uint32_t maxh2c)
{
	rig_up_ic(r, maxh2c, 0, 0, 0);
}

static void rig_down(struct rig *r)
{
	nvq_close(&r->q, 0);
	close(r->cfd);
	close(r->lfd);
	bs_loop_free(r->loop);
}

static void submit_read(struct rig *r, struct iovec *iov)
{
	uint8_t sqe[64] = { 0 };

	sqe[0] = 0x02;
	assert_int_equal(nvq_submit(&r->q, sqe, NULL, 0, iov, 1,
				    (uint32_t)iov->iov_len, cmd_done, &r->st),
			 0);
}

/* A write of @len bytes from @buf (data by R2T: no in-capsule data). */
static void submit_write(struct rig *r, struct iovec *iov)
{
	uint8_t sqe[64] = { 0 };

	sqe[0] = 0x01;
	assert_int_equal(nvq_submit(&r->q, sqe, iov, 1, NULL, 0,
				    (uint32_t)iov->iov_len, cmd_done, &r->st),
			 0);
}

/* The "controller" reads @n bytes the queue sent, running the loop. */
static void recv_n(struct rig *r, uint8_t *p, size_t n)
{
	size_t got = 0;
	int i;

	for (i = 0; i < 2000 && got < n; i++) {
		ssize_t k;

		bs_loop_run_once(r->loop, 1);
		k = recv(r->cfd, p + got, n - got, MSG_DONTWAIT);
		if (k > 0)
			got += (size_t)k;
	}
	assert_int_equal(got, n);
}

static void send_r2t(struct rig *r, uint16_t cid, uint16_t ttag,
		     uint32_t off, uint32_t len)
{
	uint8_t p[24] = { 0 };

	p[0] = 0x09;
	p[2] = 24;
	put32(p + 4, 24);
	put16(p + 8, cid);
	put16(p + 10, ttag);
	put32(p + 12, off);
	put32(p + 16, len);
	assert_int_equal(send(r->cfd, p, sizeof(p), 0), 24);
}

static void send_rsp(struct rig *r, uint16_t cid, uint16_t status)
{
	uint8_t p[24] = { 0 };

	p[0] = 0x05;
	p[2] = 24;
	put32(p + 4, 24);
	put16(p + 8 + 12, cid);
	put16(p + 8 + 14, (uint16_t)(status << 1));
	assert_int_equal(send(r->cfd, p, sizeof(p), 0), 24);
}

/* A C2HData for cid 0 carrying @len (at most 512) bytes at @off. */
static void send_c2h(struct rig *r, uint32_t off, uint32_t len, uint8_t flags,
		     uint8_t fill)
{
	uint8_t p[24 + 512];

	memset(p, 0, sizeof(p));
	p[0] = 0x07;
	p[1] = flags;
	p[2] = 24;
	p[3] = 24;
	put32(p + 4, 24 + len);
	put16(p + 8, 0);
	put32(p + 12, off);
	put32(p + 16, len);
	memset(p + 24, fill, len);
	assert_int_equal(send(r->cfd, p, 24 + len, 0), (ssize_t)(24 + len));
}

static void read_ok(void **state)
{
	struct rig r;
	uint8_t buf[512];
	struct iovec iov = { buf, sizeof(buf) };

	(void)state;
	rig_up(&r, 65536);
	assert_int_equal(r.st.last_err, 0);
	assert_int_equal(r.q.state, NVQ_READY);
	submit_read(&r, &iov);
	send_c2h(&r, 0, 512, 0x04 | 0x08, 0xab);	/* LAST | SUCCESS */
	spin(&r, &r.st.done, 1);
	assert_int_equal(r.st.done_err, 0);
	assert_int_equal(r.st.done_status, 0);
	assert_int_equal(buf[0], 0xab);
	assert_int_equal(buf[511], 0xab);
	rig_down(&r);
}

static void c2h_out_of_range(void **state)
{
	struct rig r;
	uint8_t buf[512];
	struct iovec iov = { buf, sizeof(buf) };

	(void)state;
	rig_up(&r, 65536);
	submit_read(&r, &iov);
	send_c2h(&r, 256, 512, 0x0c, 0);	/* past the command's data */
	spin(&r, &r.st.done, 1);
	assert_true(r.st.done_err < 0);		/* failed back to the owner */
	assert_int_equal(r.st.events, 2);
	assert_int_equal(r.st.last_err, -EPROTO);
	assert_non_null(strstr(r.q.err, "C2HData"));
	assert_int_equal(r.q.state, NVQ_CLOSED);
	rig_down(&r);
}

static void hostile_pdus(void **state)
{
	static const struct {
		uint8_t type, hlen;
		uint32_t plen;
		const char *why;
		int err;
	} rows[] = {
		{ 0x42, 24, 24, "unexpected PDU type", -EPROTO },
		{ 0x05, 24, 4, "PDU length", -EPROTO },		/* plen < 8 */
		{ 0x05, 200, 24, "hlen", -EPROTO },		/* hlen > plen */
		{ 0x05, 24, 24, "unknown cid", -EPROTO },	/* cid 0 idle */
		{ 0x03, 24, 24, "C2HTermReq", -ECONNRESET },
		{ 0x09, 24, 24, "R2T for unknown cid", -EPROTO },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct rig r;
		uint8_t p[24] = { 0 };

		print_message("%s\n", rows[i].why);
		rig_up(&r, 65536);
		p[0] = rows[i].type;
		p[2] = rows[i].hlen;
		put32(p + 4, rows[i].plen);
		assert_int_equal(send(r.cfd, p, sizeof(p), 0), 24);
		spin(&r, &r.st.events, 2);
		assert_int_equal(r.st.last_err, rows[i].err);
		assert_non_null(strstr(r.q.err, rows[i].why));
		rig_down(&r);
	}
}

/* Two R2Ts, each for the next part of a write, answered in order. */
static void r2t_in_parts(void **state)
{
	struct rig r;
	static uint8_t buf[8192], cmd[72], h2c[24 + 4096];
	struct iovec iov = { buf, sizeof(buf) };
	int part;

	(void)state;
	rig_up(&r, 65536);
	memset(buf, 0x11, 4096);
	memset(buf + 4096, 0x22, 4096);
	submit_write(&r, &iov);
	recv_n(&r, cmd, sizeof(cmd));
	assert_int_equal(cmd[0], 0x04);
	for (part = 0; part < 2; part++) {
		send_r2t(&r, 0, 7, (uint32_t)part * 4096, 4096);
		recv_n(&r, h2c, sizeof(h2c));
		assert_int_equal(h2c[0], 0x06);
		assert_int_equal(h2c[1], 0x04);		/* LAST_PDU */
		assert_int_equal(get16(h2c + 10), 7);
		assert_int_equal(get32(h2c + 12), (uint32_t)part * 4096);
		assert_int_equal(get32(h2c + 16), 4096);
		assert_int_equal(h2c[24], part ? 0x22 : 0x11);
		assert_int_equal(h2c[24 + 4095], part ? 0x22 : 0x11);
	}
	send_rsp(&r, 0, 0);
	spin(&r, &r.st.done, 1);
	assert_int_equal(r.st.done_err, 0);
	assert_int_equal(r.q.state, NVQ_READY);
	rig_down(&r);
}

/*
 * A target repeating one R2T (here a thousand times) once made us copy
 * the data out again for each, without bound: the second one loses the
 * queue now, whether the first was answered or not.
 */
static void r2t_repeated(void **state)
{
	static const struct {
		uint32_t off, len;
		const char *why;
	} rows[] = {
		{ 0, 4096, "R2T for cid 0" },		/* the same again */
		{ 0, 2048, "R2T for cid 0" },		/* overlapping */
		{ 4096, 4096, "R2T for cid 0" },	/* past the data */
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct rig r;
		static uint8_t buf[4096], cmd[72], h2c[24 + 4096];
		struct iovec iov = { buf, sizeof(buf) };
		int k;

		rig_up(&r, 65536);
		submit_write(&r, &iov);
		recv_n(&r, cmd, sizeof(cmd));
		send_r2t(&r, 0, 1, 0, 4096);
		recv_n(&r, h2c, sizeof(h2c));		/* answered once */
		for (k = 0; k < 1000; k++)
			send_r2t(&r, 0, 1, rows[i].off, rows[i].len);
		spin(&r, &r.st.events, 2);
		assert_int_equal(r.st.last_err, -EPROTO);
		assert_non_null(strstr(r.q.err, rows[i].why));
		assert_int_equal(r.st.done, 1);		/* failed back */
		assert_true(r.st.done_err < 0);
		rig_down(&r);
	}
	/* and repeated before the first was answered */
	{
		struct rig r;
		static uint8_t buf[4096], cmd[72];
		struct iovec iov = { buf, sizeof(buf) };
		uint8_t two[48] = { 0 };

		rig_up(&r, 65536);
		submit_write(&r, &iov);
		recv_n(&r, cmd, sizeof(cmd));
		for (i = 0; i < 2; i++) {
			two[24 * i] = 0x09;
			two[24 * i + 2] = 24;
			put32(two + 24 * i + 4, 24);
			put32(two + 24 * i + 16, 4096);
		}
		assert_int_equal(send(r.cfd, two, sizeof(two), 0), 48);
		spin(&r, &r.st.events, 2);
		assert_int_equal(r.st.last_err, -EPROTO);
		assert_non_null(strstr(r.q.err, "R2T for cid 0"));
		rig_down(&r);
	}
}

/*
 * R2Ts for 4 MiB of writes while the target reads nothing: what waits
 * for the socket stays near NVQ_OUT_HIGH (it once held all of it), and
 * all of it goes once the target reads.
 */
static void r2t_output_bounded(void **state)
{
	enum { N = 4, LEN = 1 << 20, PDU = 24 + 65536 };
	struct rig r;
	static uint8_t buf[N][LEN], cmd[N * 72], pdu[PDU];
	struct iovec iov[N];
	size_t total = 0, want = (size_t)N * (LEN / 65536) * PDU;
	int i;

	(void)state;
	small_bufs = true;
	rig_up(&r, 65536);
	small_bufs = false;
	for (i = 0; i < N; i++) {
		memset(buf[i], 0x30 + i, LEN);
		iov[i].iov_base = buf[i];
		iov[i].iov_len = LEN;
		submit_write(&r, &iov[i]);
	}
	recv_n(&r, cmd, sizeof(cmd));
	for (i = 0; i < N; i++)
		send_r2t(&r, (uint16_t)i, (uint16_t)i, 0, LEN);
	for (i = 0; i < 100; i++)
		bs_loop_run_once(r.loop, 1);
	assert_int_equal(r.q.state, NVQ_READY);
	assert_true(r.q.out.len - r.q.out.off <= NVQ_OUT_HIGH + PDU);
	/* now the target reads: every H2CData PDU comes, in order per
	 * command */
	while (total < want) {
		uint32_t off;
		uint16_t cid;

		recv_n(&r, pdu, PDU);
		assert_int_equal(pdu[0], 0x06);
		cid = get16(pdu + 8);
		off = get32(pdu + 12);
		assert_true(cid < N);
		assert_int_equal(get32(pdu + 16), 65536);
		assert_int_equal(pdu[24], 0x30 + cid);
		assert_int_equal(pdu[1], off + 65536 == LEN ? 0x04 : 0);
		total += PDU;
		assert_true(r.q.out.len - r.q.out.off <= NVQ_OUT_HIGH + PDU);
	}
	for (i = 0; i < N; i++)
		send_rsp(&r, (uint16_t)i, 0);
	spin(&r, &r.st.done, N);
	assert_int_equal(r.st.done_err, 0);
	rig_down(&r);
}

/*
 * A read ends in success only with all its data, in order: these once
 * completed it as successful with part (or none) of its buffer filled.
 */
static void read_incomplete(void **state)
{
	static const struct {
		const char *what;
		uint32_t off[2], len[2];
		uint8_t flags[2];
		int npdu;
		bool rsp;
		const char *why;
	} rows[] = {
		{ "half, SUCCESS", { 0 }, { 256 }, { 0x0c }, 1, false,
		  "SUCCESS with 256 of 512" },
		{ "all, SUCCESS without LAST_PDU", { 0 }, { 512 }, { 0x08 }, 1,
		  false, "without LAST_PDU" },
		{ "none, response 0", { 0 }, { 0 }, { 0 }, 0, true,
		  "success with 0 of 512 bytes received" },
		{ "half, response 0", { 0 }, { 256 }, { 0x04 }, 1, true,
		  "success with 256 of 512 bytes received" },
		{ "the same half twice, response 0", { 0, 0 }, { 256, 256 },
		  { 0, 0x04 }, 2, true, "at offset 0, 256 bytes received" },
		{ "second half first", { 256, 0 }, { 256, 256 }, { 0, 0x0c },
		  2, false, "at offset 256, 0 bytes received" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct rig r;
		uint8_t buf[512];
		struct iovec iov = { buf, sizeof(buf) };
		int k;

		print_message("%s\n", rows[i].what);
		rig_up(&r, 65536);
		submit_read(&r, &iov);
		for (k = 0; k < rows[i].npdu; k++)
			send_c2h(&r, rows[i].off[k], rows[i].len[k],
				 rows[i].flags[k], 0xab);
		if (rows[i].rsp)
			send_rsp(&r, 0, 0);
		spin(&r, &r.st.events, 2);
		assert_int_equal(r.st.last_err, -EPROTO);
		assert_non_null(strstr(r.q.err, rows[i].why));
		assert_int_equal(r.st.done, 1);
		assert_true(r.st.done_err < 0);		/* failed back */
		rig_down(&r);
	}
}

/* A write ends in success only once all its data went. */
static void write_success_unsent(void **state)
{
	struct rig r;
	static uint8_t buf[4096], cmd[72];
	struct iovec iov = { buf, sizeof(buf) };

	(void)state;
	rig_up(&r, 65536);
	submit_write(&r, &iov);
	recv_n(&r, cmd, sizeof(cmd));
	send_rsp(&r, 0, 0);		/* no R2T asked, no data came */
	spin(&r, &r.st.events, 2);
	assert_int_equal(r.st.last_err, -EPROTO);
	assert_non_null(strstr(r.q.err, "success with 0 of 4096 bytes sent"));
	assert_true(r.st.done_err < 0);
	rig_down(&r);
}

/*
 * A completion repeated after its command ended: the slot's next command
 * has another cid (a new generation), so the repeat is refused instead
 * of completing, say, a write whose data never went.
 */
static void completion_repeated(void **state)
{
	struct rig r;
	uint8_t rbuf[512];
	static uint8_t wbuf[4096], cmd[72 * 2];
	struct iovec riov = { rbuf, sizeof(rbuf) }, wiov = { wbuf, 4096 };
	uint16_t cid;

	(void)state;
	rig_up(&r, 65536);
	submit_read(&r, &riov);
	send_c2h(&r, 0, 512, 0x0c, 0xab);
	spin(&r, &r.st.done, 1);
	assert_int_equal(r.st.done_err, 0);
	submit_write(&r, &wiov);		/* the same slot, again */
	recv_n(&r, cmd, sizeof(cmd));
	send_rsp(&r, 0, 0);			/* the read's, again */
	spin(&r, &r.st.events, 2);
	assert_true(r.st.done_err < 0);		/* the write: failed back */
	assert_int_equal(r.st.done, 2);
	assert_int_equal(r.st.last_err, -EPROTO);
	assert_non_null(strstr(r.q.err, "response for unknown cid 0"));
	cid = get16(cmd + 72 + 8 + 2);
	assert_int_equal(get16(cmd + 8 + 2), 0);
	assert_int_equal(nvq_cid_slot(cid), 0);
	assert_int_not_equal(cid, 0);
	rig_down(&r);
}

/* Sixteen commands through one slot: sixteen cids, then the first again. */
static void cid_generations(void **state)
{
	struct rig r;
	uint8_t buf[512], cmd[72];
	struct iovec iov = { buf, sizeof(buf) };
	uint16_t seen[17];
	int i, j;

	(void)state;
	rig_up(&r, 65536);
	for (i = 0; i < 17; i++) {
		submit_read(&r, &iov);
		recv_n(&r, cmd, sizeof(cmd));
		seen[i] = get16(cmd + 8 + 2);
		assert_int_equal(nvq_cid_slot(seen[i]), 0);
		for (j = 0; j < i && i < 16; j++)
			assert_int_not_equal(seen[i], seen[j]);
		/* the C2HData names cid 0: answer with the cid as sent */
		{
			uint8_t p[24 + 512] = { 0 };

			p[0] = 0x07;
			p[1] = 0x0c;
			p[2] = 24;
			p[3] = 24;
			put32(p + 4, sizeof(p));
			put16(p + 8, seen[i]);
			put32(p + 16, 512);
			assert_int_equal(send(r.cfd, p, sizeof(p), 0),
					 (ssize_t)sizeof(p));
		}
		spin(&r, &r.st.done, i + 1);
		assert_int_equal(r.st.done_err, 0);
	}
	assert_int_equal(seen[16], seen[0]);
	assert_int_equal(r.q.state, NVQ_READY);
	rig_down(&r);
}

/* CPDA is at most 31: more once wrapped the PDO we put in a byte. */
static void cpda_too_large(void **state)
{
	struct rig r;

	(void)state;
	rig_up_ic(&r, 65536, 32, 0, 0);
	assert_int_equal(r.st.last_err, -EPROTO);
	assert_non_null(strstr(r.q.err, "CPDA 32"));
	assert_int_equal(r.q.state, NVQ_CLOSED);
	rig_down(&r);
	rig_up_ic(&r, 65536, 31, 0, 0);		/* 128-byte alignment: fine */
	assert_int_equal(r.st.last_err, 0);
	assert_int_equal(r.q.state, NVQ_READY);
	rig_down(&r);
}

/* A response capsule for cid 0, with a header digest when @hd. */
static void send_rsp_hd(struct rig *r, bool hd, bool good)
{
	uint8_t p[28] = { 0 };

	p[0] = 0x05;
	p[1] = hd ? 0x01 : 0;
	p[2] = 24;
	put32(p + 4, hd ? 28 : 24);
	put32(p + 24, bs_crc32c(p, 24) ^ (good ? 0 : 1));
	assert_int_equal(send(r->cfd, p, hd ? 28 : 24, 0), hd ? 28 : 24);
}

/*
 * With digests agreed, a PDU without its digest flag was taken unchecked:
 * it loses the queue now; one with the flag where none were agreed too.
 */
static void digest_flags(void **state)
{
	static const struct {
		const char *what;
		uint8_t ask, dgst;	/* ICReq, ICResp */
		bool hd;		/* the response has a header digest */
		const char *why;	/* NULL: completes */
	} rows[] = {
		{ "header digest, response with it", 1, 1, true, NULL },
		{ "header digest, response without", 1, 1, false,
		  "header digest flag clear, digests agreed" },
		{ "no header digest, response with one", 0, 0, true,
		  "header digest flag set, digests not agreed" },
		{ "asked, refused, response without", 1, 0, false, NULL },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct rig r;
		uint8_t sqe[64] = { 0 };

		print_message("%s\n", rows[i].what);
		rig_up_ic(&r, 65536, 0, rows[i].ask, rows[i].dgst);
		assert_int_equal(r.q.state, NVQ_READY);
		sqe[0] = 0x00;				/* Flush */
		assert_int_equal(nvq_submit(&r.q, sqe, NULL, 0, NULL, 0, 0,
					    cmd_done, &r.st), 0);
		send_rsp_hd(&r, rows[i].hd, true);
		spin(&r, &r.st.done, 1);
		if (!rows[i].why) {
			assert_int_equal(r.st.done_err, 0);
			assert_int_equal(r.st.done_status, 0);
			assert_int_equal(r.q.state, NVQ_READY);
		} else {
			assert_true(r.st.done_err < 0);
			assert_int_equal(r.st.last_err, -EPROTO);
			assert_non_null(strstr(r.q.err, rows[i].why));
		}
		rig_down(&r);
	}
}

/* Data digest agreed: a C2HData without one is refused, not taken. */
static void data_digest_flag(void **state)
{
	int with;

	(void)state;
	for (with = 1; with >= 0; with--) {
		struct rig r;
		uint8_t buf[512], p[24 + 512 + 4] = { 0 };
		struct iovec iov = { buf, sizeof(buf) };
		size_t n = with ? sizeof(p) : sizeof(p) - 4;

		rig_up_ic(&r, 65536, 0, 2, 2);
		assert_true(r.q.ddgst);
		submit_read(&r, &iov);
		p[0] = 0x07;
		p[1] = 0x0c | (with ? 0x02 : 0);
		p[2] = 24;
		p[3] = 24;
		put32(p + 4, (uint32_t)n);
		put32(p + 16, 512);
		memset(p + 24, 0xcd, 512);
		put32(p + 24 + 512, bs_crc32c(p + 24, 512));
		assert_int_equal(send(r.cfd, p, n, 0), (ssize_t)n);
		spin(&r, &r.st.done, 1);
		if (with) {
			assert_int_equal(r.st.done_err, 0);
			assert_int_equal(buf[511], 0xcd);
		} else {
			assert_true(r.st.done_err < 0);
			assert_non_null(strstr(r.q.err, "data digest flag clear"));
		}
		rig_down(&r);
	}
}

/*
 * A PDU longer than the largest read sent (and its header) is refused
 * from its first 8 bytes: the limit was 16 MiB whatever the queue did,
 * so a target could make each queue buffer that much.
 */
static void pdu_length_bound(void **state)
{
	struct rig r;
	uint8_t buf[4096], p[8] = { 0 };
	struct iovec iov = { buf, sizeof(buf) };

	(void)state;
	rig_up(&r, 65536);
	submit_read(&r, &iov);
	p[0] = 0x07;
	p[2] = 24;
	put32(p + 4, 8u << 20);			/* 8 MiB for a 4 KiB read */
	assert_int_equal(send(r.cfd, p, sizeof(p), 0), 8);
	spin(&r, &r.st.events, 2);
	assert_int_equal(r.st.last_err, -EPROTO);
	assert_non_null(strstr(r.q.err, "PDU length 8388608"));
	assert_true(r.q.in.cap <= (1u << 20));
	assert_true(r.st.done_err < 0);
	rig_down(&r);
}

static void short_maxh2cdata(void **state)
{
	struct rig r;

	(void)state;
	rig_up(&r, 100);	/* below 4096: refused */
	assert_int_equal(r.st.last_err, -EPROTO);
	assert_non_null(strstr(r.q.err, "MAXH2CDATA"));
	rig_down(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(read_ok),
		cmocka_unit_test(c2h_out_of_range),
		cmocka_unit_test(hostile_pdus),
		cmocka_unit_test(short_maxh2cdata),
		cmocka_unit_test(r2t_in_parts),
		cmocka_unit_test(r2t_repeated),
		cmocka_unit_test(r2t_output_bounded),
		cmocka_unit_test(read_incomplete),
		cmocka_unit_test(write_success_unsent),
		cmocka_unit_test(completion_repeated),
		cmocka_unit_test(cid_generations),
		cmocka_unit_test(cpda_too_large),
		cmocka_unit_test(digest_flags),
		cmocka_unit_test(data_digest_flag),
		cmocka_unit_test(pdu_length_bound),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
