/* SPDX-License-Identifier: MIT */
/*
 * `blkstack nfs`: a small NFS v4.1/v4.2 client (lib/nfsclient/) for
 * looking at and changing files on an NFS server: ls, cat, put, rm,
 * fallocate (ALLOCATE, DEALLOCATE, written zeroes) and write-same. Written
 * zeroes and write-same send WRITE_SAME; where the server lacks it they
 * run bs_write_same() here, sending WRITEs, and say so.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <blkstack/bdev.h>
#include <blkstack/cmd.h>
#include <blkstack/nfsclient.h>
#include <blkstack/write_same.h>

#include "cmd/internal.h"

struct nfs_ctx {
	struct bs_cmd_env *env;
	const char *sub;		/* "put" */
	const char *url;
	struct bs_nfs_url u;
	struct bs_nfs *nfs;
	unsigned minor;			/* --minor */
	char op[64];			/* "nfs put", for error lines */
};

static int fail(struct nfs_ctx *c, int err)
{
	return bs_cmd_fail(c->env, c->url, c->op, err);
}

static int bad_option(struct nfs_ctx *c, char **argv, int ch)
{
	return cmd_bad_option(c->env, "nfs", argv, ch);
}

/* Parse the URL at argv[optind + @idx] and connect. */
static int connect_url(struct nfs_ctx *c, const char *url)
{
	struct bs_nfs_opts o = { .minor = c->minor };
	int err;

	c->url = url;
	snprintf(c->op, sizeof(c->op), "nfs %s", c->sub);
	if ((err = bs_nfs_url_parse(url, &c->u))) {
		cmd_usage(c->env, "nfs", "%s", bs_last_error());
		return CMD_USAGE;
	}
	err = bs_nfs_connect(c->u.host, c->u.port, &o, &c->nfs);
	if (err)
		return fail(c, err);
	return 0;
}

static int done(struct nfs_ctx *c, int rc)
{
	bs_nfs_disconnect(c->nfs);
	c->nfs = NULL;
	return rc;
}

static int want_args(struct nfs_ctx *c, int argc, int n, const char *what)
{
	if (argc - optind != n)
		return cmd_usage(c->env, "nfs", "nfs %s: %s %s", c->sub,
				 argc - optind < n ? "missing arguments; want"
						   : "too many arguments; want",
				 what);
	return 0;
}

static const char *type_name(uint32_t type)
{
	switch (type) {
	case BS_NFS_REG: return "file";
	case BS_NFS_DIR: return "dir";
	case BS_NFS_LNK: return "link";
	}
	return "other";
}

/* ---- ls -------------------------------------------------------------------- */

static void print_entry(FILE *f, const char *name,
			const struct bs_nfs_attr *a)
{
	fprintf(f, "%-5s %04o %12" PRIu64 " %12" PRIu64 "  %s\n",
		type_name(a->type), a->mode & 07777, a->size, a->space_used,
		name);
}

static int ls_cb(void *arg, const char *name, const struct bs_nfs_attr *a)
{
	print_entry(arg, name, a);
	return 0;
}

static int sub_ls(struct nfs_ctx *c, int argc, char **argv)
{
	struct bs_nfs_attr a;
	struct bs_nfs_fh fh;
	int ch, err, rc;

	while ((ch = getopt(argc, argv, "+:")) != -1)
		return bad_option(c, argv, ch);
	if ((err = want_args(c, argc, 1, "URL")))
		return err;
	if ((rc = connect_url(c, argv[optind])))
		return rc;
	err = bs_nfs_lookup(c->nfs, c->u.path, &fh, &a);
	if (!err && a.type == BS_NFS_DIR)
		err = bs_nfs_readdir(c->nfs, &fh, ls_cb, c->env->out);
	else if (!err)
		print_entry(c->env->out, *c->u.path ? c->u.path : "/", &a);
	return done(c, err ? fail(c, err) : CMD_OK);
}

/* ---- cat ------------------------------------------------------------------- */

static int sub_cat(struct nfs_ctx *c, int argc, char **argv)
{
	struct bs_nfs_file f;
	uint64_t off = 0;
	uint8_t *buf = NULL;
	bool eof = false;
	int ch, err, rc;

	while ((ch = getopt(argc, argv, "+:")) != -1)
		return bad_option(c, argv, ch);
	if ((err = want_args(c, argc, 1, "URL")))
		return err;
	if ((rc = connect_url(c, argv[optind])))
		return rc;
	err = bs_nfs_open(c->nfs, c->u.path, 0, &f);
	if (!err && !(buf = malloc(bs_nfs_io_max(c->nfs))))
		err = bs_error(-ENOMEM, "no memory");
	while (!err && !eof) {
		int64_t n = bs_nfs_read(c->nfs, &f, buf, bs_nfs_io_max(c->nfs),
					off, &eof);

		if (n < 0) {
			err = (int)n;
			break;
		}
		if (n == 0 && !eof) {
			err = bs_error(-EIO, "READ at %" PRIu64 " returned "
				       "nothing before the end", off);
			break;
		}
		if (fwrite(buf, 1, (size_t)n, c->env->out) != (size_t)n)
			err = bs_error(-EIO, "writing to stdout failed");
		off += (uint64_t)n;
	}
	free(buf);
	if (!err)
		err = bs_nfs_close(c->nfs, &f);
	else
		bs_nfs_close(c->nfs, &f);
	return done(c, err ? fail(c, err) : CMD_OK);
}

/* ---- put ------------------------------------------------------------------- */

static int sub_put(struct nfs_ctx *c, int argc, char **argv)
{
	struct bs_nfs_file f = { .open = false };
	uint8_t verf[8], first[8];
	bool have_verf = false;
	uint64_t off = 0;
	uint8_t *buf = NULL;
	int ch, err, rc, fd;
	const char *src;

	while ((ch = getopt(argc, argv, "+:")) != -1)
		return bad_option(c, argv, ch);
	if ((err = want_args(c, argc, 2, "HOSTFILE URL")))
		return err;
	src = argv[optind];
	fd = strcmp(src, "-") ? open(src, O_RDONLY | O_CLOEXEC) : 0;
	if (fd < 0) {
		snprintf(c->op, sizeof(c->op), "nfs put");
		err = bs_error(-errno, "cannot open %s: %m", src);
		return bs_cmd_fail(c->env, src, c->op, err);
	}
	if ((rc = connect_url(c, argv[optind + 1]))) {
		if (fd)
			close(fd);
		return rc;
	}
	err = bs_nfs_open(c->nfs, c->u.path, BS_NFS_OPEN_WRITE |
			  BS_NFS_OPEN_CREATE | BS_NFS_OPEN_TRUNC, &f);
	if (!err && !(buf = malloc(bs_nfs_io_max(c->nfs))))
		err = bs_error(-ENOMEM, "no memory");
	while (!err) {
		ssize_t n = read(fd, buf, bs_nfs_io_max(c->nfs));
		ssize_t done_n = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = bs_error(-errno, "reading %s: %m", src);
			break;
		}
		if (n == 0)
			break;
		while (!err && done_n < n) {
			int64_t w = bs_nfs_write(c->nfs, &f, buf + done_n,
						 (uint32_t)(n - done_n),
						 off, BS_NFS_UNSTABLE, NULL,
						 verf);

			if (w <= 0) {
				err = w < 0 ? (int)w
					    : bs_error(-EIO, "WRITE wrote 0");
				break;
			}
			if (!have_verf) {
				memcpy(first, verf, 8);
				have_verf = true;
			} else if (memcmp(first, verf, 8)) {
				err = bs_error(-EIO, "the server restarted "
					       "during the copy (write "
					       "verifier changed)");
			}
			done_n += w;
			off += (uint64_t)w;
		}
	}
	if (!err && f.open) {
		err = bs_nfs_commit(c->nfs, &f, 0, 0, verf);
		if (!err && have_verf && memcmp(first, verf, 8))
			err = bs_error(-EIO, "the server restarted before "
				       "COMMIT (write verifier changed)");
	}
	free(buf);
	if (fd)
		close(fd);
	if (!err)
		err = bs_nfs_close(c->nfs, &f);
	else
		bs_nfs_close(c->nfs, &f);
	return done(c, err ? fail(c, err) : CMD_OK);
}

/* ---- rm -------------------------------------------------------------------- */

static int sub_rm(struct nfs_ctx *c, int argc, char **argv)
{
	int ch, err, rc;

	while ((ch = getopt(argc, argv, "+:")) != -1)
		return bad_option(c, argv, ch);
	if ((err = want_args(c, argc, 1, "URL")))
		return err;
	if ((rc = connect_url(c, argv[optind])))
		return rc;
	err = bs_nfs_remove(c->nfs, c->u.path);
	return done(c, err ? fail(c, err) : CMD_OK);
}

/* ---- write same (also fallocate -w) ----------------------------------------- */

struct ws_req {
	struct bs_ws_adb adb;
	bool force_fallback;
	bool no_fallback;
	bool unstable;
	bool no_check;		/* send even a malformed description */
};

static double secs_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) +
	       (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

static const char *stable_name(enum bs_nfs_stable s)
{
	switch (s) {
	case BS_NFS_FILE_SYNC: return "FILE_SYNC";
	case BS_NFS_DATA_SYNC: return "DATA_SYNC";
	case BS_NFS_UNSTABLE: break;
	}
	return "UNSTABLE";
}

/*
 * WRITE_SAME, else the local function with WRITEs. Prints one line:
 *   "write-same: server WRITE_SAME: 10737418240 bytes at 0 (FILE_SYNC) in 0.05 s"
 *   "write-same: fallback (NFS4ERR_NOTSUPP): bs_write_same here, zero-writes by
 *    WRITE + COMMIT: ... bytes at 0 in 1.2 s"
 */
/*
 * The server's WRITE_SAME, as many requests as it takes: a server may
 * make fewer bytes than asked (this one bounds pattern blocks per
 * request), whole blocks, and the rest goes in the next request, its
 * first block numbered on. -EOPNOTSUPP (the fallback's turn) only when
 * the first request was refused that way.
 */
static int server_write_same(struct nfs_ctx *c, struct bs_nfs_file *f,
			     const struct ws_req *r,
			     enum bs_nfs_stable want, const char *label,
			     const struct timespec *t0)
{
	enum bs_nfs_stable committed = BS_NFS_FILE_SYNC, got;
	uint64_t size = r->adb.block_size * r->adb.block_count, done = 0;
	struct bs_ws_adb rest = r->adb;
	unsigned calls = 0;
	uint8_t verf[8];
	int err;

	do {
		uint64_t count = 0, blocks;

		err = bs_nfs_write_same(c->nfs, f, &rest, want, &count, &got,
					verf);
		if (err)
			return calls && err == -EOPNOTSUPP ? -EIO : err;
		calls++;
		if (got == BS_NFS_UNSTABLE)
			committed = BS_NFS_UNSTABLE;
		if (count > size - done || count % rest.block_size ||
		    (!count && size))
			return bs_error(-EIO, "the server wrote %" PRIu64
					" of %" PRIu64 " bytes (its answer "
					"to request %u: %" PRIu64 " bytes, not "
					"whole blocks of what was left)",
					done, size, calls, count);
		done += count;
		blocks = count / rest.block_size;
		rest.offset += count;
		rest.block_count -= blocks;
		rest.block_num += blocks;
	} while (done < size);
	fprintf(c->env->out, "%s: server WRITE_SAME: %" PRIu64 " bytes at %"
		PRIu64 " (%s) in %.3f s", label, done, r->adb.offset,
		stable_name(committed), secs_since(t0));
	if (calls > 1)
		fprintf(c->env->out, " (%u requests)", calls);
	fputc('\n', c->env->out);
	return 0;
}

static int write_same(struct nfs_ctx *c, struct bs_nfs_file *f,
		      const struct ws_req *r, const char *label)
{
	enum bs_nfs_stable want = r->unstable ? BS_NFS_UNSTABLE
					      : BS_NFS_FILE_SYNC;
	struct bs_nfs_ws_sink ns;
	struct bs_ws_result res;
	struct bs_ws_sink sink;
	struct timespec t0;
	char why[64];
	int err;

	/* the checks first: a malformed description is the user's error
	 * (--no-check sends it anyway, to see what the server answers) */
	if (!r->no_check && (err = bs_ws_check(&r->adb, 0)))
		return err;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (!r->force_fallback) {
		err = server_write_same(c, f, r, want, label, &t0);
		if (err != -EOPNOTSUPP || r->no_fallback)
			return err;
		snprintf(why, sizeof(why), "%s",
			 bs_nfs_status_name(bs_nfs_last_status(c->nfs)));
		if (bs_nfs_last_status(c->nfs) == 10021u)
			snprintf(why, sizeof(why), "minor version 2 refused");
	} else {
		snprintf(why, sizeof(why), "--fallback");
	}
	bs_error_clear();
	bs_nfs_ws_sink_init(&sink, &ns, c->nfs, f);
	err = bs_write_same(&r->adb, &sink, !r->unstable, &res);
	if (err)
		return err;
	fprintf(c->env->out, "%s: fallback (%s): WRITE_SAME done here, %s "
		"by WRITE%s: %" PRIu64 " bytes at %" PRIu64 " (%s) in %.3f s\n",
		label, why, bs_ws_path_name(res.path),
		r->unstable ? "" : " + COMMIT", res.bytes, r->adb.offset,
		res.committed ? "FILE_SYNC" : "UNSTABLE", secs_since(&t0));
	return 0;
}

static int parse_hex(struct nfs_ctx *c, const char *s, uint8_t **out,
		     uint32_t *len)
{
	size_t n = strlen(s), i;
	uint8_t *p;

	if (!strncmp(s, "0x", 2) || !strncmp(s, "0X", 2)) {
		s += 2;
		n -= 2;
	}
	if (!n || n % 2 || n / 2 > (1u << 20))
		return cmd_usage(c->env, "nfs", "--pattern: an even number "
				 "of hex digits, at most 1 MiB, please");
	p = malloc(n / 2);
	if (!p)
		return cmd_usage(c->env, "nfs", "no memory");
	for (i = 0; i < n / 2; i++) {
		unsigned v;

		if (sscanf(s + 2 * i, "%2x", &v) != 1 ||
		    !strchr("0123456789abcdefABCDEF", s[2 * i]) ||
		    !strchr("0123456789abcdefABCDEF", s[2 * i + 1])) {
			free(p);
			return cmd_usage(c->env, "nfs", "--pattern: '%s' is "
					 "not hex", s);
		}
		p[i] = (uint8_t)v;
	}
	*out = p;
	*len = (uint32_t)(n / 2);
	return 0;
}

static int sub_write_same(struct nfs_ctx *c, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "offset", required_argument, NULL, 'o' },
		{ "block-size", required_argument, NULL, 'b' },
		{ "count", required_argument, NULL, 'n' },
		{ "pattern", required_argument, NULL, 'p' },
		{ "pattern-offset", required_argument, NULL, 'P' },
		{ "zero", no_argument, NULL, 'z' },
		{ "block-number-offset", required_argument, NULL, 'B' },
		{ "first-block", required_argument, NULL, 'N' },
		{ "fallback", no_argument, NULL, 'F' },
		{ "no-fallback", no_argument, NULL, 'X' },
		{ "unstable", no_argument, NULL, 'u' },
		{ "no-check", no_argument, NULL, 'C' },
		{ NULL, 0, NULL, 0 },
	};
	struct ws_req r = { .adb = { .reloff_blocknum = BS_WS_NO_BLOCKNUM } };
	struct bs_nfs_file f = { .open = false };
	bool have_bs = false, have_n = false, zero = false;
	uint8_t *pat = NULL;
	uint64_t v;
	int ch, err, rc;

	while ((ch = getopt_long(argc, argv, "+:o:b:n:p:z", longopts,
				 NULL)) != -1) {
		uint64_t *dst = NULL;

		switch (ch) {
		case 'o': dst = &r.adb.offset; break;
		case 'b': dst = &r.adb.block_size; have_bs = true; break;
		case 'n': dst = &r.adb.block_count; have_n = true; break;
		case 'P': dst = &r.adb.reloff_pattern; break;
		case 'B': dst = &r.adb.reloff_blocknum; break;
		case 'N': dst = &r.adb.block_num; break;
		case 'p':
			free(pat);
			pat = NULL;
			if ((err = parse_hex(c, optarg, &pat,
					     &r.adb.pattern_len)))
				return err;
			break;
		case 'z': zero = true; break;
		case 'F': r.force_fallback = true; break;
		case 'X': r.no_fallback = true; break;
		case 'u': r.unstable = true; break;
		case 'C': r.no_check = true; break;
		default:
			free(pat);
			return bad_option(c, argv, ch);
		}
		if (dst) {
			if ((err = cmd_parse_size(c->env, "nfs", argv[optind - 1],
						  optarg, &v))) {
				free(pat);
				return err;
			}
			*dst = v;
		}
	}
	r.adb.pattern = pat;
	if (!have_bs || !have_n || zero == (pat != NULL)) {
		free(pat);
		return cmd_usage(c->env, "nfs", "nfs write-same: -b BLOCKSIZE, "
				 "-n COUNT and one of --pattern HEX or --zero, "
				 "please");
	}
	if (r.no_check && !r.no_fallback) {
		free(pat);
		return cmd_usage(c->env, "nfs", "nfs write-same: --no-check "
				 "needs --no-fallback (a malformed description "
				 "is for the server to refuse)");
	}
	if (r.force_fallback && r.no_fallback) {
		free(pat);
		return cmd_usage(c->env, "nfs", "nfs write-same: --fallback "
				 "and --no-fallback contradict");
	}
	if ((err = want_args(c, argc, 1, "URL"))) {
		free(pat);
		return err;
	}
	if ((rc = connect_url(c, argv[optind]))) {
		free(pat);
		return rc;
	}
	err = bs_nfs_open(c->nfs, c->u.path, BS_NFS_OPEN_WRITE |
			  BS_NFS_OPEN_CREATE, &f);
	if (!err)
		err = write_same(c, &f, &r, "write-same");
	if (!err)
		err = bs_nfs_close(c->nfs, &f);
	else
		bs_nfs_close(c->nfs, &f);
	free(pat);
	return done(c, err ? fail(c, err) : CMD_OK);
}

/* ---- fallocate ------------------------------------------------------------- */

static int sub_fallocate(struct nfs_ctx *c, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "allocate", no_argument, NULL, 'a' },
		{ "punch-hole", no_argument, NULL, 'p' },
		{ "write-zeroes", no_argument, NULL, 'w' },
		{ "offset", required_argument, NULL, 'o' },
		{ "length", required_argument, NULL, 'l' },
		{ "fallback", no_argument, NULL, 'F' },
		{ "no-fallback", no_argument, NULL, 'X' },
		{ NULL, 0, NULL, 0 },
	};
	struct bs_nfs_file f = { .open = false };
	struct ws_req r = { .adb = { .reloff_blocknum = BS_WS_NO_BLOCKNUM } };
	uint64_t off = 0, len = 0;
	bool have_len = false;
	int ch, err, rc, mode = 0, modes = 0;

	while ((ch = getopt_long(argc, argv, "+:apwo:l:", longopts,
				 NULL)) != -1) {
		switch (ch) {
		case 'a':
		case 'p':
		case 'w':
			if (mode != ch)
				modes++;
			mode = ch;
			break;
		case 'o':
			if ((err = cmd_parse_size(c->env, "nfs", "-o", optarg,
						  &off)))
				return err;
			break;
		case 'l':
			if ((err = cmd_parse_size(c->env, "nfs", "-l", optarg,
						  &len)))
				return err;
			have_len = true;
			break;
		case 'F': r.force_fallback = true; break;
		case 'X': r.no_fallback = true; break;
		default:
			return bad_option(c, argv, ch);
		}
	}
	if (modes != 1)
		return cmd_usage(c->env, "nfs", "nfs fallocate: one of -a, -p, "
				 "-w, please");
	if (!have_len || !len)
		return cmd_usage(c->env, "nfs", "nfs fallocate: -l LENGTH (not "
				 "0) is required");
	if ((err = want_args(c, argc, 1, "URL")))
		return err;
	if ((rc = connect_url(c, argv[optind])))
		return rc;
	err = bs_nfs_open(c->nfs, c->u.path, BS_NFS_OPEN_WRITE |
			  BS_NFS_OPEN_CREATE, &f);
	if (!err && mode == 'a')
		err = bs_nfs_allocate(c->nfs, &f, off, len);
	else if (!err && mode == 'p')
		err = bs_nfs_deallocate(c->nfs, &f, off, len);
	else if (!err) {
		/* zero blocks: 4 KiB ones where the range allows */
		r.adb.offset = off;
		r.adb.block_size = len % 4096 ? (len % 512 ? 1 : 512) : 4096;
		r.adb.block_count = len / r.adb.block_size;
		err = write_same(c, &f, &r, "fallocate -w");
	}
	if (!err)
		err = bs_nfs_close(c->nfs, &f);
	else
		bs_nfs_close(c->nfs, &f);
	return done(c, err ? fail(c, err) : CMD_OK);
}

/* ---- dispatch -------------------------------------------------------------- */

static const struct {
	const char *name;
	int (*run)(struct nfs_ctx *c, int argc, char **argv);
} subs[] = {
	{ "ls", sub_ls },   { "cat", sub_cat },
	{ "put", sub_put }, { "rm", sub_rm },
	{ "fallocate", sub_fallocate }, { "write-same", sub_write_same },
};

static int nfs_run(struct bs_cmd_env *env, int argc, char **argv)
{
	struct nfs_ctx c = { .env = env };
	int i = 1;
	size_t k;

	/* options before the subcommand: --minor N */
	if (argc > 2 && !strcmp(argv[1], "--minor")) {
		if (strcmp(argv[2], "1") && strcmp(argv[2], "2"))
			return cmd_usage(env, "nfs", "--minor: 1 or 2");
		c.minor = (unsigned)atoi(argv[2]);
		i = 3;
	}
	if (argc <= i)
		return cmd_usage(env, "nfs", "a subcommand is missing (ls, cat, "
				 "put, rm, fallocate, write-same)");
	for (k = 0; k < sizeof(subs) / sizeof(subs[0]); k++) {
		if (strcmp(argv[i], subs[k].name))
			continue;
		c.sub = subs[k].name;
		snprintf(c.op, sizeof(c.op), "nfs %s", c.sub);
		cmd_getopt_reset();
		return subs[k].run(&c, argc - i, argv + i);
	}
	return cmd_usage(env, "nfs", "'%s' is not a subcommand of nfs",
			 argv[i]);
}

static const struct bs_cmd nfs_cmd = {
	.name = "nfs",
	.usage = "nfs [--minor 1|2] SUBCOMMAND [OPTIONS] [HOSTFILE] nfs://HOST[:PORT]/PATH",
	.summary = "an NFS v4.1/v4.2 client: ls, cat, put, rm, fallocate, write-same",
	.run = nfs_run,
	.threaded = true,
	.help =
	"DESCRIPTION\n"
	"  Talks to an NFS server over NFS version 4.2 (or 4.1, when the\n"
	"  server refuses 4.2, or when --minor 1 is given): one TCP connection\n"
	"  to HOST:PORT (default port 2049; no rpcbind, no mount protocol),\n"
	"  one session, AUTH_SYS with this process's uid and gid. PATH is\n"
	"  taken from the server's root (PUTROOTFH, then one LOOKUP per\n"
	"  component), as in nfs://127.0.0.1:2049/export/dir/file. While the\n"
	"  server is in its grace period (NFS4ERR_GRACE) or busy\n"
	"  (NFS4ERR_DELAY) a call is retried once a second, for up to 120 s.\n"
	"\n"
	"  Written zeroes (fallocate -w) and write-same send one WRITE_SAME\n"
	"  (RFC 7862), which a server can turn into written extents of\n"
	"  zeroes at metadata cost. When the server does not have it\n"
	"  (NFS4ERR_NOTSUPP, NFS4ERR_OP_ILLEGAL, NFS4ERR_UNION_NOTSUPP) or\n"
	"  refused minor version 2, the same description is carried out here\n"
	"  by the function blkstack's server uses, sending WRITEs (UNSTABLE,\n"
	"  in pieces of at most the session's size, from one buffer of at most\n"
	"  1 MiB) and a COMMIT. The command prints which path it took:\n"
	"    write-same: server WRITE_SAME: N bytes at OFF (FILE_SYNC) in T s\n"
	"    write-same: fallback (NFS4ERR_NOTSUPP): WRITE_SAME done here,\n"
	"      pattern by WRITE + COMMIT: N bytes at OFF (FILE_SYNC) in T s\n"
	"\n"
	"SUBCOMMANDS\n"
	"  ls URL\n"
	"      A directory's entries (or the one file): type, mode, size,\n"
	"      bytes allocated on the server, name.\n"
	"  cat URL\n"
	"      The file's bytes on stdout.\n"
	"  put HOSTFILE URL\n"
	"      Copy HOSTFILE (\"-\" = stdin) to URL, created or truncated\n"
	"      (mode 0644), by UNSTABLE WRITEs and one COMMIT; fails if the\n"
	"      server's write verifier changes meanwhile (a restart).\n"
	"  rm URL\n"
	"      REMOVE the file (or an empty directory).\n"
	"  fallocate -a|-p|-w [-o OFFSET] -l LENGTH [--fallback|--no-fallback] URL\n"
	"      The file is created when missing.\n"
	"        -a, --allocate      ALLOCATE: reserve space (v4.2 only).\n"
	"        -p, --punch-hole    DEALLOCATE: free the range, reads zeroes\n"
	"                            (v4.2 only).\n"
	"        -w, --write-zeroes  zeroes as WRITTEN data: WRITE_SAME of a\n"
	"                            zero block (4 KiB blocks when LENGTH is a\n"
	"                            multiple of 4 KiB), else the fallback.\n"
	"  write-same -b BLOCKSIZE -n COUNT (--pattern HEX | --zero)\n"
	"             [-o OFFSET] [--pattern-offset N]\n"
	"             [--block-number-offset N [--first-block N]]\n"
	"             [--fallback | --no-fallback] [--unstable] URL\n"
	"      Write COUNT blocks of BLOCKSIZE bytes from OFFSET (the file is\n"
	"      created when missing, and grows as needed). Each block: zeroes\n"
	"      up to --pattern-offset (default 0), then the pattern repeated\n"
	"      to the block's end; with --block-number-offset, the block's\n"
	"      number (--first-block, default 0, plus its index) as a 64-bit\n"
	"      big-endian value at that offset. --zero: blocks of zeroes.\n"
	"      A block size of 0, a pattern longer than the block, offsets\n"
	"      outside it or a range past 2^63 are refused before anything is\n"
	"      sent (EINVAL, EFBIG); write-same --no-check --no-fallback\n"
	"      sends them anyway, to see the server's answer.\n"
	"\n"
	"OPTIONS\n"
	"  --minor 1|2        highest minor version to ask for (default 2)\n"
	"  --fallback         skip WRITE_SAME, write here (for comparisons)\n"
	"  --no-fallback      fail (EOPNOTSUPP) where the server lacks it\n"
	"  --unstable         WRITE_SAME / WRITEs UNSTABLE and no COMMIT\n"
	"                     (default: FILE_SYNC, or COMMIT after WRITEs)\n"
	"  Sizes take K M G T P E suffixes (1024-based).\n"
	"\n"
	CMD_HELP_EXIT
	"  Errors name the URL, the subcommand and the server's answer:\n"
	"    blkstack: nfs://h/f: nfs cat: No such file or directory (nfs\n"
	"    127.0.0.1:2049: OPEN /f: OPEN: NFS4ERR_NOENT)\n"
	"\n"
	"EXAMPLES\n"
	"  blkstack nfs ls nfs://127.0.0.1:2049/export\n"
	"  blkstack nfs put disk.img nfs://127.0.0.1/export/disk.img\n"
	"  blkstack nfs fallocate -w -l 10G nfs://127.0.0.1/export/zeroes\n"
	"  blkstack nfs write-same -b 4K -n 256 --pattern deadbeef \\\n"
	"      nfs://127.0.0.1/export/f\n"
	"  blkstack nfs write-same -b 512 -n 8 --zero --block-number-offset 0 \\\n"
	"      --first-block 100 nfs://127.0.0.1/export/f\n",
};

BS_CMD(nfs_cmd)
