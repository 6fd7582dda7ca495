/* SPDX-License-Identifier: MIT */
/*
 * `blkstack fs ...`: ext4 on a device through the filesystem layer
 * (lib/fs): mkfs, ls, stat, put, cat, rm, mkdir, mv, ln, readlink, chmod,
 * chown, touch, mknod, truncate, fallocate, map, getfattr and setfattr. Each run opens the filesystem, does one thing and closes it
 * cleanly, so the image is consistent (e2fsck -fn clean) between runs.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <blkstack/bdev.h>
#include <blkstack/cmd.h>
#include <blkstack/fs.h>
#include <blkstack/zero.h>

#include "cmd/internal.h"

#define IO_CHUNK (4u << 20) /* bytes per read/write call of put and cat */

struct fs_ctx {
	struct bs_cmd_env *env;
	const char *sub;	/* "put" */
	struct bs_dev *dev;
	struct bs_fs *fs;
	char op[320];		/* "fs put /a/b", for error lines */
};

static void set_op(struct fs_ctx *c, const char *path)
{
	snprintf(c->op, sizeof(c->op), "fs %s%s%s", c->sub, path ? " " : "",
		 path ? path : "");
}

static int fail(struct fs_ctx *c, int err)
{
	return bs_cmd_fail(c->env, c->dev ? c->dev->name : NULL, c->op, err);
}

/* Resolve DEV and open the filesystem on it. */
static int open_fs(struct fs_ctx *c, const char *devarg, bool rw)
{
	int err = 0;

	if (!c->dev)
		err = bs_cmd_get_dev(c->env, devarg, &c->dev);
	if (err) {
		bs_cmd_fail(c->env, devarg, "open", err);
		return CMD_FAILED;
	}
	err = bs_fs_open(c->dev, rw ? 0 : BS_FS_RDONLY, &c->fs);
	if (err) {
		fail(c, err);
		return CMD_FAILED;
	}
	return 0;
}

/* Close; a failure here is reported unless one was already (@rc). */
static int close_fs(struct fs_ctx *c, int rc)
{
	int err = bs_fs_close(c->fs);

	c->fs = NULL;
	if (err && rc == CMD_OK) {
		set_op(c, NULL);
		return fail(c, err);
	}
	return rc;
}

static int want_args(struct fs_ctx *c, int argc, char **argv, int n,
		     const char *what)
{
	if (argc - optind != n)
		return cmd_usage(c->env, "fs", "fs %s: %s %s", c->sub,
				 argc - optind < n ? "missing arguments; want"
						   : "too many arguments; want",
				 what);
	return 0;
}

static int bad_option(struct fs_ctx *c, char **argv, int ch)
{
	return cmd_bad_option(c->env, "fs", argv, ch);
}

/* ---- mkfs ------------------------------------------------------------------ */

static int parse_u32(struct fs_ctx *c, const char *opt, const char *arg,
		     uint32_t *out)
{
	uint64_t v;
	int err = cmd_parse_size(c->env, "fs", opt, arg, &v);

	if (err)
		return err;
	if (v > UINT32_MAX)
		return cmd_usage(c->env, "fs", "%s '%s': too large", opt, arg);
	*out = (uint32_t)v;
	return 0;
}

static int sub_mkfs(struct fs_ctx *c, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "force", no_argument, NULL, 'F' },
		{ NULL, 0, NULL, 0 },
	};
	struct bs_fs_mkfs_opts o = { 0 };
	struct bs_fs_info info;
	bool force = false;
	int ch, err;
	char a[32], what[160];

	while ((ch = getopt_long(argc, argv, "+:b:i:J:L:F", longopts,
				 NULL)) != -1) {
		switch (ch) {
		case 'F':
			force = true;
			break;
		case 'b':
			if ((err = parse_u32(c, "-b", optarg, &o.block_size)))
				return err;
			break;
		case 'i':
			if ((err = parse_u32(c, "-i", optarg, &o.inode_ratio)))
				return err;
			break;
		case 'J':
			if ((err = parse_u32(c, "-J", optarg, &o.journal_blocks)))
				return err;
			break;
		case 'L':
			o.label = optarg;
			break;
		default:
			return bad_option(c, argv, ch);
		}
	}
	if ((err = want_args(c, argc, argv, 1, "DEV")))
		return err;
	set_op(c, NULL);
	err = bs_cmd_get_dev(c->env, argv[optind], &c->dev);
	if (err)
		return bs_cmd_fail(c->env, argv[optind], "open", err);
	/* busy first: -F does not make a served device free */
	err = bs_dev_claim_check(c->dev, BS_CLAIM_EXCL);
	if (err)
		return fail(c, err);
	/* as mke2fs: never replace what is there without being told */
	err = force ? 0 : bs_fs_probe(c->dev, what, sizeof(what));
	if (err < 0)
		return fail(c, err);
	if (err > 0) {
		bs_error(-EEXIST, "the device holds %s; give -F (--force) to "
			 "replace it", what);
		return fail(c, -EEXIST);
	}
	err = bs_fs_mkfs(c->dev, &o);
	if (err)
		return fail(c, err);
	/* say what was made, read back from the image */
	if (open_fs(c, argv[optind], false))
		return CMD_FAILED;
	bs_fs_info(c->fs, &info);
	fprintf(c->env->out, "%s: ext4, %s, %" PRIu64 " blocks of %u, %u "
		"inodes, journal %u blocks, uuid %s\n", c->dev->name,
		bs_fmt_size(info.blocks * info.block_size, a, sizeof(a)),
		info.blocks, info.block_size, info.inodes,
		info.journal_blocks, info.uuid);
	return close_fs(c, CMD_OK);
}

/* ---- ls / stat --------------------------------------------------------------- */

static void mode_string(uint32_t mode, char s[11])
{
	static const char rwx[] = "rwxrwxrwx";
	int i;

	s[0] = S_ISDIR(mode)	? 'd' :
	       S_ISLNK(mode)	? 'l' :
	       S_ISCHR(mode)	? 'c' :
	       S_ISBLK(mode)	? 'b' :
	       S_ISFIFO(mode)	? 'p' :
	       S_ISSOCK(mode)	? 's' : '-';
	for (i = 0; i < 9; i++)
		s[i + 1] = (mode & (1u << (8 - i))) ? rwx[i] : '-';
	/* set-user-ID, set-group-ID and sticky, as ls(1) shows them */
	if (mode & S_ISUID)
		s[3] = s[3] == 'x' ? 's' : 'S';
	if (mode & S_ISGID)
		s[6] = s[6] == 'x' ? 's' : 'S';
	if (mode & S_ISVTX)
		s[9] = s[9] == 'x' ? 't' : 'T';
	s[10] = '\0';
}

struct ls_arg {
	struct fs_ctx *c;
	bool lng;
	int err;
};

static int ls_cb(void *arg, const char *name, uint32_t ino, uint32_t mode)
{
	struct ls_arg *l = arg;
	struct bs_fs_stat st;
	char m[11], t[32];
	time_t tt;
	struct tm tm;
	int err;

	if (!l->lng) {
		fprintf(l->c->env->out, "%s%s\n", name, S_ISDIR(mode) ? "/" : "");
		return 0;
	}
	err = bs_fs_stat(l->c->fs, ino, &st);
	if (err) {
		l->err = err;
		return 1;
	}
	mode_string(st.mode, m);
	tt = (time_t)st.mtime;
	gmtime_r(&tt, &tm);
	strftime(t, sizeof(t), "%Y-%m-%d %H:%M", &tm);
	fprintf(l->c->env->out, "%s %3u %5u %5u %12" PRIu64 " %s %8u %s%s", m,
		st.nlink, st.uid, st.gid, st.size, t, ino, name,
		S_ISDIR(st.mode) ? "/" : "");
	if (S_ISLNK(st.mode)) {
		char target[BS_FS_SYMLINK_MAX + 1];
		size_t len = 0;

		if (!bs_fs_readlink(l->c->fs, ino, target, sizeof(target) - 1,
				    &len) && len < sizeof(target))
			fprintf(l->c->env->out, " -> %.*s", (int)len, target);
	}
	fputc('\n', l->c->env->out);
	return 0;
}

static int sub_ls(struct fs_ctx *c, int argc, char **argv)
{
	struct ls_arg l = { c, false, 0 };
	struct bs_fs_stat st;
	const char *path;
	uint32_t ino;
	int ch, err, rc;

	while ((ch = getopt(argc, argv, "+:l")) != -1) {
		if (ch == 'l')
			l.lng = true;
		else
			return bad_option(c, argv, ch);
	}
	if (argc - optind == 1)
		path = "/";
	else if ((err = want_args(c, argc, argv, 2, "DEV [/PATH]")))
		return err;
	else
		path = argv[optind + 1];
	set_op(c, path);
	if (open_fs(c, argv[optind], false))
		return CMD_FAILED;
	err = bs_fs_lookup(c->fs, path, &ino);
	if (!err)
		err = bs_fs_stat(c->fs, ino, &st);
	if (!err && !S_ISDIR(st.mode)) {
		/* ls of a file names the file, as ls(1) */
		const char *base = strrchr(path, '/');
		l.err = 0;
		ls_cb(&l, base ? base + 1 : path, ino, st.mode);
		err = l.err;
	} else if (!err) {
		err = bs_fs_readdir(c->fs, ino, ls_cb, &l);
		if (err > 0)
			err = l.err;
	}
	rc = err ? fail(c, err) : CMD_OK;
	return close_fs(c, rc);
}

static void print_time(FILE *f, const char *key, int64_t t, uint32_t ns)
{
	time_t tt = (time_t)t;
	struct tm tm;
	char buf[40];

	gmtime_r(&tt, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
	/* the seconds since 1970 as a decimal: -1.25, not -2 and .75 */
	if (t < 0 && ns)
		fprintf(f, "  %-12s %s.%09u UTC (-%" PRId64 ".%09u)\n", key, buf,
			ns, -(t + 1), 1000000000u - ns);
	else
		fprintf(f, "  %-12s %s.%09u UTC (%" PRId64 ".%09u)\n", key, buf,
			ns, t, ns);
}

static int sub_stat(struct fs_ctx *c, int argc, char **argv)
{
	struct bs_fs_stat st;
	struct bs_fs_info info;
	FILE *f = c->env->out;
	uint32_t ino;
	char m[11], a[32];
	int ch, err, rc;

	while ((ch = getopt(argc, argv, "+:")) != -1)
		return bad_option(c, argv, ch);
	if (argc - optind == 1) {
		/* the filesystem itself */
		set_op(c, NULL);
		if (open_fs(c, argv[optind], false))
			return CMD_FAILED;
		bs_fs_info(c->fs, &info);
		fprintf(f, "%s\n", c->dev->name);
		fprintf(f, "  %-12s ext4\n", "type");
		fprintf(f, "  %-12s %s\n", "uuid", info.uuid);
		fprintf(f, "  %-12s %s\n", "label", info.label);
		fprintf(f, "  %-12s %u\n", "block size", info.block_size);
		fprintf(f, "  %-12s %" PRIu64 " (%s)\n", "blocks", info.blocks,
			bs_fmt_size(info.blocks * info.block_size, a, sizeof(a)));
		fprintf(f, "  %-12s %" PRIu64 " (%s)\n", "free blocks",
			info.free_blocks,
			bs_fmt_size(info.free_blocks * info.block_size, a,
				    sizeof(a)));
		fprintf(f, "  %-12s %u\n", "inodes", info.inodes);
		fprintf(f, "  %-12s %u\n", "free inodes", info.free_inodes);
		fprintf(f, "  %-12s %u blocks\n", "journal", info.journal_blocks);
		if (info.damage[0])
			fprintf(f, "  %-12s needs checking (run e2fsck): %s\n",
				"state", info.damage);
		else
			fprintf(f, "  %-12s %s\n", "state", info.clean ? "clean" :
				"not clean (run e2fsck -f)");
		return close_fs(c, CMD_OK);
	}
	if ((err = want_args(c, argc, argv, 2, "DEV [/PATH]")))
		return err;
	set_op(c, argv[optind + 1]);
	if (open_fs(c, argv[optind], false))
		return CMD_FAILED;
	err = bs_fs_lookup(c->fs, argv[optind + 1], &ino);
	if (!err)
		err = bs_fs_stat(c->fs, ino, &st);
	if (err) {
		rc = fail(c, err);
		return close_fs(c, rc);
	}
	mode_string(st.mode, m);
	fprintf(f, "%s\n", argv[optind + 1]);
	fprintf(f, "  %-12s %u\n", "inode", st.ino);
	fprintf(f, "  %-12s %s (0%o)\n", "mode", m, st.mode & 07777);
	fprintf(f, "  %-12s %s\n", "type",
		S_ISDIR(st.mode) ? "directory" :
		S_ISREG(st.mode) ? "regular file" :
		S_ISLNK(st.mode) ? "symbolic link" :
		S_ISBLK(st.mode) ? "block device" :
		S_ISCHR(st.mode) ? "character device" :
		S_ISFIFO(st.mode) ? "fifo" : S_ISSOCK(st.mode) ? "socket" :
		"other");
	if (S_ISBLK(st.mode) || S_ISCHR(st.mode))
		fprintf(f, "  %-12s %u:%u\n", "device", st.rdev_major,
			st.rdev_minor);
	if (S_ISLNK(st.mode)) {
		char target[BS_FS_SYMLINK_MAX + 1];
		size_t len = 0;

		err = bs_fs_readlink(c->fs, ino, target, sizeof(target) - 1,
				     &len);
		if (err) {
			rc = fail(c, err);
			return close_fs(c, rc);
		}
		fprintf(f, "  %-12s %.*s\n", "target",
			(int)(len < sizeof(target) ? len : sizeof(target) - 1),
			target);
	}
	fprintf(f, "  %-12s %u\n", "links", st.nlink);
	fprintf(f, "  %-12s %u / %u\n", "uid / gid", st.uid, st.gid);
	fprintf(f, "  %-12s %" PRIu64 " (%s)\n", "size", st.size,
		bs_fmt_size(st.size, a, sizeof(a)));
	fprintf(f, "  %-12s %" PRIu64 " (%s allocated)\n", "blocks", st.blocks,
		bs_fmt_size(st.blocks * 512, a, sizeof(a)));
	print_time(f, "atime", st.atime, st.atime_ns);
	print_time(f, "mtime", st.mtime, st.mtime_ns);
	print_time(f, "ctime", st.ctime, st.ctime_ns);
	fprintf(f, "  %-12s %u\n", "generation", st.generation);
	return close_fs(c, CMD_OK);
}

/* ---- put / cat ----------------------------------------------------------- */

static const char *file_kind(mode_t m)
{
	return S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device" :
	       S_ISBLK(m) ? "a block device" : S_ISDIR(m) ? "a directory" :
	       S_ISSOCK(m) ? "a socket" : "not a regular file";
}

/*
 * Open the host file that put reads: a descriptor, or -errno with
 * bs_error() set. The open never blocks (O_NONBLOCK: a FIFO without a
 * writer would wait forever). Inside blkstackd only a regular file is
 * read; the CLI also reads a pipe or a character device (`fs put DEV
 * /dev/stdin /f`), blocking as cat(1) would, in its own process.
 */
static int open_host(struct fs_ctx *c, const char *host, struct stat *st)
{
	int fd, err, fl;

	fd = open(host, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 || fstat(fd, st)) {
		err = -errno;
		if (fd >= 0)
			close(fd);
		return bs_error(err, "cannot read host file %s", host);
	}
	if (!S_ISREG(st->st_mode) &&
	    (c->env->in_daemon ||
	     !(S_ISFIFO(st->st_mode) || S_ISCHR(st->st_mode)))) {
		close(fd);
		return bs_error(-EINVAL, "host file %s is %s: %s", host,
				file_kind(st->st_mode), c->env->in_daemon ?
				"blkstackd reads only regular files" :
				"give a regular file, a pipe or a character "
				"device");
	}
	if (S_ISFIFO(st->st_mode)) {
		/* the CLI's own pipe: reopen blocking, to wait for a writer
		 * the way cat(1) does (O_NONBLOCK would read an early EOF) */
		close(fd);
		fd = open(host, O_RDONLY | O_CLOEXEC | O_NOCTTY);
		if (fd < 0)
			return bs_error(-errno, "cannot read host file %s",
					host);
		return fd;
	}
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		err = -errno;
		close(fd);
		return bs_error(err, "cannot read host file %s", host);
	}
	return fd;
}

static int sub_put(struct fs_ctx *c, int argc, char **argv)
{
	const char *host, *path;
	uint8_t *buf = NULL;
	uint64_t off = 0;
	uint32_t ino;
	int ch, err = 0, rc = CMD_OK, fd;
	uint32_t mode = 0644;
	struct stat hst;

	while ((ch = getopt(argc, argv, "+:")) != -1)
		return bad_option(c, argv, ch);
	if ((err = want_args(c, argc, argv, 3, "DEV HOSTFILE /PATH")))
		return err;
	host = argv[optind + 1];
	path = argv[optind + 2];
	set_op(c, path);
	fd = open_host(c, host, &hst);
	if (fd < 0)
		return bs_cmd_fail(c->env, NULL, c->op, fd);
	if (S_ISREG(hst.st_mode))
		mode = hst.st_mode & 0777;
	buf = malloc(IO_CHUNK);
	if (!buf) {
		close(fd);
		bs_error(-ENOMEM, "out of memory");
		return bs_cmd_fail(c->env, NULL, c->op, -ENOMEM);
	}
	if (open_fs(c, argv[optind], true)) {
		free(buf);
		close(fd);
		return CMD_FAILED;
	}
	err = bs_fs_lookup(c->fs, path, &ino);
	if (!err) {
		/* an existing file is replaced, as cp(1) overwrites */
		err = bs_fs_truncate(c->fs, ino, 0);
	} else if (err == -ENOENT) {
		err = bs_fs_create(c->fs, path, mode, &ino);
	}
	while (!err) {
		ssize_t n = read(fd, buf, IO_CHUNK);
		int64_t w;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = bs_error(-errno, "reading host file %s at %" PRIu64,
				       host, off);
			break;
		}
		if (!n)
			break;
		/* a short write: the rest again, which returns the error */
		for (w = 0; !err && w < n;) {
			int64_t got = bs_fs_write(c->fs, ino, buf + w,
						  (uint64_t)(n - w), off);

			if (got < 0)
				err = (int)got;
			else if (!got)
				err = bs_error(-EIO, "writing %s: no progress",
					       path);
			w += got > 0 ? got : 0;
			off += got > 0 ? (uint64_t)got : 0;
		}
	}
	if (err)
		rc = fail(c, err);
	free(buf);
	close(fd);
	return close_fs(c, rc);
}

static int sub_cat(struct fs_ctx *c, int argc, char **argv)
{
	uint8_t *buf;
	uint64_t off = 0;
	uint32_t ino;
	int ch, err, rc = CMD_OK;

	while ((ch = getopt(argc, argv, "+:")) != -1)
		return bad_option(c, argv, ch);
	if ((err = want_args(c, argc, argv, 2, "DEV /PATH")))
		return err;
	set_op(c, argv[optind + 1]);
	buf = malloc(IO_CHUNK);
	if (!buf) {
		bs_error(-ENOMEM, "out of memory");
		return bs_cmd_fail(c->env, NULL, c->op, -ENOMEM);
	}
	if (open_fs(c, argv[optind], false)) {
		free(buf);
		return CMD_FAILED;
	}
	err = bs_fs_lookup(c->fs, argv[optind + 1], &ino);
	while (!err) {
		int64_t n = bs_fs_read(c->fs, ino, buf, IO_CHUNK, off);

		if (n < 0) {
			err = (int)n;
			break;
		}
		if (!n)
			break;
		if (fwrite(buf, 1, (size_t)n, c->env->out) != (size_t)n) {
			err = bs_error(-EIO, "writing the output failed");
			break;
		}
		off += (uint64_t)n;
	}
	if (err)
		rc = fail(c, err);
	free(buf);
	return close_fs(c, rc);
}

/* ---- rm / mkdir / mv / truncate ------------------------------------------- */

/*
 * The frame of a name operation without options: @nargs arguments (DEV
 * and paths), the filesystem opened read-write, @op on the paths, closed.
 */
static int name_op(struct fs_ctx *c, int argc, char **argv, int nargs,
		   const char *usage, int (*op)(struct bs_fs *fs, char **paths))
{
	int ch, err, rc = CMD_OK;

	while ((ch = getopt(argc, argv, "+:")) != -1)
		return bad_option(c, argv, ch);
	if ((err = want_args(c, argc, argv, nargs, usage)))
		return err;
	set_op(c, argv[optind + 1]);
	if (open_fs(c, argv[optind], true))
		return CMD_FAILED;
	err = op(c->fs, argv + optind + 1);
	if (err)
		rc = fail(c, err);
	return close_fs(c, rc);
}

static int op_rm(struct bs_fs *fs, char **paths)
{
	return bs_fs_unlink(fs, paths[0]);
}

static int op_mkdir(struct bs_fs *fs, char **paths)
{
	return bs_fs_mkdir(fs, paths[0], 0755, NULL);
}

static int op_mv(struct bs_fs *fs, char **paths)
{
	return bs_fs_rename(fs, paths[0], paths[1]);
}

static int sub_rm(struct fs_ctx *c, int argc, char **argv)
{
	return name_op(c, argc, argv, 2, "DEV /PATH", op_rm);
}

static int sub_mkdir(struct fs_ctx *c, int argc, char **argv)
{
	return name_op(c, argc, argv, 2, "DEV /PATH", op_mkdir);
}

static int sub_mv(struct fs_ctx *c, int argc, char **argv)
{
	return name_op(c, argc, argv, 3, "DEV /FROM /TO", op_mv);
}

/* ---- ln / readlink / chmod / chown / touch -------------------------------- */

static int sub_ln(struct fs_ctx *c, int argc, char **argv)
{
	bool sym = false;
	int ch, err, rc = CMD_OK;

	while ((ch = getopt(argc, argv, "+:s")) != -1) {
		if (ch != 's')
			return bad_option(c, argv, ch);
		sym = true;
	}
	if ((err = want_args(c, argc, argv, 3, sym ? "DEV TARGET /PATH" :
			     "DEV /EXISTING /NEW")))
		return err;
	set_op(c, argv[optind + 2]);
	if (open_fs(c, argv[optind], true))
		return CMD_FAILED;
	if (sym)
		err = bs_fs_symlink(c->fs, argv[optind + 2], argv[optind + 1],
				    NULL);
	else
		err = bs_fs_link(c->fs, argv[optind + 1], argv[optind + 2]);
	if (err)
		rc = fail(c, err);
	return close_fs(c, rc);
}

static int sub_mknod(struct fs_ctx *c, int argc, char **argv)
{
	uint32_t mode, nums[2] = { 0, 0 };
	const char *t;
	unsigned long v;
	char *end;
	int ch, err, rc = CMD_OK, i, n;

	while ((ch = getopt(argc, argv, "+:")) != -1)
		return bad_option(c, argv, ch);
	n = argc - optind;
	if (n != 3 && n != 5)
		return want_args(c, argc, argv, n < 3 ? 3 : 5,
				 "DEV /PATH TYPE [MAJOR MINOR]");
	t = argv[optind + 2];
	if (!strcmp(t, "b") || !strcmp(t, "c"))
		mode = (*t == 'b' ? S_IFBLK : S_IFCHR) | 0644;
	else if (!strcmp(t, "p"))
		mode = S_IFIFO | 0644;
	else if (!strcmp(t, "s"))
		mode = S_IFSOCK | 0644;
	else
		return cmd_usage(c->env, "fs", "fs mknod: TYPE '%s': want b, c, "
				 "p or s", t);
	if ((n == 5) != (S_ISBLK(mode) || S_ISCHR(mode)))
		return cmd_usage(c->env, "fs", "fs mknod: MAJOR MINOR go with "
				 "b and c only, and they need them");
	for (i = 0; n == 5 && i < 2; i++) {
		errno = 0;
		v = strtoul(argv[optind + 3 + i], &end, 0);
		if (errno || end == argv[optind + 3 + i] || *end ||
		    v > UINT32_MAX)
			return cmd_usage(c->env, "fs", "fs mknod: '%s' is not a "
					 "number", argv[optind + 3 + i]);
		nums[i] = (uint32_t)v;
	}
	set_op(c, argv[optind + 1]);
	if (open_fs(c, argv[optind], true))
		return CMD_FAILED;
	err = bs_fs_mknod(c->fs, argv[optind + 1], mode, nums[0], nums[1],
			  NULL);
	if (err)
		rc = fail(c, err);
	return close_fs(c, rc);
}

static int sub_readlink(struct fs_ctx *c, int argc, char **argv)
{
	char target[BS_FS_SYMLINK_MAX + 1];
	size_t len = 0;
	uint32_t ino;
	int ch, err, rc = CMD_OK;

	while ((ch = getopt(argc, argv, "+:")) != -1)
		return bad_option(c, argv, ch);
	if ((err = want_args(c, argc, argv, 2, "DEV /PATH")))
		return err;
	set_op(c, argv[optind + 1]);
	if (open_fs(c, argv[optind], false))
		return CMD_FAILED;
	err = bs_fs_lookup(c->fs, argv[optind + 1], &ino);
	if (!err)
		err = bs_fs_readlink(c->fs, ino, target, sizeof(target), &len);
	if (!err && len > sizeof(target))
		err = -ENAMETOOLONG;
	if (err)
		rc = fail(c, err);
	else
		fprintf(c->env->out, "%.*s\n", (int)len, target);
	return close_fs(c, rc);
}

/* Set @sa on /PATH (argv[optind + 2]); DEV at argv[optind]. */
static int setattr_path(struct fs_ctx *c, char **argv, const char *path,
			const struct bs_fs_setattr *sa, bool create)
{
	uint32_t ino;
	int err, rc = CMD_OK;

	set_op(c, path);
	if (open_fs(c, argv[optind], true))
		return CMD_FAILED;
	err = bs_fs_lookup(c->fs, path, &ino);
	if (err == -ENOENT && create)
		err = bs_fs_create(c->fs, path, 0644, &ino);
	if (!err)
		err = bs_fs_setattr(c->fs, ino, sa);
	if (err)
		rc = fail(c, err);
	return close_fs(c, rc);
}

static int sub_chmod(struct fs_ctx *c, int argc, char **argv)
{
	struct bs_fs_setattr sa = { .mask = BS_FS_SET_MODE };
	unsigned long v;
	char *end;
	int ch, err;

	while ((ch = getopt(argc, argv, "+:")) != -1)
		return bad_option(c, argv, ch);
	if ((err = want_args(c, argc, argv, 3, "DEV MODE /PATH")))
		return err;
	errno = 0;
	v = strtoul(argv[optind + 1], &end, 8);
	if (errno || end == argv[optind + 1] || *end || v > 07777)
		return cmd_usage(c->env, "fs", "fs chmod: MODE '%s': want octal "
				 "0 to 7777", argv[optind + 1]);
	sa.mode = (uint32_t)v;
	return setattr_path(c, argv, argv[optind + 2], &sa, false);
}

static int parse_id(const char *s, const char *end, uint32_t *out)
{
	unsigned long long v;
	char *e;

	if (s == end || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &e, 10);
	if (errno || e != end || v > UINT32_MAX - 1)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static int sub_chown(struct fs_ctx *c, int argc, char **argv)
{
	struct bs_fs_setattr sa = { 0 };
	const char *s, *colon;
	int ch, err;

	while ((ch = getopt(argc, argv, "+:")) != -1)
		return bad_option(c, argv, ch);
	if ((err = want_args(c, argc, argv, 3, "DEV UID[:GID] /PATH")))
		return err;
	s = argv[optind + 1];
	colon = strchr(s, ':');
	if (colon != s) {
		if (parse_id(s, colon ? colon : s + strlen(s), &sa.uid))
			goto bad;
		sa.mask |= BS_FS_SET_UID;
	}
	if (colon && colon[1]) {
		if (parse_id(colon + 1, colon + 1 + strlen(colon + 1), &sa.gid))
			goto bad;
		sa.mask |= BS_FS_SET_GID;
	}
	if (!sa.mask)
		goto bad;
	return setattr_path(c, argv, argv[optind + 2], &sa, false);
bad:
	return cmd_usage(c->env, "fs", "fs chown: '%s': want UID, UID:GID or "
			 ":GID (numbers)", s);
}

/* SECONDS[.FRACTION] since the epoch, maybe negative */
static int parse_time(const char *s, int64_t *sec, uint32_t *ns)
{
	long long v;
	uint32_t n = 0, scale = 100000000;
	char *e;

	errno = 0;
	v = strtoll(s, &e, 10);
	if (errno || e == s)
		return -EINVAL;
	if (*e == '.') {
		for (e++; *e >= '0' && *e <= '9'; e++) {
			n += (uint32_t)(*e - '0') * scale;
			scale /= 10;
			if (!scale && e[1] >= '0' && e[1] <= '9')
				return -EINVAL;
		}
		if (s[0] == '-' && n) {
			v--;
			n = 1000000000 - n;
		}
	}
	if (*e)
		return -EINVAL;
	*sec = v;
	*ns = n;
	return 0;
}

static int sub_touch(struct fs_ctx *c, int argc, char **argv)
{
	struct bs_fs_setattr sa = { 0 };
	bool a = false, m = false, have = false;
	int64_t sec = 0;
	uint32_t ns = 0;
	int ch, err;

	while ((ch = getopt(argc, argv, "+:amd:")) != -1) {
		if (ch == 'a') {
			a = true;
		} else if (ch == 'm') {
			m = true;
		} else if (ch == 'd') {
			if (parse_time(optarg, &sec, &ns))
				return cmd_usage(c->env, "fs", "fs touch: -d '%s': "
						 "want SECONDS[.FRACTION] since "
						 "1970", optarg);
			have = true;
		} else {
			return bad_option(c, argv, ch);
		}
	}
	if ((err = want_args(c, argc, argv, 2, "DEV /PATH")))
		return err;
	if (!a && !m)
		a = m = true;
	if (a) {
		sa.mask |= have ? BS_FS_SET_ATIME : BS_FS_SET_ATIME_NOW;
		sa.atime = sec;
		sa.atime_ns = ns;
	}
	if (m) {
		sa.mask |= have ? BS_FS_SET_MTIME : BS_FS_SET_MTIME_NOW;
		sa.mtime = sec;
		sa.mtime_ns = ns;
	}
	return setattr_path(c, argv, argv[optind + 1], &sa, true);
}

static int sub_truncate(struct fs_ctx *c, int argc, char **argv)
{
	uint64_t size = 0;
	bool have = false;
	uint32_t ino;
	int ch, err, rc = CMD_OK;

	while ((ch = getopt(argc, argv, "+:s:")) != -1) {
		if (ch != 's')
			return bad_option(c, argv, ch);
		if ((err = cmd_parse_size(c->env, "fs", "-s", optarg, &size)))
			return err;
		have = true;
	}
	if (!have)
		return cmd_usage(c->env, "fs", "fs truncate: -s SIZE is missing");
	if ((err = want_args(c, argc, argv, 2, "DEV /PATH")))
		return err;
	set_op(c, argv[optind + 1]);
	if (open_fs(c, argv[optind], true))
		return CMD_FAILED;
	err = bs_fs_lookup(c->fs, argv[optind + 1], &ino);
	if (!err)
		err = bs_fs_truncate(c->fs, ino, size);
	if (err)
		rc = fail(c, err);
	return close_fs(c, rc);
}

/* ---- fallocate / map ------------------------------------------------------- */

static int sub_fallocate(struct fs_ctx *c, int argc, char **argv)
{
	uint64_t offset = 0, length = 0;
	bool have_len = false;
	int mode = 0, modes = 0, ch, err, rc = CMD_OK;
	uint32_t ino;

	while ((ch = getopt(argc, argv, "+:knzpwo:l:")) != -1) {
		/* the getopt string admits only k n z p w of the mode letters */
		if (cmd_falloc_letter(ch, &mode, &modes))
			continue;
		switch (ch) {
		case 'o':
			if ((err = cmd_parse_size(c->env, "fs", "-o", optarg,
						  &offset)))
				return err;
			break;
		case 'l':
			if ((err = cmd_parse_size(c->env, "fs", "-l", optarg,
						  &length)))
				return err;
			have_len = true;
			break;
		default:
			return bad_option(c, argv, ch);
		}
	}
	if (modes > 1)
		return cmd_usage(c->env, "fs", "fs fallocate: -z, -p and -w are "
				 "mutually exclusive");
	if (!have_len)
		return cmd_usage(c->env, "fs", "fs fallocate: -l LENGTH is "
				 "missing");
	if (offset > INT64_MAX || length > INT64_MAX)
		return cmd_usage(c->env, "fs", "fs fallocate: offset and length "
				 "must be below 8 EiB");
	if ((err = want_args(c, argc, argv, 2, "DEV /PATH")))
		return err;
	set_op(c, argv[optind + 1]);
	if (open_fs(c, argv[optind], true))
		return CMD_FAILED;
	err = bs_fs_lookup(c->fs, argv[optind + 1], &ino);
	/* like fallocate(1): the file is created when missing */
	if (err == -ENOENT)
		err = bs_fs_create(c->fs, argv[optind + 1], 0644, &ino);
	if (!err)
		err = bs_fs_fallocate(c->fs, ino, mode, (int64_t)offset,
				      (int64_t)length);
	if (err)
		rc = fail(c, err);
	return close_fs(c, rc);
}

struct map_arg {
	FILE *out;
	unsigned n;
};

static int map_cb(void *arg, const struct bs_fs_extent *e)
{
	struct map_arg *m = arg;

	fprintf(m->out, "%4u %12" PRIu64 " %12" PRIu64 " %10" PRIu64 "  %s\n",
		m->n++, e->logical, e->physical, e->len,
		e->unwritten ? "unwritten" : "written");
	return 0;
}

static int sub_map(struct fs_ctx *c, int argc, char **argv)
{
	struct map_arg m;
	struct bs_fs_stat st;
	uint32_t ino;
	int ch, err, rc = CMD_OK;

	while ((ch = getopt(argc, argv, "+:")) != -1)
		return bad_option(c, argv, ch);
	if ((err = want_args(c, argc, argv, 2, "DEV /PATH")))
		return err;
	set_op(c, argv[optind + 1]);
	if (open_fs(c, argv[optind], false))
		return CMD_FAILED;
	err = bs_fs_lookup(c->fs, argv[optind + 1], &ino);
	if (!err)
		err = bs_fs_stat(c->fs, ino, &st);
	if (!err) {
		m.out = c->env->out;
		m.n = 0;
		fprintf(m.out, "%s: inode %u, size %" PRIu64 ", %u-byte blocks\n",
			argv[optind + 1], ino, st.size, bs_fs_block_size(c->fs));
		fprintf(m.out, "%4s %12s %12s %10s  %s\n", "ext", "logical",
			"physical", "length", "state");
		err = bs_fs_map(c->fs, ino, map_cb, &m);
	}
	if (err)
		rc = fail(c, err);
	return close_fs(c, rc);
}

/* ---- getfattr / setfattr ---------------------------------------------------- */

#define XATTR_VALUE_MAX 65536u	/* Linux's XATTR_SIZE_MAX */

enum xenc { XENC_AUTO, XENC_TEXT, XENC_HEX };

static bool is_text(const uint8_t *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if ((v[i] < 32 && v[i] != '\t' && v[i] != '\n') || v[i] >= 127)
			return false;
	return true;
}

/*
 * NAME="VALUE" with ", \ and unprintable bytes as \ooo, or NAME=0xHEX:
 * getfattr's text and hex encodings.
 */
static void print_attr(FILE *f, const char *name, const uint8_t *v, size_t n,
		       enum xenc e)
{
	size_t i;

	if (e == XENC_AUTO)
		e = is_text(v, n) ? XENC_TEXT : XENC_HEX;
	fprintf(f, "%s=", name);
	if (e == XENC_HEX) {
		fputs("0x", f);
		for (i = 0; i < n; i++)
			fprintf(f, "%02x", v[i]);
	} else {
		fputc('"', f);
		for (i = 0; i < n; i++)
			if (v[i] < 32 || v[i] >= 127 || v[i] == '"' ||
			    v[i] == '\\')
				fprintf(f, "\\%03o", v[i]);
			else
				fputc(v[i], f);
		fputc('"', f);
	}
	fputc('\n', f);
}

/* Every attribute of @ino, one line each. */
static int print_all(struct fs_ctx *c, uint32_t ino, uint8_t *val,
		     enum xenc e)
{
	char *names = malloc(XATTR_VALUE_MAX);
	size_t len = 0, i, n;
	int err;

	if (!names)
		return -ENOMEM;
	err = bs_fs_listxattr(c->fs, ino, names, XATTR_VALUE_MAX, &len);
	for (i = 0; !err && i < len; i += strlen(names + i) + 1) {
		err = bs_fs_getxattr(c->fs, ino, names + i, val,
				     XATTR_VALUE_MAX, &n);
		if (!err)
			print_attr(c->env->out, names + i, val, n, e);
	}
	free(names);
	return err;
}

static int sub_getfattr(struct fs_ctx *c, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "encoding", required_argument, NULL, 'e' },
		{ "only-values", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	enum xenc e = XENC_AUTO;
	bool only = false;
	uint8_t *val;
	uint32_t ino;
	size_t n = 0;
	int ch, err, rc = CMD_OK, nargs;

	while ((ch = getopt_long(argc, argv, "+:e:", longopts, NULL)) != -1) {
		if (ch == 'V') {
			only = true;
		} else if (ch == 'e') {
			if (!strcmp(optarg, "text"))
				e = XENC_TEXT;
			else if (!strcmp(optarg, "hex"))
				e = XENC_HEX;
			else
				return cmd_usage(c->env, "fs", "fs getfattr: -e "
						 "'%s': want text or hex",
						 optarg);
		} else {
			return bad_option(c, argv, ch);
		}
	}
	nargs = argc - optind;
	if (nargs != 2 && nargs != 3)
		return want_args(c, argc, argv, nargs < 2 ? 2 : 3,
				 "DEV /PATH [NAME]");
	if (only && nargs != 3)
		return cmd_usage(c->env, "fs", "fs getfattr: --only-values "
				 "needs a NAME");
	set_op(c, argv[optind + 1]);
	val = malloc(XATTR_VALUE_MAX);
	if (!val)
		return fail(c, -ENOMEM);
	if (open_fs(c, argv[optind], false)) {
		free(val);
		return CMD_FAILED;
	}
	err = bs_fs_lookup(c->fs, argv[optind + 1], &ino);
	if (!err && nargs == 2)
		err = print_all(c, ino, val, e);
	else if (!err)
		err = bs_fs_getxattr(c->fs, ino, argv[optind + 2], val,
				     XATTR_VALUE_MAX, &n);
	if (!err && nargs == 3 && only)
		fwrite(val, 1, n, c->env->out);
	else if (!err && nargs == 3)
		print_attr(c->env->out, argv[optind + 2], val, n, e);
	free(val);
	if (err)
		rc = fail(c, err);
	return close_fs(c, rc);
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* VALUE as setfattr takes it: 0xHEX, else the bytes as given */
static int parse_value(struct fs_ctx *c, const char *s, uint8_t *out,
		       size_t *len)
{
	size_t i, n = strlen(s);

	if (n < 2 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) {
		if (n > XATTR_VALUE_MAX)
			return cmd_usage(c->env, "fs", "fs setfattr: VALUE of %zu "
					 "bytes (at most %u)", n,
					 XATTR_VALUE_MAX);
		memcpy(out, s, n);
		*len = n;
		return 0;
	}
	s += 2;
	n -= 2;
	if (n % 2 || n / 2 > XATTR_VALUE_MAX)
		return cmd_usage(c->env, "fs", "fs setfattr: 0x VALUE: want an "
				 "even number of hex digits, at most %u bytes",
				 XATTR_VALUE_MAX);
	for (i = 0; i < n / 2; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return cmd_usage(c->env, "fs", "fs setfattr: '%c%c' is "
					 "not hex", s[2 * i], s[2 * i + 1]);
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	*len = n / 2;
	return 0;
}

static int sub_setfattr(struct fs_ctx *c, int argc, char **argv)
{
	const char *remove = NULL;
	uint8_t *val;
	uint32_t ino;
	size_t n = 0;
	int ch, err, rc = CMD_OK;

	while ((ch = getopt(argc, argv, "+:x:")) != -1) {
		if (ch != 'x')
			return bad_option(c, argv, ch);
		remove = optarg;
	}
	if ((err = want_args(c, argc, argv, remove ? 2 : 4, remove ?
			     "DEV /PATH" : "DEV /PATH NAME VALUE")))
		return err;
	val = malloc(XATTR_VALUE_MAX);
	if (!val)
		return fail(c, -ENOMEM);
	if (!remove && (err = parse_value(c, argv[optind + 3], val, &n))) {
		free(val);
		return err;
	}
	set_op(c, argv[optind + 1]);
	if (open_fs(c, argv[optind], true)) {
		free(val);
		return CMD_FAILED;
	}
	err = bs_fs_lookup(c->fs, argv[optind + 1], &ino);
	if (!err && remove)
		err = bs_fs_removexattr(c->fs, ino, remove);
	else if (!err)
		err = bs_fs_setxattr(c->fs, ino, argv[optind + 2], val, n, 0);
	free(val);
	if (err)
		rc = fail(c, err);
	return close_fs(c, rc);
}

/* ---- dispatch ---------------------------------------------------------------- */

static const struct {
	const char *name;
	int (*run)(struct fs_ctx *c, int argc, char **argv);
} subs[] = {
	{ "mkfs", sub_mkfs },	  { "ls", sub_ls },
	{ "stat", sub_stat },	  { "put", sub_put },
	{ "cat", sub_cat },	  { "rm", sub_rm },
	{ "mkdir", sub_mkdir },	  { "mv", sub_mv },
	{ "ln", sub_ln },	  { "readlink", sub_readlink },
	{ "chmod", sub_chmod },	  { "chown", sub_chown },
	{ "touch", sub_touch },	  { "mknod", sub_mknod },
	{ "truncate", sub_truncate }, { "fallocate", sub_fallocate },
	{ "map", sub_map },	  { "getfattr", sub_getfattr },
	{ "setfattr", sub_setfattr },
};

static int fs_run(struct bs_cmd_env *env, int argc, char **argv)
{
	struct fs_ctx c = { .env = env };
	size_t i;

	if (argc < 2)
		return cmd_usage(env, "fs", "a subcommand is missing (mkfs, ls, "
				 "stat, put, cat, rm, mkdir, mv, ln, readlink, "
				 "chmod, chown, touch, mknod, truncate, "
				 "fallocate, map, getfattr, setfattr)");
	for (i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		if (strcmp(argv[1], subs[i].name))
			continue;
		c.sub = subs[i].name;
		cmd_getopt_reset();
		/* argv[0] of the subcommand is its name */
		return subs[i].run(&c, argc - 1, argv + 1);
	}
	return cmd_usage(env, "fs", "'%s' is not a subcommand of fs", argv[1]);
}

static const struct bs_cmd fs_cmd = {
	.name = "fs",
	.usage = "fs SUBCOMMAND [OPTIONS] DEV [/PATH...]",
	.summary = "ext4 on a device: mkfs, ls, put, cat, fallocate -w, map",
	.run = fs_run,
	.threaded = true,
	.help =
	"DESCRIPTION\n"
	"  Makes and works on a real ext4 filesystem on DEV, through\n"
	"  libext2fs: images it writes pass e2fsck and mount with the kernel's\n"
	"  ext4. Each run opens the filesystem, marks it \"not clean\" while it\n"
	"  changes it, and marks it clean again when done; a run that was\n"
	"  killed leaves it not clean, and read-write runs then refuse it until\n"
	"  e2fsck -f has checked it. Read-write runs also check the image\n"
	"  first (superblock, group descriptors, bitmaps) and refuse a damaged\n"
	"  one, writing nothing: \"filesystem needs checking (run e2fsck):\n"
	"  REASON\". A subcommand that fails (out of space, a device error)\n"
	"  leaves the filesystem consistent, keeping what it did until then;\n"
	"  only when writing metadata failed is it left not clean, and the\n"
	"  error line then ends \"run e2fsck -f\". PATHs are absolute inside\n"
	"  the filesystem; symbolic links are not followed (a path through\n"
	"  one is ENOTDIR).\n"
	"\n"
	"  mkfs and the subcommands that change the filesystem need DEV to\n"
	"  themselves: a device an export serves or a mapper stacks on is\n"
	"  refused with EBUSY naming the holder. ls, stat, cat and map read\n"
	"  beside an export.\n"
	"\n"
	"SUBCOMMANDS\n"
	"  mkfs [-F] [-b BLOCKSIZE] [-i BYTES-PER-INODE] [-J JOURNAL-BLOCKS]\n"
	"       [-L LABEL] DEV\n"
	"      Make ext4 as mke2fs -t ext4 would: extents, 64bit, flex_bg,\n"
	"      dir_index, metadata_csum, huge_file, dir_nlink, extra_isize and\n"
	"      a journal (default size). Inode tables and the journal are zeroed\n"
	"      through the device's zeroout, so a thin device stays thin.\n"
	"      Defaults: -b 4096, -i 16384. Where DEV already holds an\n"
	"      ext2/3/4, xfs, btrfs, vfat, swap, LUKS, LVM or a partition\n"
	"      table, mkfs refuses (EEXIST, naming it) unless -F, --force is\n"
	"      given. A device in use (served by an export, under a mapper,\n"
	"      open by another command) is refused even with -F (EBUSY,\n"
	"      naming the holder).\n"
	"  ls [-l] DEV [/PATH]\n"
	"      List a directory (default /); -l adds mode, links, uid, gid,\n"
	"      size, mtime (UTC), inode number and a symlink's target.\n"
	"  stat DEV [/PATH]\n"
	"      Without PATH: the filesystem (blocks, inodes, journal, whether\n"
	"      it was clean). With PATH: the inode (mode, size, blocks, a\n"
	"      symlink's target, times with nanoseconds).\n"
	"  put DEV HOSTFILE /PATH\n"
	"      Copy HOSTFILE in as /PATH (replacing an existing file; the\n"
	"      parent directory must exist; the mode is HOSTFILE's). A pipe\n"
	"      such as /dev/stdin works too.\n"
	"  cat DEV /PATH\n"
	"      Write the file's bytes to stdout. Holes and unwritten extents\n"
	"      read as zeroes.\n"
	"  rm DEV /PATH\n"
	"      Remove a file, or an empty directory.\n"
	"  mkdir DEV /PATH\n"
	"      Make a directory (mode 0755).\n"
	"  mv DEV /FROM /TO\n"
	"      rename(2): replaces a file, or an empty directory, at /TO.\n"
	"  ln DEV /EXISTING /NEW\n"
	"      A hard link: /NEW names the same inode (not a directory:\n"
	"      EPERM). rm removes a name; the inode goes with the last one.\n"
	"  ln -s DEV TARGET /PATH\n"
	"      A symbolic link holding TARGET (any bytes, 1 to 4095; under 60\n"
	"      kept in the inode, longer in a block, as the kernel does).\n"
	"  readlink DEV /PATH\n"
	"      Print a symbolic link's target.\n"
	"  mknod DEV /PATH b|c MAJOR MINOR, mknod DEV /PATH p|s\n"
	"      A block or character device node (numbers up to 4095:1048575),\n"
	"      a fifo or a socket, mode 0644.\n"
	"  chmod DEV MODE /PATH\n"
	"      Set the permission bits (octal, up to 7777); the type stays. A\n"
	"      symbolic link's mode cannot be set (EOPNOTSUPP).\n"
	"  chown DEV UID[:GID] /PATH, chown DEV :GID /PATH\n"
	"      Set the owner and/or group (numbers). As chown(2), a\n"
	"      non-directory loses its set-user-ID bit (and set-group-ID when\n"
	"      group-executable).\n"
	"  touch [-a] [-m] [-d SECONDS[.FRACTION]] DEV /PATH\n"
	"      Set the access (-a) and/or modification (-m) time (default\n"
	"      both) to now or to -d, seconds since 1970 with up to nine\n"
	"      decimals (ext4 keeps nanoseconds, 1901 to 2446). Creates a\n"
	"      regular file when /PATH is missing. The ctime becomes now, as\n"
	"      with every change.\n"
	"  truncate -s SIZE DEV /PATH\n"
	"      Set the size; blocks past it are freed.\n"
	"  fallocate [-k] [-z|-p|-w] [-o OFFSET] -l LENGTH DEV /PATH\n"
	"      fallocate(2) on the file (created when missing), with ext4's\n"
	"      semantics and util-linux's letters:\n"
	"        (no mode)  allocate holes as unwritten extents; the size grows\n"
	"                   to OFFSET+LENGTH unless -k.\n"
	"        -p         punch a hole (implies -k): whole blocks are freed,\n"
	"                   partial blocks at the edges zeroed by writing.\n"
	"        -z         zero range: the range reads zeroes; whole blocks\n"
	"                   become unwritten extents, edges are written.\n"
	"        -w         write zeroes (FALLOC_FL_WRITE_ZEROES): the range\n"
	"                   becomes WRITTEN extents of zeroes, made by the\n"
	"                   device's unmap zeroing instead of by writing, so\n"
	"                   later overwrites need no unwritten conversion.\n"
	"                   Allocated unwritten first, that metadata flushed,\n"
	"                   zeroed by the device and flushed, and only then\n"
	"                   marked written: a crash never exposes old data.\n"
	"                   Refused with EOPNOTSUPP unless DEV has\n"
	"                   write_zeroes_unmap (see `blkstack info DEV`), and\n"
	"                   with -k (as the kernel does).\n"
	"      -k, -n  keep the size; -o OFFSET (default 0); -l LENGTH\n"
	"      (required). Sizes take K M G T P E suffixes (1024-based).\n"
	"  map DEV /PATH\n"
	"      The file's extents: logical block, physical block, length in\n"
	"      blocks, and written / unwritten (allocated, reads zeroes).\n"
	"  getfattr [-e text|hex] DEV /PATH [NAME]\n"
	"  getfattr --only-values DEV /PATH NAME\n"
	"      Extended attributes, one line each as getfattr(1) prints them:\n"
	"      NAME=\"VALUE\" (\", \\ and unprintable bytes as \\ooo) or,\n"
	"      for a value that is not text, NAME=0xHEX; -e chooses. Without\n"
	"      NAME: every attribute (user., trusted., security., and POSIX\n"
	"      ACLs, system.posix_acl_*, in the xattr format). --only-values:\n"
	"      the raw bytes of NAME's value, nothing else. A missing NAME is\n"
	"      ENODATA (\"No data available\").\n"
	"  setfattr DEV /PATH NAME VALUE, setfattr -x NAME DEV /PATH\n"
	"      Set NAME to VALUE (its bytes as given, or 0xHEX), or remove it\n"
	"      (-x; ENODATA when missing). NAME is whole, in user., trusted.\n"
	"      or security. (other prefixes: EOPNOTSUPP); user. names only on\n"
	"      regular files and directories (EPERM elsewhere), as the\n"
	"      kernel. Stored as ext4 stores them: in the inode while they\n"
	"      fit, then in one xattr block (shared blocks made by the kernel\n"
	"      are copied before a change). A value must fit that block:\n"
	"      4040 bytes for a short name on 4 KiB blocks; larger ones need\n"
	"      the ea_inode feature, which is not supported: ENOSPC.\n"
	"\n"
	CMD_HELP_DEV
	CMD_HELP_EXIT
	"  Errors name the device, the subcommand, the path and the reason:\n"
	"    blkstack: img: fs fallocate /f: Operation not supported (ext4:\n"
	"    fallocate: write zeroes: ...)\n"
	"\n"
	"EXAMPLES\n"
	"  truncate -s 4G disk.img\n"
	"  blkstack fs mkfs file:disk.img\n"
	"  blkstack fs mkfs -F file:disk.img         # replace what is there\n"
	"  blkstack fs fallocate -w -l 1G file:disk.img /f\n"
	"  blkstack fs map file:disk.img /f          # written extents\n"
	"  blkstack fs put file:disk.img /etc/hosts /hosts\n"
	"  blkstack fs ls -l file:disk.img /\n"
	"  blkstack fs ln -s file:disk.img hosts /h  # readlink: hosts\n"
	"  blkstack fs chmod file:disk.img 600 /hosts\n"
	"  blkstack fs touch -d 1700000000.5 file:disk.img /hosts\n"
	"  blkstack fs setfattr file:disk.img /hosts user.origin etc\n"
	"  blkstack fs getfattr file:disk.img /hosts   # user.origin=\"etc\"\n"
	"  blkstack fs setfattr -x user.origin file:disk.img /hosts\n"
	"  e2fsck -fn disk.img                      # clean\n",
};

BS_CMD(fs_cmd)
