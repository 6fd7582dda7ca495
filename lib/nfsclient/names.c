/* SPDX-License-Identifier: MIT */
/*
 * Names on the server: PUTROOTFH + LOOKUP per path component, GETATTR,
 * READDIR (cookies until eof), REMOVE.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <blkstack/bdev.h>

#include "nfsclient/internal.h"

#define NAME_MAX_LEN NFSC_NAME_MAX
/* LOOKUPs in one compound, at most (servers limit the op count). */
#define LOOKUPS_MAX 12u

int nfsc_put_path(struct nfsc_cpd *c, const char *path, uint32_t *nlookups)
{
	const char *p = path;

	*nlookups = 0;
	nfsc_cpd_op(c, OP_PUTROOTFH);
	while (*p) {
		size_t n;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		n = strcspn(p, "/");
		if (n > NAME_MAX_LEN)
			return bs_error(-ENAMETOOLONG, "nfs %s: %s: a name of "
					"%zu bytes", c->nfs->peer, c->what, n);
		if (++*nlookups > LOOKUPS_MAX)
			return bs_error(-ENAMETOOLONG, "nfs %s: %s: more than "
					"%u path components", c->nfs->peer,
					c->what, LOOKUPS_MAX);
		nfsc_cpd_op(c, OP_LOOKUP);
		xdr_put_string(&c->e, p, n, NFS4_OPAQUE_LIMIT);
		p += n;
	}
	return 0;
}

/* Read the results of nfsc_put_path(). */
static int path_results(struct nfsc_cpd *c, uint32_t n)
{
	int err = nfsc_cpd_res(c, OP_PUTROOTFH);

	while (!err && n--)
		err = nfsc_cpd_res(c, OP_LOOKUP);
	return err;
}

static void get_fh(struct xdr_dec *d, struct bs_nfs_fh *fh)
{
	fh->len = xdr_get_opaque(d, fh->data, sizeof(fh->data),
				 NFS4_FHSIZE);
}

int bs_nfs_lookup(struct bs_nfs *nfs, const char *path, struct bs_nfs_fh *fh,
		  struct bs_nfs_attr *attr)
{
	char what[64];
	struct nfsc_cpd c;
	struct bs_nfs_attr a;
	uint32_t n;
	int err;

	snprintf(what, sizeof(what), "LOOKUP /%.50s",
		 path + strspn(path, "/"));
	nfsc_cpd_begin(nfs, &c, what);
	if ((err = nfsc_put_path(&c, path, &n)))
		return err;
	nfsc_cpd_op(&c, OP_GETFH);
	nfsc_cpd_op(&c, OP_GETATTR);
	nfsc_put_attr_request(&c.e);
	if ((err = nfsc_cpd_call(&c)) || (err = path_results(&c, n)))
		return err;
	if ((err = nfsc_cpd_res(&c, OP_GETFH)))
		return err;
	get_fh(&c.d, fh);
	if ((err = nfsc_cpd_res(&c, OP_GETATTR)))
		return err;
	nfsc_get_fattr(&c.d, attr ? attr : &a);
	return nfsc_cpd_end(&c);
}

int bs_nfs_getattr(struct bs_nfs *nfs, const struct bs_nfs_fh *fh,
		   struct bs_nfs_attr *attr)
{
	struct nfsc_cpd c;
	int err;

	nfsc_cpd_begin(nfs, &c, "GETATTR");
	nfsc_cpd_op(&c, OP_PUTFH);
	xdr_put_opaque(&c.e, fh->data, fh->len, NFS4_FHSIZE);
	nfsc_cpd_op(&c, OP_GETATTR);
	nfsc_put_attr_request(&c.e);
	if ((err = nfsc_cpd_call(&c)) || (err = nfsc_cpd_res(&c, OP_PUTFH)) ||
	    (err = nfsc_cpd_res(&c, OP_GETATTR)))
		return err;
	nfsc_get_fattr(&c.d, attr);
	return nfsc_cpd_end(&c);
}

int bs_nfs_readdir(struct bs_nfs *nfs, const struct bs_nfs_fh *dir,
		   bs_nfs_dirent_fn fn, void *arg)
{
	uint8_t verf[NFS4_VERIFIER_SIZE] = { 0 };
	uint64_t cookie = 0;
	bool eof = false;
	unsigned rounds = 0;

	while (!eof) {
		struct nfsc_cpd c;
		int err;

		if (++rounds > 100000)
			return bs_error(-ELOOP, "nfs %s: READDIR never ends",
					nfs->peer);
		nfsc_cpd_begin(nfs, &c, "READDIR");
		nfsc_cpd_op(&c, OP_PUTFH);
		xdr_put_opaque(&c.e, dir->data, dir->len, NFS4_FHSIZE);
		nfsc_cpd_op(&c, OP_READDIR);
		xdr_put_u64(&c.e, cookie);
		xdr_put_fixed(&c.e, verf, sizeof(verf));
		xdr_put_u32(&c.e, 16384);	/* dircount */
		xdr_put_u32(&c.e, 65536);	/* maxcount */
		nfsc_put_attr_request(&c.e);
		if ((err = nfsc_cpd_call(&c)) ||
		    (err = nfsc_cpd_res(&c, OP_PUTFH)) ||
		    (err = nfsc_cpd_res(&c, OP_READDIR)))
			return err;
		xdr_get_fixed(&c.d, verf, sizeof(verf));
		while (xdr_get_bool(&c.d)) {
			struct bs_nfs_attr a;
			char name[NAME_MAX_LEN + 1];

			cookie = xdr_get_u64(&c.d);
			xdr_get_cstring(&c.d, name, sizeof(name),
					NAME_MAX_LEN);
			nfsc_get_fattr(&c.d, &a);
			if ((err = nfsc_cpd_end(&c)))
				return err;
			if (!strcmp(name, ".") || !strcmp(name, ".."))
				continue;
			if ((err = fn(arg, name, &a)))
				return err > 0 ? 0 : err;
		}
		eof = xdr_get_bool(&c.d);
		if ((err = nfsc_cpd_end(&c)))
			return err;
	}
	return 0;
}

int nfsc_split_path(struct bs_nfs *nfs, const char *path, char *parent,
		    size_t cap, char *name)
{
	size_t len = strlen(path), start;

	while (len && path[len - 1] == '/')
		len--;
	start = len;
	while (start && path[start - 1] != '/')
		start--;
	if (start == len)
		return bs_error(-EINVAL, "nfs %s: '/%s': no name to act on",
				nfs->peer, path);
	if (len - start > NAME_MAX_LEN || start >= cap)
		return bs_error(-ENAMETOOLONG, "nfs %s: '/%s': too long",
				nfs->peer, path);
	memcpy(parent, path, start);
	parent[start] = 0;
	memcpy(name, path + start, len - start);
	name[len - start] = 0;
	return 0;
}

int bs_nfs_remove(struct bs_nfs *nfs, const char *path)
{
	char parent[1024], name[NFSC_NAME_MAX + 1], what[64];
	struct nfsc_cpd c;
	uint32_t n;
	int err;

	if ((err = nfsc_split_path(nfs, path, parent, sizeof(parent), name)))
		return err;
	snprintf(what, sizeof(what), "REMOVE /%.50s",
		 path + strspn(path, "/"));
	nfsc_cpd_begin(nfs, &c, what);
	if ((err = nfsc_put_path(&c, parent, &n)))
		return err;
	nfsc_cpd_op(&c, OP_REMOVE);
	xdr_put_cstring(&c.e, name, NFS4_OPAQUE_LIMIT);
	if ((err = nfsc_cpd_call(&c)) || (err = path_results(&c, n)) ||
	    (err = nfsc_cpd_res(&c, OP_REMOVE)))
		return err;
	return 0;
}
