#!/usr/bin/env python3
# WRITE_SAME's stateid rules against a blkstackd nfs export, sent by the
# vendored pynfs's client library (helpers in nfs42_ops.py):
#   a read-only open's stateid         NFS4ERR_OPENMODE
#   a closed (freed) stateid           NFS4ERR_BAD_STATEID
#   an older seqid of an open          NFS4ERR_OLD_STATEID
#   a seqid the open never had         NFS4ERR_BAD_STATEID
#   another file's stateid             NFS4ERR_BAD_STATEID
#   seqid 0 (4.1: the current one)     NFS4_OK
#   the current stateid after OPEN     NFS4_OK (in the same COMPOUND)
# and no refused request wrote a byte (the host file's size stays).
#
#   PYNFS=build/peers/pynfs python3 nfs42_ws_state.py PORT ROOTDIR
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nfs42_ops import adb, die, expect, open_file, op, session  # noqa: E402
from xdrdef.nfs4_const import *  # noqa: E402,F401,F403
from xdrdef.nfs4_type import (createhow4, open_claim4,  # noqa: E402
                              open_owner4, openflag4, stateid4)


def ws(sess, fh, sid, what, status, off=0):
    res = sess.compound([op.putfh(fh), op.write_same(
        sid, FILE_SYNC4, adb(off, 4096, 2, b"\x11"))])
    expect(res, status, "WRITE_SAME with " + what)


def main():
    port, root = int(sys.argv[1]), sys.argv[2]
    c, sess = session(port, "nfs42-ws-state-%d" % os.getpid())
    fh, sid = open_file(sess, "s1", owner=b"w")
    fh2, sid2 = open_file(sess, "s2", owner=b"w")
    host = os.path.join(root, "s1")

    _, rsid = open_file(sess, "s1", OPEN4_SHARE_ACCESS_READ, owner=b"r",
                        create=False)
    ws(sess, fh, rsid, "a read-only open's stateid", NFS4ERR_OPENMODE)
    ws(sess, fh, stateid4(sid.seqid + 5, sid.other), "a seqid never given",
       NFS4ERR_BAD_STATEID)
    ws(sess, fh, sid2, "another file's stateid", NFS4ERR_BAD_STATEID)
    # the same owner opens again: the open's seqid moves on
    _, sid_b = open_file(sess, "s1", owner=b"w", create=False)
    if sid_b.other != sid.other or sid_b.seqid != sid.seqid + 1:
        die("second OPEN: %r after %r" % (sid_b, sid))
    ws(sess, fh, sid, "an older seqid", NFS4ERR_OLD_STATEID)
    if os.path.getsize(host) != 0:
        die("a refused WRITE_SAME wrote: size %d" % os.path.getsize(host))
    print("ok: refused requests wrote nothing")
    ws(sess, fh, stateid4(0, sid.other), "seqid 0 (current)", NFS4_OK)
    if os.path.getsize(host) != 8192:
        die("size %d after WRITE_SAME" % os.path.getsize(host))
    with open(host, "rb") as f:
        if f.read() != b"\x11" * 8192:
            die("WRITE_SAME bytes")
    # OPEN then WRITE_SAME with the current stateid, one COMPOUND
    res = sess.compound([
        op.putrootfh(),
        op.open(0, OPEN4_SHARE_ACCESS_BOTH | OPEN4_SHARE_ACCESS_WANT_NO_DELEG,
                OPEN4_SHARE_DENY_NONE, open_owner4(0, b"cur"),
                openflag4(OPEN4_CREATE, createhow4(UNCHECKED4,
                                                   {FATTR4_MODE: 0o644})),
                open_claim4(CLAIM_NULL, b"s3")),
        op.write_same(stateid4(1, b"\0" * 12), FILE_SYNC4,
                      adb(0, 512, 3, b"\x22"))])
    expect(res, NFS4_OK, "OPEN + WRITE_SAME with the current stateid")
    if os.path.getsize(os.path.join(root, "s3")) != 1536:
        die("s3 size")
    cur = res.resarray[-2].stateid
    res = sess.compound([op.putfh(fh), op.close(0, sid_b)])
    expect(res, NFS4_OK, "CLOSE")
    ws(sess, fh, sid_b, "a closed stateid", NFS4ERR_BAD_STATEID, 65536)
    if os.path.getsize(host) != 8192:
        die("a WRITE_SAME with a closed stateid wrote")
    del cur
    print("PASS")
    os._exit(0)


if __name__ == "__main__":
    main()
