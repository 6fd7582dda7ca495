/* SPDX-License-Identifier: MIT */
/*
 * SCSI state between nexuses: persistent reservations (register, reserve,
 * conflicts, preempt, clear), RESERVE/RELEASE and its release when the
 * nexus goes, MODE SENSE / MODE SELECT switching the sense format, unit
 * attentions from resets and mode changes, the bounded UA queue.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/scsi/internal.h"
#include "helpers/sth.h"
#include "helpers/th.h"

static struct sth_res R;

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static uint64_t be64(const uint8_t *p)
{
	return (uint64_t)be32(p) << 32 | be32(p + 4);
}

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static uint8_t pr_out(struct sth *s, struct bs_scsi_nexus *n, uint8_t sa,
		      uint8_t type, uint64_t key, uint64_t sakey, uint8_t flags)
{
	uint8_t cdb[10] = { 0x5f, sa, type }, p[24] = { 0 };

	cdb[8] = 24;
	put_be64(p, key);
	put_be64(p + 8, sakey);
	p[20] = flags;
	return sth_cmd(s, n, 0, cdb, 10, p, 24, 0, &R);
}

static uint8_t pr_in(struct sth *s, struct bs_scsi_nexus *n, uint8_t sa)
{
	uint8_t cdb[10] = { 0x5e, sa };

	cdb[8] = 255;
	return sth_cmd(s, n, 0, cdb, 10, NULL, 0, 255, &R);
}

static uint8_t rd(struct sth *s, struct bs_scsi_nexus *n)
{
	uint8_t cdb[16];

	sth_cdb_rw(cdb, 10, false, 0, 1);
	return sth_cmd(s, n, 0, cdb, 16, NULL, 0, 512, &R);
}

static uint8_t wr(struct sth *s, struct bs_scsi_nexus *n)
{
	static const uint8_t buf[512];
	uint8_t cdb[16];

	sth_cdb_rw(cdb, 10, true, 0, 1);
	return sth_cmd(s, n, 0, cdb, 16, buf, 512, 0, &R);
}

static void setup_lu(struct sth *s)
{
	sth_lu(s, 0, th_dev(s->ctx, "m", "mem:1M"), false);
	sth_clear_ua(s, s->n[0], 0);
	sth_clear_ua(s, s->n[1], 0);
}

#define A (s->n[0])
#define B (s->n[1])
#define CONFLICT BS_SCSI_RESERVATION_CONFLICT

static void pr_register_reserve(void **state)
{
	struct sth *s = *state;

	setup_lu(s);
	/* REPORT CAPABILITIES: no PTPL, the six types */
	assert_int_equal(pr_in(s, A, 2), BS_SCSI_GOOD);
	assert_int_equal(R.din[2] & 0x01, 0);	/* PTPL_C */
	assert_int_equal(R.din[4], 0xea);
	assert_int_equal(R.din[5], 0x01);
	/* APTPL refused */
	pr_out(s, A, 0, 0, 0, 0x1111, 0x01);
	sth_assert_check(&R, 0x5, 0x2600);
	assert_int_equal(pr_out(s, A, 0, 0, 0, 0x1111, 0), BS_SCSI_GOOD);
	assert_int_equal(pr_out(s, B, 0, 0, 0, 0x2222, 0), BS_SCSI_GOOD);
	/* a wrong key on REGISTER: conflict; REGISTER AND IGNORE works */
	assert_int_equal(pr_out(s, B, 0, 0, 0x9999, 0x2223, 0), CONFLICT);
	assert_int_equal(pr_out(s, B, 6, 0, 0, 0x2222, 0), BS_SCSI_GOOD);
	assert_int_equal(pr_in(s, A, 0), BS_SCSI_GOOD);
	assert_int_equal(be32(R.din + 4), 16);
	assert_true(be32(R.din) >= 2);		/* generation */
	/* A reserves Write Exclusive */
	assert_int_equal(pr_out(s, A, 1, 1, 0x1111, 0, 0), BS_SCSI_GOOD);
	assert_int_equal(pr_in(s, B, 1), BS_SCSI_GOOD);
	assert_int_equal(be32(R.din + 4), 16);
	assert_int_equal(be64(R.din + 8), 0x1111);
	assert_int_equal(R.din[21], 1);
	/* B (registered, not the holder) may read, not write */
	assert_int_equal(rd(s, B), BS_SCSI_GOOD);
	assert_int_equal(wr(s, B), CONFLICT);
	assert_int_equal(wr(s, A), BS_SCSI_GOOD);
	/* B cannot reserve; an unregistered key cannot either */
	assert_int_equal(pr_out(s, B, 1, 1, 0x2222, 0, 0), CONFLICT);
	/* release with the wrong type: INVALID RELEASE */
	pr_out(s, A, 2, 3, 0x1111, 0, 0);
	sth_assert_check(&R, 0x5, 0x2604);
	/* B preempts A's key and takes Exclusive Access */
	assert_int_equal(pr_out(s, B, 4, 3, 0x2222, 0x1111, 0), BS_SCSI_GOOD);
	/* A was preempted: it hears of it, then may not even read */
	rd(s, A);
	sth_assert_check(&R, 0x6, 0x2a05);
	assert_int_equal(rd(s, A), CONFLICT);
	assert_int_equal(rd(s, B), BS_SCSI_GOOD);
	/* INQUIRY, REPORT LUNS are never in conflict */
	{
		uint8_t inq[6] = { 0x12, 0, 0, 0, 36, 0 };

		assert_int_equal(sth_cmd(s, A, 0, inq, 6, NULL, 0, 36, &R),
				 BS_SCSI_GOOD);
	}
	assert_int_equal(pr_in(s, A, 0), BS_SCSI_GOOD);
	assert_int_equal(be32(R.din + 4), 8);	/* only B's key left */
	/* READ FULL STATUS: B's key, holder, its iSCSI TransportID */
	assert_int_equal(pr_in(s, A, 3), BS_SCSI_GOOD);
	assert_int_equal(be32(R.din + 4), R.din_len - 8);
	assert_int_equal(be64(R.din + 8), 0x2222);
	assert_int_equal(R.din[8 + 12] & 1, 1);		/* R_HOLDER */
	assert_int_equal(R.din[8 + 13], 3);
	assert_int_equal(R.din[8 + 24], 0x45);		/* iSCSI, ISID form */
	assert_string_equal((const char *)R.din + 8 + 28,
			    "iqn.2026-01.test:b,i,0x000000000002");
	/* service actions past READ FULL STATUS are invalid */
	pr_in(s, A, 4);
	sth_assert_check(&R, 0x5, 0x2400);
	/* B clears everything */
	assert_int_equal(pr_out(s, B, 3, 0, 0x2222, 0, 0), BS_SCSI_GOOD);
	assert_int_equal(rd(s, A), BS_SCSI_GOOD);
	assert_int_equal(pr_in(s, A, 0), BS_SCSI_GOOD);
	assert_int_equal(be32(R.din + 4), 0);
	assert_int_equal(pr_in(s, A, 1), BS_SCSI_GOOD);
	assert_int_equal(be32(R.din + 4), 0);
}

/* Registrants Only: every registrant may write; others may read. */
static void pr_registrants_only(void **state)
{
	struct sth *s = *state;

	setup_lu(s);
	assert_int_equal(pr_out(s, A, 0, 0, 0, 1, 0), BS_SCSI_GOOD);
	assert_int_equal(pr_out(s, A, 1, 5, 1, 0, 0), BS_SCSI_GOOD);
	assert_int_equal(wr(s, B), CONFLICT);
	assert_int_equal(rd(s, B), BS_SCSI_GOOD);
	assert_int_equal(pr_out(s, B, 0, 0, 0, 2, 0), BS_SCSI_GOOD);
	assert_int_equal(wr(s, B), BS_SCSI_GOOD);
	/* the holder unregisters: the reservation goes; B hears of it */
	assert_int_equal(pr_out(s, A, 0, 0, 1, 0, 0), BS_SCSI_GOOD);
	wr(s, B);
	sth_assert_check(&R, 0x6, 0x2a04);
	assert_int_equal(pr_in(s, B, 1), BS_SCSI_GOOD);
	assert_int_equal(be32(R.din + 4), 0);
}

/*
 * Registrations outlive their nexus: one initiator port after another
 * (a new ISID per login) may register SCSI_PR_REGS_MAX keys, the next
 * gets INSUFFICIENT REGISTRATION RESOURCES; a freed place is taken again.
 */
static struct bs_scsi_nexus *port_n(struct sth *s, unsigned i)
{
	struct bs_scsi_nexus_cfg nc = {
		.target_port = "iqn.2026-01.test:t,t,0x0001",
		.rel_port_id = 1, .tpg = 1,
	};
	struct bs_scsi_nexus *n;
	char iport[64];

	snprintf(iport, sizeof(iport), "iqn.2026-01.test:x,i,0x%012x", i);
	nc.initiator_port = iport;
	assert_int_equal(bs_scsi_nexus_new(s->tgt, &nc, &n), 0);
	sth_clear_ua(s, n, 0);
	return n;
}

static void pr_registrations_bounded(void **state)
{
	struct sth *s = *state;
	struct bs_scsi_nexus *n;
	unsigned i;

	setup_lu(s);
	for (i = 0; i < SCSI_PR_REGS_MAX; i++) {
		n = port_n(s, i);
		assert_int_equal(pr_out(s, n, 0, 0, 0, 0x1000 + i, 0),
				 BS_SCSI_GOOD);
		bs_scsi_nexus_free(n);	/* the registration stays */
	}
	n = port_n(s, i);
	pr_out(s, n, 0, 0, 0, 0x1000 + i, 0);
	sth_assert_check(&R, 0x5, 0x5504);
	bs_scsi_nexus_free(n);
	pr_out(s, A, 0, 0, 0, 0x1, 0);
	sth_assert_check(&R, 0x5, 0x5504);
	/* a key changed in place needs no new place */
	n = port_n(s, 7);
	assert_int_equal(pr_out(s, n, 0, 0, 0x1007, 0x2007, 0), BS_SCSI_GOOD);
	/* one unregisters: A fits */
	assert_int_equal(pr_out(s, n, 0, 0, 0x2007, 0, 0), BS_SCSI_GOOD);
	bs_scsi_nexus_free(n);
	assert_int_equal(pr_out(s, A, 0, 0, 0, 0x1, 0), BS_SCSI_GOOD);
}

/* RESERVE(6): another nexus is in conflict until the holder goes. */
static void reserve6(void **state)
{
	struct sth *s = *state;
	uint8_t res[6] = { 0x16 }, rel[6] = { 0x17 }, tur[6] = { 0 };
	uint8_t inq[6] = { 0x12, 0, 0, 0, 36, 0 };

	setup_lu(s);
	assert_int_equal(sth_cmd(s, A, 0, res, 6, NULL, 0, 0, &R),
			 BS_SCSI_GOOD);
	assert_int_equal(sth_cmd(s, B, 0, tur, 6, NULL, 0, 0, &R), CONFLICT);
	assert_int_equal(sth_cmd(s, B, 0, res, 6, NULL, 0, 0, &R), CONFLICT);
	assert_int_equal(sth_cmd(s, B, 0, inq, 6, NULL, 0, 36, &R),
			 BS_SCSI_GOOD);
	/* RELEASE from B does nothing (and is not a conflict) */
	assert_int_equal(sth_cmd(s, B, 0, rel, 6, NULL, 0, 0, &R),
			 BS_SCSI_GOOD);
	assert_int_equal(rd(s, B), CONFLICT);
	assert_int_equal(rd(s, A), BS_SCSI_GOOD);
	/* PR OUT while an SPC-2 reservation is held: conflict */
	assert_int_equal(pr_out(s, B, 0, 0, 0, 5, 0), CONFLICT);
	/* the holder's nexus goes away: the reservation goes with it */
	bs_scsi_nexus_free(s->n[0]);
	s->n[0] = NULL;
	assert_int_equal(rd(s, B), BS_SCSI_GOOD);
	/* RESERVE(10) and RELEASE(10) */
	{
		uint8_t r10[10] = { 0x56 }, l10[10] = { 0x57 };

		assert_int_equal(sth_cmd(s, B, 0, r10, 10, NULL, 0, 0, &R),
				 BS_SCSI_GOOD);
		assert_int_equal(sth_cmd(s, B, 0, l10, 10, NULL, 0, 0, &R),
				 BS_SCSI_GOOD);
	}
}

/* MODE SENSE: pages and header; MODE SELECT flips D_SENSE. */
static void mode_dsense(void **state)
{
	struct sth *s = *state;
	uint8_t ms6[6] = { 0x1a, 0, 0x0a, 0, 255, 0 };
	uint8_t all[6] = { 0x1a, 0, 0x3f, 0, 255, 0 };
	uint8_t sel[6] = { 0x15, 0x10, 0, 0, 0, 0 };
	uint8_t p[4 + 12], bad[16];

	setup_lu(s);
	assert_int_equal(sth_cmd(s, A, 0, ms6, 6, NULL, 0, 255, &R),
			 BS_SCSI_GOOD);
	assert_int_equal(R.din[0], R.din_len - 1);
	assert_int_equal(R.din[3], 8);		/* a block descriptor */
	assert_int_equal(be32(R.din + 8) & 0xffffff, 512);
	assert_int_equal(R.din[12], 0x0a);
	assert_int_equal(R.din[14] & 0x04, 0);	/* D_SENSE 0 */
	/* all pages: caching page with WCE = 0 (no write cache) */
	assert_int_equal(sth_cmd(s, A, 0, all, 6, NULL, 0, 255, &R),
			 BS_SCSI_GOOD);
	{
		unsigned off = 4 + R.din[3];
		bool caching = false;

		while (off < R.din_len) {
			if ((R.din[off] & 0x3f) == 0x08) {
				caching = true;
				assert_int_equal(R.din[off + 2] & 0x04, 0);
			}
			off += 2 + R.din[off + 1];
		}
		assert_int_equal(off, R.din_len);
		assert_true(caching);
	}
	/* changeable values: D_SENSE only */
	ms6[2] = 0x40 | 0x0a;
	assert_int_equal(sth_cmd(s, A, 0, ms6, 6, NULL, 0, 255, &R),
			 BS_SCSI_GOOD);
	assert_int_equal(R.din[12 + 2], 0x04);
	/* saved values: not supported */
	ms6[2] = 0xc0 | 0x0a;
	sth_cmd(s, A, 0, ms6, 6, NULL, 0, 255, &R);
	sth_assert_check(&R, 0x5, 0x3900);
	/* an error in fixed format */
	memset(bad, 0, sizeof(bad));
	bad[0] = 0x02;
	sth_cmd(s, A, 0, bad, 6, NULL, 0, 0, &R);
	assert_int_equal(R.sense[0], 0x70);
	/* MODE SELECT(6) of the control page with D_SENSE = 1 */
	memset(p, 0, sizeof(p));
	p[4] = 0x0a;
	p[5] = 0x0a;
	p[6] = 0x04;
	p[7] = 0x10;
	p[9] = 0x40;	/* TAS (not changeable) */
	sel[4] = sizeof(p);
	assert_int_equal(sth_cmd(s, A, 0, sel, 6, p, sizeof(p), 0, &R),
			 BS_SCSI_GOOD);
	sth_cmd(s, A, 0, bad, 6, NULL, 0, 0, &R);
	assert_int_equal(R.sense[0], 0x72);
	assert_int_equal(R.sense[1], 0x5);
	assert_int_equal(R.sense[2], 0x20);
	/* the other nexus hears MODE PARAMETERS CHANGED, in descriptor form */
	rd(s, B);
	assert_int_equal(R.sense[0], 0x72);
	sth_assert_check(&R, 0x6, 0x2a01);
	/* a field that is not changeable: refused */
	p[7] = 0x00;
	sth_cmd(s, A, 0, sel, 6, p, sizeof(p), 0, &R);
	sth_assert_check(&R, 0x5, 0x2600);
	/* SP = 1: nothing is saved */
	sel[1] = 0x11;
	p[7] = 0x10;
	sth_cmd(s, A, 0, sel, 6, p, sizeof(p), 0, &R);
	sth_assert_check(&R, 0x5, 0x2400);
	/* back to fixed */
	sel[1] = 0x10;
	p[6] = 0;
	assert_int_equal(sth_cmd(s, A, 0, sel, 6, p, sizeof(p), 0, &R),
			 BS_SCSI_GOOD);
	sth_cmd(s, A, 0, bad, 6, NULL, 0, 0, &R);
	assert_int_equal(R.sense[0], 0x70);
	/* MODE SENSE(10) with a long LBA descriptor */
	{
		uint8_t ms10[10] = { 0x5a, 0x10, 0x08, 0, 0, 0, 0, 0, 255, 0 };

		assert_int_equal(sth_cmd(s, A, 0, ms10, 10, NULL, 0, 255, &R),
				 BS_SCSI_GOOD);
		assert_int_equal(R.din[4] & 1, 1);
		assert_int_equal(R.din[7], 16);
		assert_int_equal(be64(R.din + 8), 2048);
		assert_int_equal(R.din[24], 0x08);
	}
}

/* Resets: the other nexuses get the UA, RESERVE is dropped. */
static void resets_and_ua_queue(void **state)
{
	struct sth *s = *state;
	uint8_t res[6] = { 0x16 }, tur[6] = { 0 };
	struct bs_scsi_lu *lu;
	struct bs_caps a, b;

	setup_lu(s);
	lu = NULL;
	assert_int_equal(sth_cmd(s, A, 0, res, 6, NULL, 0, 0, &R),
			 BS_SCSI_GOOD);
	assert_int_equal(bs_scsi_lu_reset(s->tgt, 0, A), 0);
	assert_int_equal(bs_scsi_lu_reset(s->tgt, 42, A), -ENODEV);
	sth_cmd(s, B, 0, tur, 6, NULL, 0, 0, &R);
	sth_assert_check(&R, 0x6, 0x2903);
	assert_int_equal(rd(s, B), BS_SCSI_GOOD);	/* reservation gone */
	/* the nexus that sent the reset hears of it too (SAM-5) */
	rd(s, A);
	sth_assert_check(&R, 0x6, 0x2903);
	assert_int_equal(rd(s, A), BS_SCSI_GOOD);
	/* a target reset: 29h/02h everywhere */
	bs_scsi_tgt_reset(s->tgt, B);
	rd(s, B);
	sth_assert_check(&R, 0x6, 0x2902);
	rd(s, A);
	sth_assert_check(&R, 0x6, 0x2902);
	/* many changes: bounded queue, each condition once */
	lu = NULL;
	{
		struct bs_scsi_lu_cfg c = { .lun = 1,
					    .dev = bs_dev_find(s->ctx, "m"),
					    .name = "m2" };

		assert_int_equal(bs_scsi_lu_add(s->tgt, &c, &lu), 0);
	}
	/* LU 0 hears REPORTED LUNS DATA HAS CHANGED */
	sth_cmd(s, A, 0, tur, 6, NULL, 0, 0, &R);
	sth_assert_check(&R, 0x6, 0x3f0e);
	sth_clear_ua(s, A, 1);
	memset(&a, 0, sizeof(a));
	b = a;
	for (int i = 0; i < 20; i++) {
		b.size = a.size + 512;
		bs_scsi_lu_caps_changed(lu, &a, &b);
		b.write_cache = !b.write_cache;
		bs_scsi_lu_caps_changed(lu, &a, &b);
		a = b;
	}
	b.discard = true;
	bs_scsi_lu_caps_changed(lu, &a, &b);
	{
		unsigned n = 0;

		while (n < 20 && sth_cmd(s, A, 1, tur, 6, NULL, 0, 0, &R) ==
					 BS_SCSI_CHECK_CONDITION)
			n++;
		assert_int_equal(n, 3);	/* capacity, mode, inquiry */
	}
	bs_scsi_lu_remove(lu);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(pr_register_reserve, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(pr_registrants_only, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(pr_registrations_bounded,
						sth_setup, sth_teardown),
		cmocka_unit_test_setup_teardown(reserve6, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(mode_dsense, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(resets_and_ua_queue, sth_setup,
						sth_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
