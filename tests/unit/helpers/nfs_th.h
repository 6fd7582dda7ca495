/* SPDX-License-Identifier: MIT */
/*
 * An NFS server for unit tests: the directory backend over an existing
 * host directory, or the ext4 backend on a device, with the settings the
 * NFS unit tests share (60 s lease, no grace period, export 7, boot tag
 * 0x1234, booted a second ago). Released with nfs_server_put(). Also the
 * fixture most of them share (struct nfs_th_fix).
 */
#ifndef BLKSTACK_TEST_NFS_TH_H
#define BLKSTACK_TEST_NFS_TH_H

#include <stddef.h>
#include <stdint.h>

struct bs_dev;
struct nfs_server;
struct xdr_enc;
struct xdr_dec;

/* NULL when @dir cannot be opened as a directory export. */
struct nfs_server *nfs_th_dir_server(const char *dir);
/*
 * The directory export of a new temporary directory: @dir holds a
 * mkdtemp template ("/tmp/NAME.XXXXXX") and gets its name; NULL (the
 * directory removed again) when it cannot be served (open_by_handle_at
 * needs CAP_DAC_READ_SEARCH): the test then skips. nfs_th_tmp_drop()
 * releases the server and removes the directory with what it holds.
 */
struct nfs_server *nfs_th_tmp_server(char *dir);
void nfs_th_tmp_drop(struct nfs_server *srv, const char *dir);
/* The ext4 on @dev (made by bs_fs_mkfs), read-write; NULL on failure. */
struct nfs_server *nfs_th_ext4_server(struct bs_dev *dev);

/*
 * The fixture of most NFS unit tests: the directory export (@srv) of a
 * new temporary directory (@dir), made by nfs_th_tmp_server() and
 * dropped by nfs_th_tmp_drop(). A test that wants only this uses
 * nfs_th_fix_setup() and nfs_th_fix_teardown() as its cmocka fixture
 * (*state is the struct nfs_th_fix); one whose fixture holds more puts a
 * struct nfs_th_fix named th first in its own and makes it with
 * NFS_TH_FIX_NEW(), frees it with nfs_th_fix_free().
 */
struct nfs_th_fix {
	char dir[64];
	struct nfs_server *srv;
};

/*
 * @size zeroed bytes that begin with a struct nfs_th_fix serving a new
 * directory @base/<test program>.XXXXXX; when it cannot be served
 * (nfs_th_tmp_server()) nothing is left and the test is skipped.
 */
void *nfs_th_fix_alloc(size_t size, const char *base);
#define NFS_TH_FIX_NEW(type, base)                                        \
	({                                                                \
		_Static_assert(__builtin_offsetof(type, th) == 0,         \
			       #type ": struct nfs_th_fix th comes first"); \
		(type *)nfs_th_fix_alloc(sizeof(type), (base));           \
	})
/* The server released, the directory removed with what it holds, @fix
 * (from nfs_th_fix_alloc()) freed. */
void nfs_th_fix_free(void *fix);
/* cmocka setup and teardown: *state is a struct nfs_th_fix under /tmp. */
int nfs_th_fix_setup(void **state);
int nfs_th_fix_teardown(void **state);
/* A cmocka test of @fn with that fixture. */
#define nfs_th_fix_test(fn)                                               \
	cmocka_unit_test_setup_teardown(fn, nfs_th_fix_setup,             \
					nfs_th_fix_teardown)

/*
 * Run the COMPOUND arguments in @e (AUTH_SYS, uid 0) at @minor against
 * @srv, the reply in @out; @d is left after the last result's status,
 * which is returned. The first result, when more follow, must be
 * SEQUENCE's (its 36-byte body is skipped); the others are read as
 * status only, so only the last may have a body.
 */
uint32_t nfs_th_run(struct nfs_server *srv, uint32_t minor,
		    struct xdr_enc *e, struct xdr_dec *d, uint8_t *out,
		    size_t cap);
/* the same, as if it came on connection @conn_id (nfs_th_run: @minor) */
uint32_t nfs_th_run_on(struct nfs_server *srv, uint32_t minor,
		       uint64_t conn_id, struct xdr_enc *e, struct xdr_dec *d,
		       uint8_t *out, size_t cap);

/*
 * A whole RPC call for nfs_rpc_process(), in @buf: the header (xid
 * 0xabcd, AUTH_SYS uid 0 gid 0 machine "host", no verifier) of procedure
 * @proc; nfs_th_compound() adds COMPOUND's (tag "t", minor version
 * @minor, @nops ops to come), the caller the ops.
 */
void nfs_th_call(struct xdr_enc *e, void *buf, size_t cap, uint32_t proc);
void nfs_th_compound(struct xdr_enc *e, void *buf, size_t cap,
		     uint32_t minor, uint32_t nops);

/*
 * Ops for a COMPOUND the caller has begun, each with its op number:
 * EXCHANGE_ID with verifier @verf (8 bytes) and owner @owner, no flags,
 * SP4_NONE, no implementation id; CREATE_SESSION of client @clid at
 * sequence @seq, no flags, the channels @fore and @back (no header pad,
 * no RDMA), callback program @cb_prog, no callback security.
 */
struct nfs_th_chan {
	uint32_t maxreq, maxresp, maxresp_cached, maxops, slots;
};

void nfs_th_put_exchange_id(struct xdr_enc *e, const void *verf,
			    const char *owner);
void nfs_th_put_create_session(struct xdr_enc *e, uint64_t clid,
			       uint32_t seq, const struct nfs_th_chan *fore,
			       const struct nfs_th_chan *back,
			       uint32_t cb_prog);
/*
 * The same with CREATE_SESSION flags @flags and, unless @sys_uid is
 * UINT32_MAX, AUTH_SYS callback security (machine "cb", stamp 13, uid
 * @sys_uid, gid @sys_uid + 1).
 */
void nfs_th_put_create_session_cb(struct xdr_enc *e, uint64_t clid,
				  uint32_t seq,
				  const struct nfs_th_chan *fore,
				  const struct nfs_th_chan *back,
				  uint32_t cb_prog, uint32_t flags,
				  uint32_t sys_uid);

/*
 * A client of @srv with a session, as two v4.2 COMPOUNDs on connection
 * @conn_id (nfs_th_run_on()): EXCHANGE_ID with verifier @verf and owner
 * @owner, then CREATE_SESSION with @chan both ways and callback program
 * 0x40000000; both must succeed. The session id (NFS4_SESSIONID_SIZE
 * bytes) in @sid; its first SEQUENCE is sequence id 1.
 */
void nfs_th_session(struct nfs_server *srv, uint64_t conn_id,
		    const void *verf, const char *owner,
		    const struct nfs_th_chan *chan, uint8_t *sid);

#endif
