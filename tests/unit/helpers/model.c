/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>

#include <blkstack/zero.h>

#include "th.h"
#include "model.h"

void th_model_init(struct th_model *m, struct bs_dev *dev, uint64_t seed,
		   uint64_t boundary, uint64_t max_len)
{
	memset(m, 0, sizeof(*m));
	m->dev = dev;
	m->size = dev->size;
	m->rng = seed;
	m->boundary = boundary;
	m->max_len = max_len;
	m->bytes = malloc(dev->size);
	m->buf = malloc(dev->size);
	assert_non_null(m->bytes);
	assert_non_null(m->buf);
	assert_int_equal(bs_read_sync(dev, m->bytes, dev->size, 0), 0);
}

void th_model_free(struct th_model *m)
{
	free(m->bytes);
	free(m->buf);
	m->bytes = m->buf = NULL;
}

/* A block-aligned range, often straddling a multiple of the boundary. */
static void pick(struct th_model *m, uint64_t *offp, uint64_t *lenp)
{
	uint64_t bs = m->dev->limits.logical_block_size;
	uint64_t nb = m->size / bs, off, len;
	uint64_t maxb = m->max_len / bs ? m->max_len / bs : 1;

	len = (th_rand(&m->rng) % maxb + 1) * bs;
	if (m->boundary && th_rand(&m->rng) % 2) {
		uint64_t nbound = m->size / m->boundary;
		uint64_t k = nbound ? th_rand(&m->rng) % nbound + 1 : 0;
		uint64_t back = (th_rand(&m->rng) % (len / bs + 1)) * bs;

		off = k * m->boundary;
		off = off > back ? off - back : 0;
	} else {
		off = (th_rand(&m->rng) % nb) * bs;
	}
	if (off >= m->size)
		off = m->size - bs;
	if (len > m->size - off)
		len = m->size - off;
	*offp = off;
	*lenp = len;
}

void th_model_check(struct th_model *m, struct bs_dev *dev, uint64_t dev_off,
		    uint64_t off, uint64_t len)
{
	uint64_t i;

	assert_int_equal(bs_read_sync(dev, m->buf, len, dev_off), 0);
	if (memcmp(m->buf, m->bytes + off, len)) {
		for (i = 0; i < len && m->buf[i] == m->bytes[off + i]; i++)
			;
		fail_msg("%s: byte %llu (model %llu) reads %#x, model says %#x",
			 dev->name, (unsigned long long)(dev_off + i),
			 (unsigned long long)(off + i), m->buf[i],
			 m->bytes[off + i]);
	}
}

void th_model_check_all(struct th_model *m)
{
	th_model_check(m, m->dev, 0, 0, m->size);
}

void th_model_run(struct th_model *m, unsigned n, unsigned ops)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		unsigned op = (unsigned)(th_rand(&m->rng) % 4);
		uint64_t off, len;
		int err;

		if (!(ops & (1u << op)))
			continue;
		pick(m, &off, &len);
		m->ops[op]++;
		switch (op) {
		case 0:
			th_fill(m->buf, len, th_rand(&m->rng));
			err = bs_write_sync(m->dev, m->buf, len, off);
			if (err)
				fail_msg("%s: write %llu+%llu: %d", m->dev->name,
					 (unsigned long long)off,
					 (unsigned long long)len, err);
			memcpy(m->bytes + off, m->buf, len);
			break;
		case 1:
			err = bs_zeroout_sync(m->dev, off, len,
					      th_rand(&m->rng) % 2 ?
						      BS_ZERO_NOUNMAP : 0,
					      NULL, NULL);
			if (err)
				fail_msg("%s: zeroout %llu+%llu: %d",
					 m->dev->name, (unsigned long long)off,
					 (unsigned long long)len, err);
			memset(m->bytes + off, 0, len);
			break;
		case 2:
			err = bs_io_sync(m->dev, BS_OP_DISCARD, 0, off, len, NULL);
			if (err)
				fail_msg("%s: discard %llu+%llu: %d",
					 m->dev->name, (unsigned long long)off,
					 (unsigned long long)len, err);
			/* the test's devices read discarded blocks as zeroes */
			memset(m->bytes + off, 0, len);
			break;
		default:
			th_model_check(m, m->dev, off, off, len);
		}
	}
}
