/*
 * nfsio: a bounded NFSv4 I/O workload on libnfs's asynchronous API, for
 * bench/nfs_rw.sh. A third-party client (libnfs), so that blkstackd's NFS
 * server and nfs-ganesha are driven by the same peer.
 *
 *   nfsio [-m seq|rand] [-o read|write] [-b BS] [-q QD] [-s SIZE]
 *         [-t SECONDS] [-n OPS] [-S SEED] [-V] [-C] URL
 *
 * URL is libnfs's: nfs://HOST/DIR/FILE?version=4&nfsport=PORT. Reads need
 * the file to hold SIZE bytes; a write creates it. QD requests are kept in
 * flight until SECONDS have passed or OPS were issued (the first bound
 * wins); a write ends with a COMMIT (libnfs writes UNSTABLE4), counted in
 * the elapsed time. -V: writes store a pattern that depends on the byte's
 * offset only, reads check it (so any mix of verified writes leaves a
 * file that verified reads accept; SEED only draws the random offsets).
 * -C: sequential I/O stops after one pass over the file instead of
 * wrapping.
 *
 * Prints one line of KEY=VALUE pairs on stdout, e.g.
 *   nfsio mode=rand op=read bs=4096 qd=16 ops=... bytes=... seconds=...
 *   iops=... mibs=... p50_us=... p99_us=... commit_ms=... errors=0
 * Exit status 0 when every request succeeded (and verified), 1 otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs4.h>	/* NFS_V4 */

#ifdef NFSIO_GROW_COMPOUND
#include <dlfcn.h>

/*
 * libnfs 4.0 (Debian 12's) encodes a v4 COMPOUND into a buffer of 4 KiB
 * plus an allocation hint that its WRITE path leaves at 0: every WRITE
 * of about 4000 bytes or more fails with "Failed to encode COMPOUND4args"
 * before it is sent (also why its nfs-cp cannot copy 4 KiB files over
 * v4). Later libnfs sends WRITE data from the caller's buffer instead.
 * This build (NFSIO_GROW_COMPOUND, set by build-nfsio.sh for libnfs 4.x)
 * takes the library's exported rpc_allocate_pdu2 in front of it, which
 * its own calls reach through the PLT, and adds compound_extra bytes to
 * the hint of NFS4 COMPOUND calls. Nothing else in libnfs changes.
 */
#define NFS4_PROGRAM_NUMBER 100003
#define NFS4_PROC_COMPOUND 1

static size_t compound_extra;

typedef void *(*alloc_pdu2_fn)(void *rpc, int program, int version, int procedure,
			       void *cb, void *private_data, void *decode_fn,
			       int decode_bufsize, size_t alloc_hint);

void *rpc_allocate_pdu2(void *rpc, int program, int version, int procedure,
			void *cb, void *private_data, void *decode_fn,
			int decode_bufsize, size_t alloc_hint);

void *rpc_allocate_pdu2(void *rpc, int program, int version, int procedure,
			void *cb, void *private_data, void *decode_fn,
			int decode_bufsize, size_t alloc_hint)
{
	static alloc_pdu2_fn real;
	void *sym;

	if (!real) {
		sym = dlsym(RTLD_NEXT, "rpc_allocate_pdu2");
		if (!sym)
			return NULL;
		memcpy(&real, &sym, sizeof(real));
	}
	if (program == NFS4_PROGRAM_NUMBER && version == 4 &&
	    procedure == NFS4_PROC_COMPOUND)
		alloc_hint += compound_extra;
	return real(rpc, program, version, procedure, cb, private_data,
		    decode_fn, decode_bufsize, alloc_hint);
}

static void grow_compound(uint64_t bytes)
{
	compound_extra = bytes;
}
#else
static void grow_compound(uint64_t bytes)
{
	(void)bytes;
}
#endif

/* draining the requests in flight after the time bound, at most */
#define DRAIN_SECONDS 60

struct job {
	bool rand, write, verify, once;
	uint64_t bs, size, max_ops, seed;
	unsigned qd;
	double seconds;
};

struct slot {
	struct run *run;
	uint8_t *buf;
	uint64_t off;
	uint64_t t0;
	bool busy;
};

struct run {
	const struct job *job;
	struct nfs_context *nfs;
	struct nfsfh *fh;
	struct slot *slots;
	uint64_t issued, done, bytes, errors, next_seq, rng;
	uint32_t *lat_us;	/* one per completed request */
	uint64_t lat_cap;
	unsigned inflight;
	bool stop;
	int commit_err;
	bool commit_done;
	const char *first_error;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

/* The word at byte offset OFF (a multiple of 8) of a verified file
 * (KEY 0), or of an unverified write's buffer (another KEY). */
#define VERIFY_KEY 0
static uint64_t pattern_word(uint64_t off, uint64_t key)
{
	uint64_t x = (off >> 3) ^ (key * 0x9e3779b97f4a7c15ull);

	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 29;
	return x;
}

static void pattern_fill(uint8_t *buf, uint64_t off, uint64_t len, uint64_t key)
{
	uint64_t i, w;

	for (i = 0; i < len; i += 8) {
		w = pattern_word(off + i, key);
		memcpy(buf + i, &w, 8);
	}
}

static bool pattern_check(const uint8_t *buf, uint64_t off, uint64_t len)
{
	uint64_t i, w;

	for (i = 0; i < len; i += 8) {
		w = pattern_word(off + i, VERIFY_KEY);
		if (memcmp(buf + i, &w, 8) != 0)
			return false;
	}
	return true;
}

static uint64_t parse_size(const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return 0;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: break;
	}
	return *end ? 0 : v;
}

static void fail(struct run *r, const char *what)
{
	r->errors++;
	if (!r->first_error)
		r->first_error = what;
	r->stop = true;
}

static void record(struct run *r, struct slot *s)
{
	uint64_t us = (now_ns() - s->t0) / 1000;
	uint32_t *n;

	if (r->done >= r->lat_cap) {
		r->lat_cap = r->lat_cap ? r->lat_cap * 2 : 65536;
		n = realloc(r->lat_us, r->lat_cap * sizeof(*n));
		if (!n) {
			fail(r, "out of memory for latencies");
			return;
		}
		r->lat_us = n;
	}
	r->lat_us[r->done] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

static int issue(struct run *r, struct slot *s);

static void io_done(int status, struct nfs_context *nfs, void *data, void *priv)
{
	struct slot *s = priv;
	struct run *r = s->run;
	const struct job *j = r->job;

	(void)nfs;
	s->busy = false;
	r->inflight--;
	record(r, s);
	r->done++;
	if (status < 0) {
		fprintf(stderr, "nfsio: %s at %" PRIu64 ": %s\n",
			j->write ? "write" : "read", s->off,
			data ? (const char *)data : strerror(-status));
		fail(r, "request failed");
	} else if ((uint64_t)status != j->bs) {
		fprintf(stderr, "nfsio: short %s at %" PRIu64 ": %d of %" PRIu64 "\n",
			j->write ? "write" : "read", s->off, status, j->bs);
		fail(r, "short transfer");
	} else {
		r->bytes += j->bs;
		if (!j->write && j->verify && !pattern_check(data, s->off, j->bs)) {
			fprintf(stderr, "nfsio: wrong data read at %" PRIu64 "\n", s->off);
			fail(r, "wrong data");
		}
	}
	if (!r->stop)
		issue(r, s);
}

static int issue(struct run *r, struct slot *s)
{
	const struct job *j = r->job;
	uint64_t blocks = j->size / j->bs;
	int rc;

	if (r->stop || r->issued >= j->max_ops)
		return 0;
	if (j->rand) {
		s->off = (xorshift(&r->rng) % blocks) * j->bs;
	} else {
		if (r->next_seq >= blocks) {
			if (j->once)
				return 0;
			r->next_seq = 0;
		}
		s->off = r->next_seq++ * j->bs;
	}
	if (j->write && j->verify)
		pattern_fill(s->buf, s->off, j->bs, VERIFY_KEY);
	s->t0 = now_ns();
	if (j->write)
		rc = nfs_pwrite_async(r->nfs, r->fh, s->off, j->bs, s->buf, io_done, s);
	else
		rc = nfs_pread_async(r->nfs, r->fh, s->off, j->bs, io_done, s);
	if (rc < 0) {
		fprintf(stderr, "nfsio: queueing a request: %s\n", nfs_get_error(r->nfs));
		fail(r, "queueing failed");
		return rc;
	}
	s->busy = true;
	r->inflight++;
	r->issued++;
	return 0;
}

static void commit_done(int status, struct nfs_context *nfs, void *data, void *priv)
{
	struct run *r = priv;

	(void)nfs;
	r->commit_done = true;
	r->commit_err = status;
	if (status < 0)
		fprintf(stderr, "nfsio: commit: %s\n",
			data ? (const char *)data : strerror(-status));
}

/* One turn of the event loop: wait up to MS for the socket. */
static int service(struct nfs_context *nfs, int ms)
{
	struct pollfd p = { .fd = nfs_get_fd(nfs), .events = (short)nfs_which_events(nfs) };
	int n = poll(&p, 1, ms);

	if (n < 0 && errno != EINTR)
		return -errno;
	if (nfs_service(nfs, n > 0 ? p.revents : 0) < 0)
		return -EIO;
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

static uint32_t percentile(const uint32_t *v, uint64_t n, double p)
{
	uint64_t i;

	if (!n)
		return 0;
	i = (uint64_t)(p * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}

static void usage(void)
{
	fprintf(stderr, "usage: nfsio [-m seq|rand] [-o read|write] [-b BS] [-q QD] "
		"[-s SIZE] [-t SECONDS] [-n OPS] [-S SEED] [-V] [-C] URL\n"
		"  URL: nfs://HOST/DIR/FILE?version=4&nfsport=PORT\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct job j = { .bs = 4096, .qd = 1, .size = 1ull << 30, .seconds = 10,
			 .max_ops = UINT64_MAX, .seed = 1 };
	struct run r = { .job = &j };
	struct nfs_url *url = NULL;
	uint64_t t_start, t_io_end, t_end, deadline, k;
	int c, rc, status = 1;

	while ((c = getopt(argc, argv, "m:o:b:q:s:t:n:S:VC")) != -1) {
		switch (c) {
		case 'm':
			if (strcmp(optarg, "rand") && strcmp(optarg, "seq"))
				usage();
			j.rand = !strcmp(optarg, "rand");
			break;
		case 'o':
			if (strcmp(optarg, "read") && strcmp(optarg, "write"))
				usage();
			j.write = !strcmp(optarg, "write");
			break;
		case 'b': j.bs = parse_size(optarg); break;
		case 'q': j.qd = (unsigned)atoi(optarg); break;
		case 's': j.size = parse_size(optarg); break;
		case 't': j.seconds = atof(optarg); break;
		case 'n': j.max_ops = strtoull(optarg, NULL, 10); break;
		case 'S': j.seed = strtoull(optarg, NULL, 10); break;
		case 'V': j.verify = true; break;
		case 'C': j.once = true; break;
		default: usage();
		}
	}
	if (optind != argc - 1 || !j.bs || j.bs % 8 || j.qd < 1 || j.qd > 1024 ||
	    j.size < j.bs || j.seconds <= 0 || j.seconds > 3600 || !j.max_ops)
		usage();
	r.rng = j.seed * 0x2545f4914f6cdd1dull + 1;

	r.nfs = nfs_init_context();
	if (!r.nfs) {
		fprintf(stderr, "nfsio: no libnfs context\n");
		return 1;
	}
	url = nfs_parse_url_full(r.nfs, argv[optind]);
	if (!url) {
		fprintf(stderr, "nfsio: %s: %s\n", argv[optind], nfs_get_error(r.nfs));
		goto out;
	}
	nfs_set_version(r.nfs, NFS_V4);
	nfs_set_autoreconnect(r.nfs, 0);
	nfs_set_timeout(r.nfs, 30000);
	if (nfs_mount(r.nfs, url->server, url->path) < 0) {
		fprintf(stderr, "nfsio: mount %s:%s: %s\n", url->server, url->path,
			nfs_get_error(r.nfs));
		goto out;
	}
	if (j.write) {
		/* libnfs 4.0's v4 O_CREAT is a GUARDED create: EEXIST for a file
		 * that is there */
		rc = nfs_open(r.nfs, url->file, O_WRONLY, &r.fh);
		if (rc == -ENOENT)
			rc = nfs_open2(r.nfs, url->file, O_WRONLY | O_CREAT, 0644, &r.fh);
	} else
		rc = nfs_open(r.nfs, url->file, O_RDONLY, &r.fh);
	if (rc < 0) {
		fprintf(stderr, "nfsio: open %s: %s\n", url->file, nfs_get_error(r.nfs));
		goto out;
	}
	if (j.write)
		grow_compound(j.bs + 1024);
	r.slots = calloc(j.qd, sizeof(*r.slots));
	if (!r.slots)
		goto out;
	for (k = 0; k < j.qd; k++) {
		r.slots[k].run = &r;
		if (j.write) {
			r.slots[k].buf = malloc(j.bs);
			if (!r.slots[k].buf)
				goto out;
			/* not zeroes (a server may treat those apart) */
			pattern_fill(r.slots[k].buf, k * j.bs, j.bs, j.seed + 1);
		}
	}

	t_start = now_ns();
	deadline = t_start + (uint64_t)(j.seconds * 1e9);
	for (k = 0; k < j.qd; k++)
		issue(&r, &r.slots[k]);
	while (r.inflight) {
		if (!r.stop && now_ns() >= deadline)
			r.stop = true;
		if (now_ns() >= deadline + DRAIN_SECONDS * 1000000000ull) {
			fprintf(stderr, "nfsio: %u requests still in flight %d s after the "
				"time bound\n", r.inflight, DRAIN_SECONDS);
			fail(&r, "requests hung");
			goto out;
		}
		if (service(r.nfs, 100) < 0) {
			fprintf(stderr, "nfsio: %s\n", nfs_get_error(r.nfs));
			fail(&r, "connection failed");
			goto out;
		}
	}
	t_io_end = now_ns();
	if (j.write && !r.errors) {
		if (nfs_fsync_async(r.nfs, r.fh, commit_done, &r) < 0) {
			fail(&r, "commit not queued");
		} else {
			while (!r.commit_done && now_ns() < t_io_end + DRAIN_SECONDS * 1000000000ull)
				if (service(r.nfs, 100) < 0)
					break;
			if (!r.commit_done || r.commit_err < 0)
				fail(&r, "commit failed");
		}
	}
	t_end = now_ns();

	qsort(r.lat_us, r.done, sizeof(*r.lat_us), cmp_u32);
	{
		double secs = (double)(t_end - t_start) / 1e9;

		printf("nfsio mode=%s op=%s bs=%" PRIu64 " qd=%u size=%" PRIu64
		       " ops=%" PRIu64 " bytes=%" PRIu64 " seconds=%.3f iops=%.0f"
		       " mibs=%.1f p50_us=%u p99_us=%u commit_ms=%.1f errors=%" PRIu64
		       " verified=%s\n",
		       j.rand ? "rand" : "seq", j.write ? "write" : "read", j.bs, j.qd,
		       j.size, r.done, r.bytes, secs, (double)r.done / secs,
		       (double)r.bytes / 1048576.0 / secs,
		       percentile(r.lat_us, r.done, 0.50), percentile(r.lat_us, r.done, 0.99),
		       (double)(t_end - t_io_end) / 1e6, r.errors,
		       j.verify ? (r.errors ? "no" : "yes") : "-");
	}
	status = r.errors ? 1 : 0;
	if (r.first_error)
		fprintf(stderr, "nfsio: %s\n", r.first_error);
out:
	if (r.fh && !r.inflight)
		nfs_close(r.nfs, r.fh);
	if (url)
		nfs_destroy_url(url);
	/* first: it completes what is still in flight (cancelled), into slots */
	nfs_destroy_context(r.nfs);
	if (r.slots)
		for (k = 0; k < j.qd; k++)
			free(r.slots[k].buf);
	free(r.slots);
	free(r.lat_us);
	return status;
}
