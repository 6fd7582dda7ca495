/* SPDX-License-Identifier: MIT */
/*
 * Extended attributes of one inode (getxattr, setxattr, listxattr,
 * removexattr), stored as the kernel's ext4 stores them: in the inode's
 * extra space first, then in one external xattr block (which the kernel
 * may share between inodes, with a reference count). libext2fs' xattr
 * handle does the layout; this file names the rules of the system calls:
 * namespaces, create/replace, size limits, ctime.
 *
 * Values live in the inode or the block only: a value larger than one
 * block holds would need a value inode (the ea_inode feature), which this
 * layer does not make: -ENOSPC with that reason.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ext2fs/ext2fs.h>

#include <blkstack/fs.h>

#include "fs/internal.h"


/* The namespaces a caller may set, as ext4 keeps them (a name index each). */
static const char *const settable[] = { "user.", "trusted.", "security." };

/* The namespace prefix @name starts with, or NULL. */
static const char *ns_of(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(settable) / sizeof(settable[0]); i++)
		if (!strncmp(name, settable[i], strlen(settable[i])))
			return settable[i];
	return NULL;
}

/*
 * The name rules of the system calls: a known namespace (else
 * -EOPNOTSUPP), something after it (-EINVAL), 255 bytes at most
 * (-ERANGE). @get also allows the POSIX ACL names libext2fs reads.
 */
static int check_name(struct bs_fs *fs, const char *what, const char *name,
		      bool get)
{
	const char *ns = ns_of(name);
	size_t n = strlen(name);

	if (n > BS_FS_XATTR_NAME_MAX)
		return fs_err(fs, -ERANGE, "%s: xattr name of %zu bytes (at most "
			      "%d)", what, n, BS_FS_XATTR_NAME_MAX);
	if (get && (!strcmp(name, "system.posix_acl_access") ||
		    !strcmp(name, "system.posix_acl_default")))
		return 0;
	if (!ns)
		return fs_err(fs, -EOPNOTSUPP, "%s: '%s': not in a namespace this "
			      "layer supports (user., trusted., security.)",
			      what, name);
	if (n == strlen(ns))
		return fs_err(fs, -EINVAL, "%s: '%s': empty name after the "
			      "namespace", what, name);
	return 0;
}

/* Inode @ino, in use; *@user_ok: it may hold user.* names (files, dirs). */
static int live_inode(struct bs_fs *fs, uint32_t ino, bool *user_ok)
{
	struct ext2_inode inode;
	int err = fs_read_inode(fs, ino, &inode);

	if (err)
		return err;
	if (!inode.i_links_count || !inode.i_mode ||
	    !ext2fs_test_inode_bitmap2(fs->e2->inode_map, ino))
		return fs_err(fs, -ENOENT, "inode %u was removed", ino);
	/* the kernel's rule: user.* only on regular files and directories */
	*user_ok = LINUX_S_ISREG(inode.i_mode) || LINUX_S_ISDIR(inode.i_mode);
	return 0;
}

/* Open and read the xattrs of @ino. */
static int open_handle(struct bs_fs *fs, uint32_t ino,
		       struct ext2_xattr_handle **h)
{
	errcode_t ret = ext2fs_xattrs_open(fs->e2, ino, h);

	if (ret == EXT2_ET_MISSING_EA_FEATURE)
		return fs_err(fs, -EOPNOTSUPP, "the filesystem has no ext_attr "
			      "feature");
	if (ret)
		return fs_fail(fs, ret, "xattrs of inode %u", ino);
	ret = ext2fs_xattrs_read(*h);
	if (ret) {
		ext2fs_xattrs_close(h);
		return fs_fail(fs, ret, "reading the xattrs of inode %u", ino);
	}
	return 0;
}

/* Is @name there (present: 1)? Errors as negative errno. */
static int has_name(struct bs_fs *fs, struct ext2_xattr_handle *h,
		    const char *name)
{
	size_t len = 0;
	void *v = NULL;
	errcode_t ret = ext2fs_xattr_get(h, name, &v, &len);

	if (ret == EXT2_ET_EA_KEY_NOT_FOUND)
		return 0;
	if (ret)
		return fs_fail(fs, ret, "reading xattr '%s'", name);
	ext2fs_free_mem(&v);
	return 1;
}

int bs_fs_getxattr(struct bs_fs *fs, uint32_t ino, const char *name,
		   void *buf, size_t cap, size_t *len)
{
	struct ext2_xattr_handle *h;
	bool user_ok;
	size_t n = 0;
	void *v = NULL;
	errcode_t ret;
	int err;

	if ((err = check_name(fs, "getxattr", name, true)) ||
	    (err = live_inode(fs, ino, &user_ok)))
		return err;
	if (!user_ok && !strncmp(name, "user.", 5))
		return fs_err(fs, -ENODATA, "getxattr: '%s': no user. names on "
			      "this type of inode", name);
	if ((err = open_handle(fs, ino, &h)))
		return err;
	ret = ext2fs_xattr_get(h, name, &v, &n);
	ext2fs_xattrs_close(&h);
	if (ret == EXT2_ET_EA_KEY_NOT_FOUND)
		return fs_err(fs, -ENODATA, "getxattr: '%s': no such attribute",
			      name);
	if (ret)
		return fs_fail(fs, ret, "getxattr: '%s'", name);
	*len = n;
	if (cap && n > cap)
		err = fs_err(fs, -ERANGE, "getxattr: '%s': the value has %zu "
			     "bytes, the buffer %zu", name, n, cap);
	else if (cap)
		memcpy(buf, v, n);
	ext2fs_free_mem(&v);
	return err;
}

struct list {
	char *buf;
	size_t cap, len;
};

static int list_one(char *name, char *value, size_t value_len, void *arg)
{
	struct list *l = arg;
	size_t n = strlen(name) + 1;

	(void)value;
	(void)value_len;
	/* inline data lives in "system.data"; the kernel does not list it */
	if (!strcmp(name, "system.data"))
		return 0;
	if (l->cap && l->len + n <= l->cap)
		memcpy(l->buf + l->len, name, n);
	l->len += n;
	return 0;
}

int bs_fs_listxattr(struct bs_fs *fs, uint32_t ino, char *buf, size_t cap,
		    size_t *len)
{
	struct ext2_xattr_handle *h;
	struct list l = { .buf = buf, .cap = cap };
	bool user_ok;
	errcode_t ret;
	int err;

	if ((err = live_inode(fs, ino, &user_ok)) ||
	    (err = open_handle(fs, ino, &h)))
		return err;
	ret = ext2fs_xattrs_iterate(h, list_one, &l);
	ext2fs_xattrs_close(&h);
	if (ret)
		return fs_fail(fs, ret, "listxattr of inode %u", ino);
	*len = l.len;
	if (cap && l.len > cap)
		return fs_err(fs, -ERANGE, "listxattr: the names take %zu bytes, "
			      "the buffer %zu", l.len, cap);
	return 0;
}

size_t bs_fs_xattr_value_max(struct bs_fs *fs, const char *name)
{
	const char *ns = ns_of(name);
	size_t short_len = strlen(name) - (ns ? strlen(ns) : 0);
	size_t room = fs->e2->blocksize -
		      sizeof(struct ext2_ext_attr_header) - sizeof(__u32) -
		      EXT2_EXT_ATTR_LEN(short_len);

	return room & ~(size_t)(EXT2_EXT_ATTR_PAD - 1);
}

/*
 * After a change. libext2fs writes an xattr block even when no entry is
 * left for it (its last one removed or moved into the inode); the
 * kernel's ext4 drops the block then: one reference less, freed with the
 * last. And the ctime moves, as with every change of the inode.
 */
static int after_change(struct bs_fs *fs, uint32_t ino)
{
	struct ext2_inode inode;
	blk64_t blk;
	char *buf = NULL;
	errcode_t ret;
	int err;

	if ((err = fs_read_inode(fs, ino, &inode)))
		return err;
	blk = ext2fs_file_acl_block(fs->e2, &inode);
	if (blk) {
		ret = ext2fs_get_mem(fs->e2->blocksize, &buf);
		if (!ret)
			ret = ext2fs_read_ext_attr3(fs->e2, blk, buf, ino);
		/* the first entry is the end: the block is empty */
		if (!ret && !*(__u32 *)(buf + sizeof(struct ext2_ext_attr_header)))
			ret = ext2fs_free_ext_attr(fs->e2, ino, NULL);
		ext2fs_free_mem(&buf);
		if (ret)
			return fs_fail(fs, ret, "dropping the empty xattr block "
				       "%llu of inode %u", (unsigned long long)blk,
				       ino);
		if ((err = fs_read_inode(fs, ino, &inode)))
			return err;
	}
	return fs_write_inode_times(fs, ino, &inode, FS_CTIME, NULL);
}

static int do_setxattr(struct bs_fs *fs, uint32_t ino, const char *name,
		       const void *val, size_t len, unsigned flags)
{
	struct ext2_xattr_handle *h = NULL;
	size_t max;
	bool user_ok;
	errcode_t ret;
	int err, have;

	if ((err = fs_check_rw(fs, "setxattr")))
		return err;
	if (flags & ~(unsigned)(BS_FS_XATTR_CREATE | BS_FS_XATTR_REPLACE) ||
	    flags == (BS_FS_XATTR_CREATE | BS_FS_XATTR_REPLACE))
		return fs_err(fs, -EINVAL, "setxattr: bad flags %#x", flags);
	if ((err = check_name(fs, "setxattr", name, false)) ||
	    (err = live_inode(fs, ino, &user_ok)))
		return err;
	if (!user_ok && !strncmp(name, "user.", 5))
		return fs_err(fs, -EPERM, "setxattr: '%s': user. names only on "
			      "regular files and directories", name);
	max = bs_fs_xattr_value_max(fs, name);
	if (len > max)
		return fs_err(fs, -ENOSPC, "setxattr: '%s': a value of %zu bytes "
			      "is more than one xattr block holds (%zu); larger "
			      "values need the ea_inode feature, which this "
			      "layer does not support", name, len, max);
	if ((err = open_handle(fs, ino, &h)))
		return err;
	have = has_name(fs, h, name);
	if (have < 0) {
		err = have;
		goto out;
	}
	if (have && (flags & BS_FS_XATTR_CREATE)) {
		err = fs_err(fs, -EEXIST, "setxattr: '%s' exists", name);
		goto out;
	}
	if (!have && (flags & BS_FS_XATTR_REPLACE)) {
		err = fs_err(fs, -ENODATA, "setxattr: '%s': no such attribute "
			     "to replace", name);
		goto out;
	}
	fs_op_note(fs, ino);
	ret = ext2fs_xattr_set(h, name, val, len);
	if (ret == EXT2_ET_EA_NO_SPACE)
		err = fs_err(fs, -ENOSPC, "setxattr: '%s': no room left in inode "
			     "%u's extra space nor in its xattr block", name, ino);
	else if (ret)
		err = fs_fail(fs, ret, "setxattr: '%s'", name);
	else
		err = after_change(fs, ino);
out:
	ext2fs_xattrs_close(&h);
	return err;
}

int bs_fs_setxattr(struct bs_fs *fs, uint32_t ino, const char *name,
		   const void *val, size_t len, unsigned flags)
{
	struct fs_op op;

	fs_op_begin(&op, fs);
	return fs_op_end(&op, do_setxattr(fs, ino, name, val, len, flags));
}

static int do_removexattr(struct bs_fs *fs, uint32_t ino, const char *name)
{
	struct ext2_xattr_handle *h = NULL;
	bool user_ok;
	errcode_t ret;
	int err, have;

	if ((err = fs_check_rw(fs, "removexattr")) ||
	    (err = check_name(fs, "removexattr", name, false)) ||
	    (err = live_inode(fs, ino, &user_ok)))
		return err;
	if (!user_ok && !strncmp(name, "user.", 5))
		return fs_err(fs, -EPERM, "removexattr: '%s': user. names only "
			      "on regular files and directories", name);
	if ((err = open_handle(fs, ino, &h)))
		return err;
	have = has_name(fs, h, name);
	if (have <= 0) {
		err = have ? have : fs_err(fs, -ENODATA, "removexattr: '%s': no "
					   "such attribute", name);
		goto out;
	}
	fs_op_note(fs, ino);
	ret = ext2fs_xattr_remove(h, name);
	if (ret)
		err = fs_fail(fs, ret, "removexattr: '%s'", name);
	else
		err = after_change(fs, ino);
out:
	ext2fs_xattrs_close(&h);
	return err;
}

int bs_fs_removexattr(struct bs_fs *fs, uint32_t ino, const char *name)
{
	struct fs_op op;

	fs_op_begin(&op, fs);
	return fs_op_end(&op, do_removexattr(fs, ino, name));
}
