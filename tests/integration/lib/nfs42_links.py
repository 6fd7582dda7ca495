#!/usr/bin/env python3
# Symbolic links, hard links, device nodes and SETATTR against a
# blkstackd nfs export of ext4 (or any), sent by the vendored pynfs's
# client library (helpers in nfs42_ops.py). Makes, in the export's root:
#   sl -> f                 CREATE NF4LNK, READLINK
#   slong -> 4095 bytes     CREATE NF4LNK, READLINK
#   f  "nfs data\n"         OPEN UNCHECKED4 + WRITE; mode 0640, owner 1234,
#                           mtime 1500000000.123456789, atime server time
#   g, d/h                  LINK to f (numlinks 3)
#   d                       CREATE NF4DIR; mode 0750 by SETATTR
#   c                       CREATE NF4CHR 1:3 (rawdev)
#   x                       OPEN EXCLUSIVE4 (the same verifier again: OK,
#                           another: EXIST)
# and checks each result and GETATTR; the shell test then reads the image.
#
#   PYNFS=build/peers/pynfs python3 nfs42_links.py PORT
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nfs42_ops import die, expect, op, open_file, session  # noqa: E402
import nfs4lib  # noqa: E402
from xdrdef.nfs4_const import *  # noqa: E402,F401,F403
from xdrdef.nfs4_type import (createhow4, createtype4, nfstime4,  # noqa: E402
                              open_claim4, open_owner4, openflag4,
                              settime4, specdata4, stateid4)

LONG = "".join("/" if i % 8 == 7 else chr(97 + i % 7)
               for i in range(4095)).encode()
ANON = stateid4(0, b"\0" * 12)


def lookup(sess, path):
    ops = [op.putrootfh()]
    for p in path.split("/"):
        if p:
            ops.append(op.lookup(p.encode()))
    return ops


def fh_of(sess, path):
    res = sess.compound(lookup(sess, path) + [op.getfh()])
    expect(res, NFS4_OK, "LOOKUP %s" % path)
    return res.resarray[-1].object


def attrs(sess, path, names):
    res = sess.compound(lookup(sess, path) +
                        [op.getattr(nfs4lib.list2bitmap(names))])
    expect(res, NFS4_OK, "GETATTR %s" % path)
    return res.resarray[-1].obj_attributes


def create(sess, kind, name, what):
    res = sess.compound([op.putrootfh(), op.create(kind, name.encode(), {})])
    expect(res, NFS4_OK, "CREATE %s %s" % (what, name))


def readlink(sess, path):
    res = sess.compound(lookup(sess, path) + [op.readlink()])
    expect(res, NFS4_OK, "READLINK %s" % path)
    return res.resarray[-1].link


def link(sess, src, dirpath, name, status=NFS4_OK):
    res = sess.compound(lookup(sess, src) + [op.savefh()] +
                        lookup(sess, dirpath) + [op.link(name.encode())])
    expect(res, status, "LINK %s -> %s/%s" % (src, dirpath, name))


def setattr(sess, path, a, what):
    res = sess.compound(lookup(sess, path) + [op.setattr(ANON, a)])
    expect(res, NFS4_OK, "SETATTR %s %s" % (what, path))


def open_excl(sess, name, verf, status):
    res = sess.compound([
        op.putrootfh(),
        op.open(0, OPEN4_SHARE_ACCESS_BOTH | OPEN4_SHARE_ACCESS_WANT_NO_DELEG,
                OPEN4_SHARE_DENY_NONE, open_owner4(0, b"excl"),
                openflag4(OPEN4_CREATE, createhow4(EXCLUSIVE4,
                                                   createverf=verf)),
                open_claim4(CLAIM_NULL, name.encode()))])
    expect(res, status, "OPEN EXCLUSIVE4 %s" % name)


def main():
    port = int(sys.argv[1])
    c, sess = session(port, "nfs42-links-%d" % os.getpid())

    # a regular file with data
    fh, sid = open_file(sess, "f")
    res = sess.compound([op.putfh(fh),
                         op.write(sid, 0, FILE_SYNC4, b"nfs data\n")])
    expect(res, NFS4_OK, "WRITE f")
    res = sess.compound([op.putfh(fh), op.close(0, sid)])
    expect(res, NFS4_OK, "CLOSE f")

    # symbolic links
    create(sess, createtype4(NF4LNK, linkdata=b"f"), "sl", "NF4LNK")
    create(sess, createtype4(NF4LNK, linkdata=LONG), "slong", "NF4LNK")
    if readlink(sess, "sl") != b"f":
        die("READLINK sl")
    if readlink(sess, "slong") != LONG:
        die("READLINK slong: %d bytes differ" % len(LONG))
    a = attrs(sess, "slong", [FATTR4_TYPE, FATTR4_SIZE])
    if a[FATTR4_TYPE] != NF4LNK or a[FATTR4_SIZE] != 4095:
        die("GETATTR slong: %r" % a)
    print("ok symlinks: 1 and 4095 bytes read back, type NF4LNK")

    # hard links
    create(sess, createtype4(NF4DIR), "d", "NF4DIR")
    link(sess, "f", "", "g")
    link(sess, "f", "d", "h")
    link(sess, "f", "", "g", NFS4ERR_EXIST)
    link(sess, "d", "", "d2", NFS4ERR_ISDIR)
    a = attrs(sess, "d/h", [FATTR4_NUMLINKS, FATTR4_FILEID])
    b = attrs(sess, "f", [FATTR4_NUMLINKS, FATTR4_FILEID])
    if a != b or a[FATTR4_NUMLINKS] != 3:
        die("GETATTR after LINK: %r / %r" % (a, b))
    print("ok links: 3 names, one inode %d" % a[FATTR4_FILEID])

    # SETATTR: mode, owner, times (client mtime, server atime)
    before = time.time()
    setattr(sess, "f", {
        FATTR4_MODE: 0o640, FATTR4_OWNER: b"1234",
        FATTR4_TIME_MODIFY_SET: settime4(SET_TO_CLIENT_TIME4,
                                         nfstime4(1500000000, 123456789)),
        FATTR4_TIME_ACCESS_SET: settime4(SET_TO_SERVER_TIME4)},
        "mode/owner/times")
    setattr(sess, "d", {FATTR4_MODE: 0o750}, "mode")
    a = attrs(sess, "g", [FATTR4_MODE, FATTR4_OWNER, FATTR4_TIME_MODIFY,
                          FATTR4_TIME_ACCESS])
    tm, ta = a[FATTR4_TIME_MODIFY], a[FATTR4_TIME_ACCESS]
    if (a[FATTR4_MODE] != 0o640 or a[FATTR4_OWNER] != b"1234" or
            (tm.seconds, tm.nseconds) != (1500000000, 123456789) or
            not before - 2 <= ta.seconds <= time.time() + 2):
        die("GETATTR after SETATTR: %r" % a)
    print("ok SETATTR: mode, owner, mtime to the nanosecond, atime now")

    # a device node
    create(sess, createtype4(NF4CHR, devdata=specdata4(1, 3)), "c", "NF4CHR")
    a = attrs(sess, "c", [FATTR4_TYPE, FATTR4_RAWDEV])
    if a[FATTR4_TYPE] != NF4CHR or (a[FATTR4_RAWDEV].specdata1,
                                    a[FATTR4_RAWDEV].specdata2) != (1, 3):
        die("GETATTR c: %r" % a)
    print("ok NF4CHR 1:3")

    # EXCLUSIVE4: the verifier lives in the times
    open_excl(sess, "x", b"verifier", NFS4_OK)
    open_excl(sess, "x", b"verifier", NFS4_OK)
    open_excl(sess, "x", b"verifiex", NFS4ERR_EXIST)
    print("PASS")
    os._exit(0)


if __name__ == "__main__":
    main()
