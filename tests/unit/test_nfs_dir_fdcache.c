/* SPDX-License-Identifier: MIT */
/*
 * The directory backend's descriptor cache, through the backend ops:
 * many READs and WRITEs of a file open it once; a file unlinked on the
 * host answers ESTALE and its fd is closed; REMOVE closes it at once;
 * more files than NFS_DIR_FD_CACHE keep at most that many fds open, the
 * least recently used going first; an fd in use is not closed by
 * eviction; an fd idle longer than trim() is given is closed, one in
 * use is not; threads share the cache; closing the backend closes all.
 * GETATTR of a cached file opens nothing either. The last close of an
 * unlinked file (which frees its blocks) is a worker's on a loop's
 * thread. Opens are counted by standing in for open_by_handle_at.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <blkstack/bdev.h>
#include <blkstack/loop.h>
#include <blkstack/workers.h>
#include <blkstack/write_same.h>

#include "export/nfs/nfs.h"
#include "helpers/th.h"

#define N NFS_DIR_FD_CACHE
#define NFILES (2 * N + 8)

static unsigned opens;

/* the test's own: counts the backend's opens by handle */
int open_by_handle_at(int mount_fd, struct file_handle *h, int flags)
{
	__atomic_add_fetch(&opens, 1, __ATOMIC_RELAXED);
	return (int)syscall(SYS_open_by_handle_at, mount_fd, h, flags);
}

static int nfds(void)
{
	DIR *dp = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	assert_non_null(dp);
	while ((e = readdir(dp)))
		n += e->d_name[0] != '.';
	closedir(dp);
	return n - 1;		/* dp's own */
}

struct fix {
	char dir[64];
	struct nfs_backend be;
	struct nfs_fh root;
	int fds0;		/* before the backend */
};

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));

	strcpy(f->dir, "/var/tmp/test_nfs_dir_fdcache.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->fds0 = nfds();
	if (nfs_backend_dir_open(&f->be, f->dir)) {
		rmdir(f->dir);
		free(f);
		skip();		/* no file handles here */
	}
	assert_int_equal(f->be.ops->root(&f->be, &f->root), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;
	char cmd[128];

	f->be.ops->close(&f->be);
	assert_int_equal(nfds(), f->fds0);	/* every cached fd closed */
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

/* file @name made on the host, its handle in @fh */
static void mk(struct fix *f, const char *name, struct nfs_fh *fh)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", f->dir, name);
	fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(f->be.ops->lookup(&f->be, &f->root, name, fh), 0);
}

static int rd(struct fix *f, const struct nfs_fh *fh, uint64_t off,
	      void *buf, size_t len)
{
	size_t n;
	bool eof;

	return f->be.ops->read(&f->be, fh, off, buf, len, &n, &eof);
}

static void one_open(void **state)
{
	struct fix *f = *state;
	uint8_t w[4096], r[4096];
	struct nfs_attr at;
	struct nfs_fh fh;
	size_t n;
	bool eof;

	mk(f, "a", &fh);
	opens = 0;
	for (unsigned i = 0; i < 100; i++) {
		th_fill(w, sizeof(w), i);
		assert_int_equal(f->be.ops->write(&f->be, &fh, i * 4096ull, w,
						  sizeof(w), false), 0);
		assert_int_equal(f->be.ops->read(&f->be, &fh, i * 4096ull, r,
						 sizeof(r), &n, &eof), 0);
		assert_int_equal(n, sizeof(r));
		assert_true(eof);
		assert_memory_equal(w, r, sizeof(w));
		assert_int_equal(f->be.ops->read_nowait(&f->be, &fh, 0, r,
							sizeof(r), &n, &eof),
				 0);
		assert_int_equal(f->be.ops->getattr(&f->be, &fh, &at), 0);
		assert_int_equal(at.size, (i + 1) * 4096ull);
	}
	assert_int_equal(f->be.ops->commit(&f->be, &fh), 0);
	assert_int_equal(opens, 1);
}

static void stale(void **state)
{
	struct fix *f = *state;
	uint8_t buf[512] = { 1 };
	struct nfs_attr at;
	struct nfs_fh fh, fr;
	char path[128];
	int fds;

	mk(f, "s", &fh);
	assert_int_equal(f->be.ops->write(&f->be, &fh, 0, buf, sizeof(buf),
					  false), 0);
	fds = nfds();
	snprintf(path, sizeof(path), "%s/s", f->dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rd(f, &fh, 0, buf, sizeof(buf)), -ESTALE);
	assert_int_equal(nfds(), fds - 1);	/* its space is free again */
	assert_int_equal(f->be.ops->write(&f->be, &fh, 0, buf, sizeof(buf),
					  false), -ESTALE);
	assert_int_equal(f->be.ops->commit(&f->be, &fh), -ESTALE);
	assert_int_equal(nfds(), fds - 1);

	/* a write with the file cached: not acknowledged once unlinked */
	mk(f, "w", &fh);
	assert_int_equal(rd(f, &fh, 0, buf, sizeof(buf)), 0);
	snprintf(path, sizeof(path), "%s/w", f->dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(f->be.ops->write(&f->be, &fh, 0, buf, sizeof(buf),
					  false), -ESTALE);

	/* GETATTR of a cached file unlinked on the host */
	mk(f, "g", &fh);
	assert_int_equal(rd(f, &fh, 0, buf, sizeof(buf)), 0);
	assert_int_equal(f->be.ops->getattr(&f->be, &fh, &at), 0);
	fds = nfds();
	snprintf(path, sizeof(path), "%s/g", f->dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(f->be.ops->getattr(&f->be, &fh, &at), -ESTALE);
	assert_int_equal(nfds(), fds - 1);

	/* REMOVE and RENAME over it through the backend close it at once */
	mk(f, "r", &fh);
	mk(f, "t", &fr);
	assert_int_equal(rd(f, &fh, 0, buf, sizeof(buf)), 0);
	assert_int_equal(rd(f, &fr, 0, buf, sizeof(buf)), 0);
	fds = nfds();
	assert_int_equal(f->be.ops->remove(&f->be, &f->root, "r"), 0);
	assert_int_equal(nfds(), fds - 1);
	mk(f, "u", &fh);
	assert_int_equal(f->be.ops->rename(&f->be, &f->root, "u", &f->root,
					   "t"), 0);
	assert_int_equal(nfds(), fds - 2);
	assert_int_equal(rd(f, &fr, 0, buf, sizeof(buf)), -ESTALE);
	assert_int_equal(rd(f, &fh, 0, buf, sizeof(buf)), 0);
}

static void bounded(void **state)
{
	struct fix *f = *state;
	static struct nfs_fh fh[NFILES];
	uint8_t buf[16];
	char name[16];
	int fds = nfds();

	for (unsigned i = 0; i < NFILES; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		mk(f, name, &fh[i]);
		assert_int_equal(rd(f, &fh[i], 0, buf, sizeof(buf)), 0);
		assert_true(nfds() - fds <= N);
	}
	assert_int_equal(nfds() - fds, N);
	/* the last N used stay; the first went */
	opens = 0;
	for (unsigned i = NFILES - N; i < NFILES; i++)
		assert_int_equal(rd(f, &fh[i], 0, buf, sizeof(buf)), 0);
	assert_int_equal(opens, 0);
	assert_int_equal(rd(f, &fh[0], 0, buf, sizeof(buf)), 0);
	assert_int_equal(opens, 1);
	assert_int_equal(nfds() - fds, N);
}

struct thrash {
	struct fix *f;
	struct nfs_fh *fh;
};

/* with the sink's fd in use: every other entry evicted twice over */
static int in_use_fn(void *arg, const struct bs_ws_sink *sink)
{
	struct thrash *t = arg;
	int fd = ((struct bs_ws_file_sink *)sink->arg)->fd;
	uint8_t buf[16];

	for (unsigned i = 0; i < NFILES; i++)
		assert_int_equal(rd(t->f, &t->fh[i], 0, buf, sizeof(buf)), 0);
	assert_int_equal(pwrite(fd, "still mine", 10, 0), 10);
	return 0;
}

static void in_use(void **state)
{
	struct fix *f = *state;
	static struct nfs_fh fh[NFILES];
	struct thrash t = { f, fh };
	struct nfs_fh u;
	char name[16], got[16] = "";

	for (unsigned i = 0; i < NFILES; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		mk(f, name, &fh[i]);
	}
	mk(f, "u", &u);
	assert_int_equal(f->be.ops->with_ws_sink(&f->be, &u, in_use_fn, &t),
			 0);
	assert_int_equal(rd(f, &u, 0, got, 10), 0);
	assert_memory_equal(got, "still mine", 10);
	/* evicted now that it is free: the cache stays bounded */
	for (unsigned i = 0; i < NFILES; i++)
		assert_int_equal(rd(f, &fh[i], 0, name, 1), 0);
}

/* trim() called while the sink's fd is in use: it must stay open */
static int trim_in_use_fn(void *arg, const struct bs_ws_sink *sink)
{
	struct fix *f = arg;
	int fd = ((struct bs_ws_file_sink *)sink->arg)->fd;

	f->be.ops->trim(&f->be, 0);
	return pwrite(fd, "in use", 6, 0) == 6 ? 0 : -EIO;
}

/* trim(): an fd idle that long is closed (the next call opens again),
 * a younger one and one in use are kept */
static void idle_closed(void **state)
{
	struct fix *f = *state;
	struct nfs_fh fh;
	char got[8] = "";
	int n0;

	mk(f, "t", &fh);
	n0 = nfds();
	opens = 0;
	assert_int_equal(rd(f, &fh, 0, got, 1), 0);
	assert_int_equal(nfds(), n0 + 1);
	f->be.ops->trim(&f->be, 60000);		/* used just now: kept */
	assert_int_equal(nfds(), n0 + 1);
	assert_int_equal(rd(f, &fh, 0, got, 1), 0);
	assert_int_equal(opens, 1);
	usleep(20000);
	f->be.ops->trim(&f->be, 10);		/* idle 20 ms: closed */
	assert_int_equal(nfds(), n0);
	assert_int_equal(rd(f, &fh, 0, got, 1), 0);
	assert_int_equal(opens, 2);
	assert_int_equal(f->be.ops->with_ws_sink(&f->be, &fh, trim_in_use_fn,
						 f), 0);
	assert_int_equal(rd(f, &fh, 0, got, 6), 0);
	assert_memory_equal(got, "in use", 6);
	f->be.ops->trim(&f->be, 0);
	assert_int_equal(nfds(), n0);
}

#define NTHREADS 4
#define NSHARED (N + N / 4)

struct worker {
	struct fix *f;
	struct nfs_fh *fh;
	unsigned id;
};

/* each thread its own 4 KiB of every file: written, read back */
static void *run(void *arg)
{
	struct worker *w = arg;
	uint8_t b[4096], r[4096];
	size_t n;
	bool eof;

	for (unsigned i = 0; i < 400; i++) {
		const struct nfs_fh *fh = &w->fh[(i * 7 + w->id) % NSHARED];
		uint64_t off = w->id * 4096ull;

		th_fill(b, sizeof(b), i * NTHREADS + w->id);
		if (w->f->be.ops->write(&w->f->be, fh, off, b, sizeof(b),
					false) ||
		    w->f->be.ops->read(&w->f->be, fh, off, r, sizeof(r), &n,
				       &eof) ||
		    n != sizeof(r) || memcmp(b, r, sizeof(b)))
			return (void *)1;
	}
	return NULL;
}

static void threads(void **state)
{
	struct fix *f = *state;
	static struct nfs_fh fh[NSHARED];
	struct worker w[NTHREADS];
	pthread_t tid[NTHREADS];
	char name[16];
	int fds = nfds();

	for (unsigned i = 0; i < NSHARED; i++) {
		snprintf(name, sizeof(name), "m%u", i);
		mk(f, name, &fh[i]);
	}
	for (unsigned i = 0; i < NTHREADS; i++) {
		w[i] = (struct worker){ f, fh, i };
		assert_int_equal(pthread_create(&tid[i], NULL, run, &w[i]), 0);
	}
	for (unsigned i = 0; i < NTHREADS; i++) {
		void *ret;

		assert_int_equal(pthread_join(tid[i], &ret), 0);
		assert_null(ret);
	}
	assert_true(nfds() - fds <= N);
}

/* fds of this process open on @name of the test's directory, unlinked */
static int open_unlinked(struct fix *f, const char *name)
{
	DIR *dp = opendir("/proc/self/fd");
	char want[160], link[256], path[300];
	struct dirent *e;
	int n = 0;

	assert_non_null(dp);
	snprintf(want, sizeof(want), "%s/%s (deleted)", f->dir, name);
	while ((e = readdir(dp))) {
		ssize_t l;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		l = readlink(path, link, sizeof(link) - 1);
		if (l < 0)
			continue;
		link[l] = 0;
		n += !strcmp(link, want);
	}
	closedir(dp);
	return n;
}

/* run the context's loop until its workers have nothing pending */
static void drain(struct bs_ctx *ctx, struct bs_workers *w)
{
	for (unsigned i = 0; i < 500 && bs_workers_pending(w); i++)
		bs_loop_run_once(bs_ctx_loop(ctx), 10);
	assert_int_equal(bs_workers_pending(w), 0);
}

/* @name written (64 KiB: it holds blocks), cached, then unlinked */
static void written_unlinked(struct fix *f, const char *name,
			     struct nfs_fh *fh)
{
	uint8_t buf[65536];
	char path[128];

	memset(buf, 7, sizeof(buf));
	mk(f, name, fh);
	assert_int_equal(f->be.ops->write(&f->be, fh, 0, buf, sizeof(buf),
					  false), 0);
	snprintf(path, sizeof(path), "%s/%s", f->dir, name);
	assert_int_equal(unlink(path), 0);
}

/*
 * The last close of a file unlinked meanwhile frees its blocks: on a
 * loop's thread a worker does it, whether the entry goes with its last
 * user or with the idle trim; a file that holds no blocks closes at
 * once, as does any entry on a thread that runs no loop (stale above).
 */
static void unlinked_closed_by_worker(void **state)
{
	struct fix *f = *state;
	uint8_t buf[512];
	struct bs_workers *w;
	struct bs_ctx *ctx;
	struct nfs_attr at;
	struct nfs_fh fh;
	char path[128];

	assert_int_equal(bs_ctx_new(&ctx), 0);
	assert_non_null(bs_loop_current());	/* this thread runs its loop */
	w = bs_ctx_workers(ctx);
	assert_non_null(w);
	f->be.ctx = ctx;

	/* (counted by name: the pool's threads open fds of their own) */
	written_unlinked(f, "a", &fh);
	assert_int_equal(open_unlinked(f, "a"), 1);
	assert_int_equal(f->be.ops->getattr(&f->be, &fh, &at), -ESTALE);
	/* handed to a worker (which may have closed it already) */
	assert_int_equal(bs_workers_pending(w), 1);
	drain(ctx, w);
	assert_int_equal(open_unlinked(f, "a"), 0);

	written_unlinked(f, "b", &fh);
	f->be.ops->trim(&f->be, 0);
	assert_int_equal(bs_workers_pending(w), 1);
	drain(ctx, w);
	assert_int_equal(open_unlinked(f, "b"), 0);

	/* empty: nothing to free, closed here */
	mk(f, "c", &fh);
	assert_int_equal(rd(f, &fh, 0, buf, sizeof(buf)), 0);
	snprintf(path, sizeof(path), "%s/c", f->dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(f->be.ops->getattr(&f->be, &fh, &at), -ESTALE);
	assert_int_equal(bs_workers_pending(w), 0);
	assert_int_equal(open_unlinked(f, "c"), 0);

	f->be.ctx = NULL;
	bs_ctx_free(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(one_open, setup, teardown),
		cmocka_unit_test_setup_teardown(stale, setup, teardown),
		cmocka_unit_test_setup_teardown(bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(in_use, setup, teardown),
		cmocka_unit_test_setup_teardown(idle_closed, setup, teardown),
		cmocka_unit_test_setup_teardown(threads, setup, teardown),
		cmocka_unit_test_setup_teardown(unlinked_closed_by_worker,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
