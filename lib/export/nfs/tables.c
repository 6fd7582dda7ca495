/* SPDX-License-Identifier: MIT */
/*
 * The server's lookup tables (struct nfs_tables in nfs.h): one bucket
 * array per key, sized for the bounds on clients, sessions and states,
 * made with the first client record. Keys the server chose at random
 * (the 64 random bits of a stateid's "other" and of a session id) or in
 * sequence (a clientid's counter) pick their bucket by their low bits;
 * keys clients choose (file handles, client owners) go through SipHash
 * under a key drawn here.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/random.h"
#include "core/siphash.h"
#include "export/nfs/nfs.h"

int nfs_tables_get(struct nfs_server *srv)
{
	struct nfs_tables *t;

	if (srv->tab)
		return 0;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	if (bs_random_bytes(t->key, sizeof(t->key))) {
		free(t);
		return -EIO;
	}
	srv->tab = t;
	return 0;
}

void nfs_tables_free(struct nfs_server *srv)
{
	free(srv->tab);
	srv->tab = NULL;
}

/* the 64 random bits at @p (a stateid's or a session id's) */
static uint64_t random_bits(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

struct nfs_state **nfs_sid_bucket(struct nfs_server *srv,
				  const uint8_t *other)
{
	if (!srv->tab)
		return NULL;
	/* other: the boot tag, then the random bits (nfs_state_new) */
	return &srv->tab->sid[random_bits(other + 4) % NFS_STATE_BUCKETS];
}

static size_t fh_slot(struct nfs_server *srv, const struct nfs_fh *fh)
{
	return bs_siphash(srv->tab->key, fh->data, fh->len) %
	       NFS_STATE_BUCKETS;
}

struct nfs_state **nfs_file_bucket(struct nfs_server *srv,
				   const struct nfs_fh *fh)
{
	return srv->tab ? &srv->tab->file[fh_slot(srv, fh)] : NULL;
}

struct nfs_state **nfs_deleg_bucket(struct nfs_server *srv,
				    const struct nfs_fh *fh)
{
	return srv->tab ? &srv->tab->deleg[fh_slot(srv, fh)] : NULL;
}

struct nfs_state *nfs_file_states(struct nfs_server *srv,
				  const struct nfs_fh *fh)
{
	return srv->nstates ? *nfs_file_bucket(srv, fh) : NULL;
}

struct nfs_state *nfs_file_delegs(struct nfs_server *srv,
				  const struct nfs_fh *fh)
{
	return srv->nstates ? *nfs_deleg_bucket(srv, fh) : NULL;
}

struct nfs_client **nfs_clientid_bucket(struct nfs_server *srv, uint64_t id)
{
	/* the boot tag, then a counter: consecutive ids, adjacent buckets */
	return srv->tab ? &srv->tab->clientid[id % NFS_CLIENT_BUCKETS] : NULL;
}

struct nfs_client **nfs_owner_bucket(struct nfs_server *srv,
				     const uint8_t *owner, uint32_t len)
{
	if (!srv->tab)
		return NULL;
	return &srv->tab->owner[bs_siphash(srv->tab->key, owner, len) %
				NFS_CLIENT_BUCKETS];
}

struct nfs_session **nfs_sessid_bucket(struct nfs_server *srv,
				       const uint8_t *id)
{
	if (!srv->tab)
		return NULL;
	/* the boot tag, the random bits, the export (create_session) */
	return &srv->tab->sessid[random_bits(id + 4) % NFS_SESSION_BUCKETS];
}
