/* SPDX-License-Identifier: MIT */
/*
 * iscsi_tmf URL ROUNDS: two sessions to one LUN. Session B queues long
 * WRITE SAME(16) commands (a non-zero block, written out) with libiscsi's
 * asynchronous API; while they run, session A sends LOGICAL UNIT RESET.
 * Checks, per round: every command of B ends (no hang), each GOOD, TASK
 * ABORTED, or the reset's UNIT ATTENTION (sent after the reset); A's reset
 * answers "function complete"; both sessions then see UNIT ATTENTION
 * 29h/03h once (B's may have been met by a command already) and TEST
 * UNIT READY is GOOD after it. Prints counts; exit 0 when every check
 * held and at least one command of B was aborted over all rounds.
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#define NCMD 8
#define UA_LU_RESET 0x2903

struct slot {
	bool done;
	int status;
	int key, ascq;
};

static struct slot slots[NCMD];
static unsigned n_good, n_aborted, n_ua;

static void die(const char *what, struct iscsi_context *c)
{
	fprintf(stderr, "iscsi_tmf: %s: %s\n", what,
		c ? iscsi_get_error(c) : strerror(errno));
	exit(1);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct iscsi_context *login(const char *url, const char *ini,
				   int *lun)
{
	struct iscsi_context *c = iscsi_create_context(ini);
	struct iscsi_url *u;

	if (!c)
		die("context", NULL);
	u = iscsi_parse_full_url(c, url);
	if (!u)
		die("url", c);
	iscsi_set_targetname(c, u->target);
	iscsi_set_session_type(c, ISCSI_SESSION_NORMAL);
	iscsi_set_header_digest(c, ISCSI_HEADER_DIGEST_NONE);
	if (iscsi_full_connect_sync(c, u->portal, u->lun))
		die("login", c);
	*lun = u->lun;
	iscsi_destroy_url(u);
	return c;
}

static void ws_done(struct iscsi_context *c, int status, void *data,
		    void *priv)
{
	struct slot *s = priv;
	struct scsi_task *task = data;

	s->done = true;
	s->status = status;
	if (status == SCSI_STATUS_CHECK_CONDITION) {
		s->key = task->sense.key;
		s->ascq = task->sense.ascq;
	}
	scsi_free_scsi_task(task);
}

/* Service @c for up to @ms, or until @until() holds. */
static void pump(struct iscsi_context *c, int ms, bool (*until)(void *),
		 void *arg)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	while (now_ms() < end && !(until && until(arg))) {
		struct pollfd p = { .fd = iscsi_get_fd(c),
				    .events = (short)iscsi_which_events(c) };
		int n = poll(&p, 1, 10);

		if (n < 0)
			die("poll", NULL);
		if (n && iscsi_service(c, p.revents) < 0)
			die("service", c);
	}
}

static bool sent(void *arg)
{
	return iscsi_out_queue_length(arg) == 0;
}

static bool all_done(void *arg)
{
	unsigned i;

	(void)arg;
	for (i = 0; i < NCMD; i++)
		if (!slots[i].done)
			return false;
	return true;
}

/* TEST UNIT READY: 0 GOOD, else the sense ASC/ASCQ (-1 other). */
static int tur(struct iscsi_context *c, int lun)
{
	struct scsi_task *t = iscsi_testunitready_sync(c, lun);
	int r = -1;

	if (!t)
		die("test unit ready", c);
	if (t->status == SCSI_STATUS_GOOD)
		r = 0;
	else if (t->status == SCSI_STATUS_CHECK_CONDITION &&
		 t->sense.key == SCSI_SENSE_UNIT_ATTENTION)
		r = t->sense.ascq;
	scsi_free_scsi_task(t);
	return r;
}

int main(int argc, char **argv)
{
	struct iscsi_context *a, *b;
	static unsigned char block[512];
	uint32_t per;
	struct scsi_task *cap;
	struct scsi_readcapacity16 *rc16;
	uint64_t nblocks;
	int lun, lunb, rounds, r, i, fails = 0;

	if (argc != 3) {
		fprintf(stderr, "usage: iscsi_tmf URL ROUNDS\n");
		return 2;
	}
	rounds = atoi(argv[2]);
	a = login(argv[1], "iqn.2026-12.org.blkstack:tmf-a", &lun);
	b = login(argv[1], "iqn.2026-12.org.blkstack:tmf-b", &lunb);
	/* the new sessions' POWER ON unit attentions */
	while (tur(a, lun) > 0)
		;
	while (tur(b, lunb) > 0)
		;
	cap = iscsi_readcapacity16_sync(a, lun);
	if (!cap || cap->status != SCSI_STATUS_GOOD ||
	    !(rc16 = scsi_datain_unmarshall(cap)))
		die("read capacity 16", a);
	if (rc16->block_length != sizeof(block)) {
		fprintf(stderr, "iscsi_tmf: wants 512-byte blocks\n");
		return 1;
	}
	nblocks = rc16->returned_lba + 1;
	scsi_free_scsi_task(cap);
	per = (uint32_t)(nblocks / NCMD);
	memset(block, 0x5a, sizeof(block));

	for (r = 0; r < rounds; r++) {
		int ua_b, ua_a;
		bool b_met = false;

		memset(slots, 0, sizeof(slots));
		block[0] = (unsigned char)r;
		for (i = 0; i < NCMD; i++)
			if (!iscsi_writesame16_task(b, lunb, (uint64_t)i * per,
						    block, sizeof(block), per,
						    0, 0, 0, 0, ws_done,
						    &slots[i]))
				die("write same", b);
		pump(b, 2000, sent, b);
		/* let the target start them, then reset from A */
		pump(b, 2 + r % 5, NULL, NULL);
		if (iscsi_task_mgmt_lun_reset_sync(a, lun))
			die("lun reset", a);
		pump(b, 60000, all_done, NULL);
		for (i = 0; i < NCMD; i++) {
			struct slot *s = &slots[i];

			if (!s->done) {
				fprintf(stderr, "round %d: command %d of B "
					"never ended\n", r, i);
				return 1;
			}
			if (s->status == SCSI_STATUS_GOOD) {
				n_good++;
			} else if (s->status == SCSI_STATUS_TASK_ABORTED) {
				n_aborted++;
			} else if (s->status == SCSI_STATUS_CHECK_CONDITION &&
				   s->key == SCSI_SENSE_UNIT_ATTENTION &&
				   s->ascq == UA_LU_RESET && !b_met) {
				n_ua++;
				b_met = true;
			} else {
				fprintf(stderr, "round %d: command %d of B: "
					"status 0x%x key %d asc/q 0x%04x\n",
					r, i, s->status, s->key, s->ascq);
				fails++;
			}
		}
		ua_b = tur(b, lunb);
		ua_a = tur(a, lun);
		if ((!b_met && ua_b != UA_LU_RESET) || (b_met && ua_b) ||
		    ua_a != UA_LU_RESET) {
			fprintf(stderr, "round %d: unit attentions after the "
				"reset: A 0x%x, B 0x%x (met: %d)\n", r, ua_a,
				ua_b, b_met);
			fails++;
		}
		if (tur(a, lun) || tur(b, lunb)) {
			fprintf(stderr, "round %d: TEST UNIT READY not GOOD "
				"after the unit attention\n", r);
			fails++;
		}
	}
	printf("rounds %d: good %u aborted %u unit-attention %u failures %d\n",
	       rounds, n_good, n_aborted, n_ua, fails);
	iscsi_logout_sync(a);
	iscsi_logout_sync(b);
	iscsi_destroy_context(a);
	iscsi_destroy_context(b);
	if (fails)
		return 1;
	if (!n_aborted) {
		fprintf(stderr, "iscsi_tmf: no command of B was in flight at a "
			"reset\n");
		return 3;
	}
	return 0;
}
