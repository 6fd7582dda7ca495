/* SPDX-License-Identifier: MIT */
/*
 * The nvmf host driver's ANA rules (lib/drivers/nvmf_ana.c): finding our
 * group's state in an ANA log page (by ANAGRPID, or by the NSID lists
 * when ANAGRPID is 0; a page cut short), which path statuses name which
 * state, and which paths may carry I/O: optimized (or no ANA) first,
 * non-optimized only when no optimized path is live, never
 * inaccessible, persistent loss or change. Logs past 4 KiB: the size
 * bound from NANAGRPID and NN, parts of at most MDTS, how much of a log
 * is still missing, groups found after 4 KiB. ANATT expiry.
 */
#include <errno.h>
#include <string.h>

#include <blkstack/nvme.h>
#include "drivers/nvmf.h"
#include "helpers/th.h"

/* An ANA log: groups (id, state, NSIDs) after the 16-byte header. */
static size_t make_log(uint8_t *p, const uint32_t *ids, const uint8_t *st,
		       const uint32_t *const *nsids, const unsigned *nn,
		       unsigned ngrps)
{
	size_t off = 16;
	unsigned g, i;

	memset(p, 0, 4096);
	bs_nvme_put64(p, 42);
	bs_nvme_put16(p + 8, (uint16_t)ngrps);
	for (g = 0; g < ngrps; g++) {
		bs_nvme_put32(p + off, ids[g]);
		bs_nvme_put32(p + off + 4, nn[g]);
		bs_nvme_put64(p + off + 8, 40 + g);
		p[off + 16] = st[g];
		for (i = 0; i < nn[g]; i++)
			bs_nvme_put32(p + off + 32 + 4 * i, nsids[g][i]);
		off += 32 + 4 * nn[g];
	}
	return off;
}

static void find_in_log(void **state)
{
	static const uint32_t a[] = { 1, 2 }, b[] = { 3 }, c[] = { 4, 5, 6 };
	const uint32_t *lists[] = { a, b, c };
	const uint32_t ids[] = { 7, 9, 11 };
	const uint8_t st[] = { BS_NVME_ANA_OPTIMIZED, BS_NVME_ANA_INACCESSIBLE,
			       0xf3 };	/* upper bits reserved */
	const unsigned nn[] = { 2, 1, 3 };
	uint8_t log[4096], s = 0;
	uint64_t cnt = 0;
	size_t len;

	(void)state;
	len = make_log(log, ids, st, lists, nn, 3);
	/* by ANAGRPID */
	assert_int_equal(nvmf_ana_find(log, len, 9, 99, &s, &cnt), 0);
	assert_int_equal(s, BS_NVME_ANA_INACCESSIBLE);
	assert_int_equal(cnt, 41);
	assert_int_equal(nvmf_ana_find(log, len, 11, 0, &s, &cnt), 0);
	assert_int_equal(s, BS_NVME_ANA_INACCESSIBLE);	/* 0xf3 & 0xf */
	/* ANAGRPID 0: the group whose list names the NSID */
	assert_int_equal(nvmf_ana_find(log, len, 0, 5, &s, &cnt), 0);
	assert_int_equal(cnt, 42);
	assert_int_equal(nvmf_ana_find(log, len, 0, 2, &s, &cnt), 0);
	assert_int_equal(s, BS_NVME_ANA_OPTIMIZED);
	/* not there */
	assert_int_equal(nvmf_ana_find(log, len, 8, 0, &s, &cnt), -ENOENT);
	assert_int_equal(nvmf_ana_find(log, len, 0, 77, &s, &cnt), -ENOENT);
	/* cut short: the third group is beyond what was read */
	assert_int_equal(nvmf_ana_find(log, 16 + 40 + 36, 11, 0, &s, &cnt),
			 -ENOENT);
	assert_int_equal(nvmf_ana_find(log, 8, 7, 0, &s, &cnt), -EPROTO);
}

static void status_to_state(void **state)
{
	(void)state;
	assert_int_equal(nvmf_ana_state_of_status(0x301),
			 BS_NVME_ANA_PERSISTENT_LOSS);
	assert_int_equal(nvmf_ana_state_of_status(0x302),
			 BS_NVME_ANA_INACCESSIBLE);
	assert_int_equal(nvmf_ana_state_of_status(0x303), BS_NVME_ANA_CHANGE);
	/* DNR and More do not change what the status says */
	assert_int_equal(nvmf_ana_state_of_status(0x302 | BS_NVME_SF_DNR),
			 BS_NVME_ANA_INACCESSIBLE);
	/* other path errors and other types: none */
	assert_int_equal(nvmf_ana_state_of_status(0x300), 0);
	assert_int_equal(nvmf_ana_state_of_status(0x370), 0);
	assert_int_equal(nvmf_ana_state_of_status(0x002), 0);
	assert_int_equal(nvmf_ana_state_of_status(0x102), 0);
	assert_string_equal(nvmf_ana_state_name(0), "none");
	assert_string_equal(nvmf_ana_state_name(BS_NVME_ANA_CHANGE), "change");
}

/* Which paths pick() may use: those whose rank is the best rank. */
static unsigned usable(const uint8_t *st, const bool *live, unsigned n)
{
	int best = nvmf_ana_best_rank(st, live, n);
	unsigned i, mask = 0;

	for (i = 0; best >= 0 && i < n; i++)
		if (live[i] && nvmf_ana_rank(st[i]) == best)
			mask |= 1u << i;
	return mask;
}

static void path_choice(void **state)
{
	const uint8_t O = BS_NVME_ANA_OPTIMIZED, N = BS_NVME_ANA_NONOPTIMIZED,
		      I = BS_NVME_ANA_INACCESSIBLE,
		      L = BS_NVME_ANA_PERSISTENT_LOSS, C = BS_NVME_ANA_CHANGE;
	static const struct {
		uint8_t st[3];
		bool live[3];
		unsigned mask;
	} rows[] = {
		/* optimized beats non-optimized */
		{ { O, N, N }, { 1, 1, 1 }, 0x1 },
		{ { N, O, O }, { 1, 1, 1 }, 0x6 },
		/* non-optimized when no optimized path is live */
		{ { N, O, I }, { 1, 0, 1 }, 0x1 },
		{ { N, N, I }, { 1, 1, 1 }, 0x3 },
		/* never inaccessible, persistent loss, change */
		{ { I, L, C }, { 1, 1, 1 }, 0x0 },
		{ { I, N, C }, { 1, 1, 1 }, 0x2 },
		/* no ANA reported counts as optimized */
		{ { 0, N, 0 }, { 1, 1, 0 }, 0x1 },
		{ { 0, O, I }, { 1, 1, 1 }, 0x3 },
		/* nothing live */
		{ { O, O, O }, { 0, 0, 0 }, 0x0 },
	};
	unsigned i;

	(void)state;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		assert_int_equal(usable(rows[i].st, rows[i].live, 3),
				 rows[i].mask);
	assert_int_equal(nvmf_ana_rank(0x05), -1);	/* reserved */
}

static void log_command(void **state)
{
	uint8_t sqe[64];

	(void)state;
	memset(sqe, 0xee, sizeof(sqe));
	nvmf_ana_log_sqe(sqe, 4096, 0);
	assert_int_equal(sqe[0], BS_NVME_ADMIN_GET_LOG_PAGE);
	assert_int_equal(bs_nvme_get32(sqe + 4), 0xffffffffu);
	/* LID 0Ch, LSP 0, RAE clear, NUMDL 1023 */
	assert_int_equal(bs_nvme_get32(sqe + 40), 0x0c | 1023u << 16);
	assert_true(th_is_zero(sqe + 44, 20));
	/* 1 MiB from byte 8192: NUMD 262143 = NUMDU 3, NUMDL 0xffff;
	 * LPOL/LPOU the offset */
	nvmf_ana_log_sqe(sqe, 1u << 20, 8192);
	assert_int_equal(bs_nvme_get32(sqe + 40), 0x0c | 0xffffu << 16);
	assert_int_equal(bs_nvme_get32(sqe + 44), 3);
	assert_int_equal(bs_nvme_get32(sqe + 48), 8192);
	assert_int_equal(bs_nvme_get32(sqe + 52), 0);
	nvmf_ana_log_sqe(sqe, 4096, 0x100000000ull);
	assert_int_equal(bs_nvme_get32(sqe + 48), 0);
	assert_int_equal(bs_nvme_get32(sqe + 52), 1);
}

/* How large a log can be, how much one command may read. */
static void log_sizes(void **state)
{
	(void)state;
	/* 16 + 128 x 32 + 256 x 4 */
	assert_int_equal(nvmf_ana_log_bound(128, 256), 5136);
	assert_int_equal(nvmf_ana_log_bound(1, 1), 16 + 32 + 4);
	/* no fields: the header and one group */
	assert_int_equal(nvmf_ana_log_bound(0, 0), 48);
	/* a controller that claims 2^32 - 1 groups: capped */
	assert_int_equal(nvmf_ana_log_bound(0xffffffffu, 0xffffffffu),
			 NVMF_ANA_LOG_MAX);
	/* MDTS in minimum pages: 0 = no limit (the cap) */
	assert_int_equal(nvmf_ana_log_chunk(0, 0), NVMF_ANA_LOG_MAX);
	assert_int_equal(nvmf_ana_log_chunk(1, 0), 8192);
	assert_int_equal(nvmf_ana_log_chunk(8, 0), 1u << 20);
	assert_int_equal(nvmf_ana_log_chunk(1, 1), 16384);
	assert_int_equal(nvmf_ana_log_chunk(20, 0), NVMF_ANA_LOG_MAX);
}

/* A log of @ngrps groups (IDs 1..), @per NSIDs each (group g holds
 * g, g + ngrps, ...), group @odd non-optimized; returns its size. */
static size_t big_log(uint8_t *p, size_t cap, unsigned ngrps, unsigned per,
		      unsigned odd)
{
	size_t off = 16;
	unsigned g, i;

	memset(p, 0, cap);
	bs_nvme_put64(p, 7);
	bs_nvme_put16(p + 8, (uint16_t)ngrps);
	for (g = 1; g <= ngrps; g++) {
		assert_true(off + 32 + 4 * per <= cap);
		bs_nvme_put32(p + off, g);
		bs_nvme_put32(p + off + 4, per);
		bs_nvme_put64(p + off + 8, g);
		p[off + 16] = g == odd ? BS_NVME_ANA_NONOPTIMIZED
				       : BS_NVME_ANA_OPTIMIZED;
		for (i = 0; i < per; i++)
			bs_nvme_put32(p + off + 32 + 4 * i, g + i * ngrps);
		off += 32 + 4 * per;
	}
	return off;
}

static void logs_past_4k(void **state)
{
	static uint8_t log[64 * 1024];
	size_t size;
	uint8_t st;
	uint64_t cnt;

	(void)state;
	/* 128 groups of 2 namespaces: 5136 bytes; the last group's
	 * descriptor starts at 5096 */
	size = big_log(log, sizeof(log), 128, 2, 128);
	assert_int_equal(size, 5136);
	assert_int_equal(size, nvmf_ana_log_bound(128, 256));
	/* the first 4 KiB do not hold it: more is needed */
	assert_true(nvmf_ana_log_need(log, 4096) > 4096);
	assert_int_equal(nvmf_ana_find(log, 4096, 128, 0, &st, &cnt),
			 -ENOENT);
	/* whole: found, by group and by NSID */
	assert_int_equal(nvmf_ana_log_need(log, size), size);
	assert_int_equal(nvmf_ana_log_need(log, sizeof(log)), size);
	assert_int_equal(nvmf_ana_find(log, size, 128, 0, &st, &cnt), 0);
	assert_int_equal(st, BS_NVME_ANA_NONOPTIMIZED);
	assert_int_equal(cnt, 128);
	assert_int_equal(nvmf_ana_find(log, size, 0, 256, &st, &cnt), 0);
	assert_int_equal(cnt, 128);
	assert_int_equal(nvmf_ana_find(log, size, 0, 129, &st, &cnt), 0);
	assert_int_equal(st, BS_NVME_ANA_OPTIMIZED);
	assert_int_equal(cnt, 1);
	/* a short header: 16 bytes needed; a header of no groups: done */
	assert_int_equal(nvmf_ana_log_need(log, 8), 16);
	/* one group of 4000 namespaces: 16 + 32 + 16000 bytes; what the
	 * first 4 KiB tell is its whole length */
	size = big_log(log, sizeof(log), 1, 4000, 0);
	assert_int_equal(size, 16048);
	assert_int_equal(nvmf_ana_log_need(log, 4096), 16048);
	assert_int_equal(nvmf_ana_find(log, 4096, 0, 4000, &st, &cnt),
			 -ENOENT);
	assert_int_equal(nvmf_ana_find(log, size, 0, 4000, &st, &cnt), 0);
	/* many groups with one namespace each (64 KiB of log) */
	size = big_log(log, sizeof(log), 1800, 1, 1799);
	assert_int_equal(size, 16 + 1800 * 36);
	assert_int_equal(nvmf_ana_find(log, size, 1799, 0, &st, &cnt), 0);
	assert_int_equal(st, BS_NVME_ANA_NONOPTIMIZED);
	/* a count of groups the page cannot hold: what is there is read,
	 * no more is claimed than the descriptors say */
	bs_nvme_put16(log + 8, 0xffff);
	assert_true(nvmf_ana_log_need(log, size) > size);
	assert_int_equal(nvmf_ana_find(log, size, 0xfffff, 0, &st, &cnt),
			 -ENOENT);
}

static void anatt_expiry(void **state)
{
	const uint64_t s = 1000000000ull;

	(void)state;
	/* in change since t = 100 s, ANATT 2 s */
	assert_false(nvmf_ana_expired(BS_NVME_ANA_CHANGE, 100 * s, 2,
				      102 * s));
	assert_true(nvmf_ana_expired(BS_NVME_ANA_CHANGE, 100 * s, 2,
				     102 * s + 1));
	/* another state, or not in change: never */
	assert_false(nvmf_ana_expired(BS_NVME_ANA_INACCESSIBLE, 100 * s, 2,
				      200 * s));
	assert_false(nvmf_ana_expired(BS_NVME_ANA_CHANGE, 0, 2, 200 * s));
	/* ANATT 0 (not given): 10 s */
	assert_false(nvmf_ana_expired(BS_NVME_ANA_CHANGE, 100 * s, 0,
				      110 * s));
	assert_true(nvmf_ana_expired(BS_NVME_ANA_CHANGE, 100 * s, 0,
				     111 * s));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(find_in_log),
		cmocka_unit_test(status_to_state),
		cmocka_unit_test(path_choice),
		cmocka_unit_test(log_command),
		cmocka_unit_test(log_sizes),
		cmocka_unit_test(logs_past_4k),
		cmocka_unit_test(anatt_expiry),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
