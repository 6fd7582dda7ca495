#!/usr/bin/env python3
# NFS v4.2 ops against a blkstackd nfs export, sent by the vendored pynfs's
# client library (its XDR packers, not blkstack's): a session, a file
# created by OPEN, then WRITE, ALLOCATE, DEALLOCATE, SEEK, READ_PLUS and
# WRITE_SAME with every result checked. Used by nfs_tshark.sh (which
# decodes the capture of this run) and nfs42_ws_state.py (the helpers).
#
#   PYNFS=build/peers/pynfs python3 nfs42_ops.py PORT ROOTDIR
#
# ROOTDIR is the exported host directory, to check bytes on the host.
# Prints one "ok ..." line per check; exits 1 at the first failure.
import os
import sys

sys.path.insert(0, os.path.join(os.environ["PYNFS"], "nfs4.1"))
sys.path.insert(0, os.environ["PYNFS"])

from nfs4client import NFS4Client  # noqa: E402
import nfs_ops  # noqa: E402
from xdrdef.nfs4_const import *  # noqa: E402,F401,F403
from xdrdef.nfs4_type import (app_data_block4, channel_attrs4,  # noqa: E402
                              createhow4, open_claim4, open_owner4,
                              openflag4, stateid4)

op = nfs_ops.NFS4ops()


def die(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def expect(res, status, what):
    if res.status != status:
        die("%s: %s, want %s" % (what, nfsstat4.get(res.status, res.status),
                                 nfsstat4.get(status, status)))
    print("ok %s: %s" % (what, nfsstat4.get(status, status)))


def session(port, name):
    c = NFS4Client(b"127.0.0.1", port, minorversion=2)
    clnt = c.new_client(name.encode())
    big = channel_attrs4(0, 262144, 262144, 8192, 16, 4, [])
    sess = clnt.create_session(flags=0, fore_attrs=big)
    sess.compound([op.reclaim_complete(FALSE)])
    return c, sess


def open_file(sess, name, access=OPEN4_SHARE_ACCESS_BOTH, owner=b"owner",
              create=True):
    how = openflag4(OPEN4_CREATE, createhow4(UNCHECKED4, {FATTR4_MODE: 0o644})
                    ) if create else openflag4(OPEN4_NOCREATE)
    res = sess.compound([
        op.putrootfh(),
        op.open(0, access | OPEN4_SHARE_ACCESS_WANT_NO_DELEG,
                OPEN4_SHARE_DENY_NONE, open_owner4(0, owner), how,
                open_claim4(CLAIM_NULL, name.encode())),
        op.getfh()])
    expect(res, NFS4_OK, "OPEN %s" % name)
    return res.resarray[-1].object, res.resarray[-2].stateid


def adb(offset, bsize, count, pattern=b"", reloff_pattern=0,
        reloff_blocknum=0xffffffffffffffff, block_num=0):
    return app_data_block4(offset, bsize, count, reloff_blocknum, block_num,
                           reloff_pattern, pattern)


def main():
    port, root = int(sys.argv[1]), sys.argv[2]
    c, sess = session(port, "nfs42-ops-%d" % os.getpid())
    fh, sid = open_file(sess, "f42")
    host = os.path.join(root, "f42")

    res = sess.compound([op.putfh(fh),
                         op.write(sid, 0, FILE_SYNC4, b"x" * 65536)])
    expect(res, NFS4_OK, "WRITE 64 KiB")
    res = sess.compound([op.putfh(fh), op.allocate(sid, 1 << 20, 1 << 20)])
    expect(res, NFS4_OK, "ALLOCATE 1 MiB at 1 MiB")
    if os.path.getsize(host) != 2 << 20:
        die("ALLOCATE: size %d" % os.path.getsize(host))
    res = sess.compound([op.putfh(fh), op.deallocate(sid, 0, 32768)])
    expect(res, NFS4_OK, "DEALLOCATE 32 KiB at 0")
    res = sess.compound([op.putfh(fh), op.seek(sid, 0, NFS4_CONTENT_DATA)])
    expect(res, NFS4_OK, "SEEK DATA from 0")
    if res.resarray[-1].sr_offset != 32768 or res.resarray[-1].sr_eof:
        die("SEEK: %r" % res.resarray[-1])
    print("ok SEEK: data at 32768")
    res = sess.compound([op.putfh(fh), op.read_plus(sid, 0, 65536)])
    expect(res, NFS4_OK, "READ_PLUS 64 KiB at 0")
    segs = res.resarray[-1].rpr_contents
    kinds = [s.rpc_content for s in segs]
    if kinds[0] != NFS4_CONTENT_HOLE or NFS4_CONTENT_DATA not in kinds:
        die("READ_PLUS: segments %r" % segs)
    print("ok READ_PLUS: %d segments, a hole first" % len(segs))

    # WRITE_SAME: a 2-byte pattern from byte 8, block numbers at 0
    res = sess.compound([op.putfh(fh), op.write_same(
        sid, UNSTABLE4, adb(2 << 20, 4096, 4, b"\xa5\xc3", 8, 0, 5))])
    expect(res, NFS4_OK, "WRITE_SAME pattern UNSTABLE")
    r = res.resarray[-1]
    if r.wr_count != 16384 or r.wr_committed != UNSTABLE4:
        die("WRITE_SAME: %r" % r)
    res = sess.compound([op.putfh(fh), op.commit(0, 0)])
    expect(res, NFS4_OK, "COMMIT")
    with open(host, "rb") as f:
        f.seek(2 << 20)
        d = f.read(16384)
    for i in range(4):
        want = (5 + i).to_bytes(8, "big") + (b"\xa5\xc3" * 2048)[:4088]
        if d[i * 4096:(i + 1) * 4096] != want:
            die("WRITE_SAME: block %d differs" % i)
    print("ok WRITE_SAME: 4 blocks on the host as laid out")
    res = sess.compound([op.putfh(fh), op.write_same(
        sid, FILE_SYNC4, adb(0, 65536, 1))])
    expect(res, NFS4_OK, "WRITE_SAME zeroes FILE_SYNC")
    if res.resarray[-1].wr_committed != FILE_SYNC4:
        die("WRITE_SAME: committed %r" % res.resarray[-1])
    res = sess.compound([op.putfh(fh), op.write_same(
        sid, FILE_SYNC4, adb(0, 0, 1))])
    expect(res, NFS4ERR_INVAL, "WRITE_SAME block size 0")
    res = sess.compound([op.putfh(fh), op.close(0, sid)])
    expect(res, NFS4_OK, "CLOSE")
    c.shutdown() if hasattr(c, "shutdown") else None
    print("PASS")
    os._exit(0)


if __name__ == "__main__":
    main()
