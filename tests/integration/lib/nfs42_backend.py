#!/usr/bin/env python3
# NFS checks that hold on every blkstackd nfs backend (host directory and
# ext4), seen only through NFS (no host file to look at), sent by the
# vendored pynfs's client library (helpers in nfs42_ops.py):
#
#   sparse PORT NAME   v4.2 ops on a new file NAME with a known layout
#                      (4 KiB-aligned, so a host fs with 4 KiB blocks
#                      shows the same holes as blkstack's ext4):
#                        [0,16K) a  [16K,32K) hole (DEALLOCATE)
#                        [32K,64K) a  [64K,192K) hole (never written)
#                        [192K,256K) b, then SETATTR size 512K: a hole to EOF
#                      SEEK DATA / HOLE in data, in a hole, in the trailing
#                      hole (RFC 7862 15.11: NFS4_OK with sr_eof, the
#                      content not found), at and past EOF (NFS4ERR_NXIO);
#                      READ_PLUS of it all (hole segments where the holes
#                      are, the bytes right); DEALLOCATE of an unaligned
#                      range (zeroes, neighbours kept); ALLOCATE past EOF
#                      (size grows, zeroes read)
#   save PORT NAME OUT write NAME (UNSTABLE, then COMMIT) and save its file
#                      handle, bytes and both write verifiers in OUT (json)
#   check PORT IN      after a server restart, a new client: PUTFH of the
#                      saved handle + GETATTR (size) and READ (the bytes);
#                      a WRITE through that handle answers a verifier other
#                      than the saved one, and so does COMMIT
#   zeroes PORT NAME OFF...  READ 1 MiB at each OFF of NAME: all zero
#
#   PYNFS=build/peers/pynfs python3 nfs42_backend.py MODE ARGS...
# Prints one "ok ..." line per check and PASS; exits 1 at the first failure.
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nfs42_ops import die, expect, op, open_file, session  # noqa: E402
import nfs4lib  # noqa: E402
from xdrdef.nfs4_const import *  # noqa: E402,F401,F403
from xdrdef.nfs4_type import stateid4  # noqa: E402

K = 1024
ANON = stateid4(0, b"\0" * 12)


def lookup_fh(sess, name):
    res = sess.compound([op.putrootfh(), op.lookup(name.encode()),
                         op.getfh()])
    expect(res, NFS4_OK, "LOOKUP %s" % name)
    return res.resarray[-1].object


def size_of(sess, fh):
    res = sess.compound([op.putfh(fh), op.getattr(
        nfs4lib.list2bitmap([FATTR4_SIZE]))])
    expect(res, NFS4_OK, "GETATTR size")
    return res.resarray[-1].obj_attributes[FATTR4_SIZE]


def read_all(sess, fh, sid, off, n):
    out = b""
    while len(out) < n:
        res = sess.compound([op.putfh(fh), op.read(
            sid, off + len(out), min(n - len(out), 128 * K))])
        if res.status != NFS4_OK:
            die("READ at %d: %s" % (off + len(out),
                                    nfsstat4.get(res.status, res.status)))
        r = res.resarray[-1]
        if not r.data:
            break
        out += r.data
    return out


def seek(sess, fh, sid, off, what, status, want=None, eof=None):
    name = "DATA" if what == NFS4_CONTENT_DATA else "HOLE"
    res = sess.compound([op.putfh(fh), op.seek(sid, off, what)])
    if res.status != status:
        die("SEEK %s from %d: %s, want %s" % (
            name, off, nfsstat4.get(res.status, res.status),
            nfsstat4.get(status, status)))
    if status != NFS4_OK:
        print("ok SEEK %s from %d: %s" % (name, off, nfsstat4[status]))
        return
    r = res.resarray[-1]
    if (want is not None and r.sr_offset != want) or bool(r.sr_eof) != eof:
        die("SEEK %s from %d: offset %d eof %r, want %r eof %r" % (
            name, off, r.sr_offset, r.sr_eof, want, eof))
    print("ok SEEK %s from %d: %s eof %r" % (
        name, off, r.sr_offset if want is not None else "-", r.sr_eof))


def read_plus(sess, fh, sid, off, n):
    """(bytes, hole ranges) of [off, off+n) by READ_PLUS calls of 128 KiB,
    adjacent hole segments merged."""
    out, holes, pos = bytearray(), [], off
    while pos < off + n:
        res = sess.compound([op.putfh(fh), op.read_plus(
            sid, pos, min(off + n - pos, 128 * K))])
        if res.status != NFS4_OK:
            die("READ_PLUS at %d: %s" % (pos,
                                         nfsstat4.get(res.status, res.status)))
        r = res.resarray[-1]
        for s in r.rpr_contents:
            if s.rpc_content == NFS4_CONTENT_HOLE:
                at, ln, data = s.rpc_hole.di_offset, s.rpc_hole.di_length, None
            else:
                at, data = s.rpc_data.d_offset, s.rpc_data.d_data
                ln = len(data)
            if at != pos:
                die("READ_PLUS: a segment at %d, want %d" % (at, pos))
            if data is None:
                # one hole over two calls' segments counts as one
                if holes and sum(holes[-1]) == at:
                    holes[-1] = (holes[-1][0], holes[-1][1] + ln)
                else:
                    holes.append((at, ln))
                data = bytes(ln)
            out += data
            pos += ln
        if r.rpr_eof or not r.rpr_contents:
            break
    return bytes(out[:n]), holes


def sparse(port, name):
    c, sess = session(port, "nfs42-sparse-%d" % os.getpid())
    fh, sid = open_file(sess, name)

    def write(off, data):
        res = sess.compound([op.putfh(fh),
                             op.write(sid, off, FILE_SYNC4, data)])
        expect(res, NFS4_OK, "WRITE %d at %d" % (len(data), off))

    def dealloc(off, n):
        res = sess.compound([op.putfh(fh), op.deallocate(sid, off, n)])
        expect(res, NFS4_OK, "DEALLOCATE %d at %d" % (n, off))

    write(0, b"a" * (64 * K))
    write(192 * K, b"b" * (64 * K))
    dealloc(16 * K, 16 * K)
    res = sess.compound([op.putfh(fh), op.setattr(sid, {FATTR4_SIZE: 512 * K})])
    expect(res, NFS4_OK, "SETATTR size 512K")
    want = bytearray(512 * K)
    want[0:64 * K] = b"a" * (64 * K)
    want[16 * K:32 * K] = bytes(16 * K)
    want[192 * K:256 * K] = b"b" * (64 * K)

    D, H = NFS4_CONTENT_DATA, NFS4_CONTENT_HOLE
    seek(sess, fh, sid, 0, D, NFS4_OK, 0, False)
    seek(sess, fh, sid, 20 * K, D, NFS4_OK, 32 * K, False)
    seek(sess, fh, sid, 70 * K, D, NFS4_OK, 192 * K, False)
    seek(sess, fh, sid, 200 * K, D, NFS4_OK, 200 * K, False)
    seek(sess, fh, sid, 0, H, NFS4_OK, 16 * K, False)
    seek(sess, fh, sid, 20 * K, H, NFS4_OK, 20 * K, False)
    seek(sess, fh, sid, 40 * K, H, NFS4_OK, 64 * K, False)
    seek(sess, fh, sid, 200 * K, H, NFS4_OK, 256 * K, False)
    seek(sess, fh, sid, 300 * K, H, NFS4_OK, 300 * K, False)
    # no data after 300K: not found is NFS4_OK with sr_eof (the offset
    # then means nothing), not NXIO, which is for offsets past the end
    seek(sess, fh, sid, 300 * K, D, NFS4_OK, None, True)
    for off in (512 * K, 600 * K):
        seek(sess, fh, sid, off, D, NFS4ERR_NXIO)
        seek(sess, fh, sid, off, H, NFS4ERR_NXIO)

    got, holes = read_plus(sess, fh, sid, 0, 512 * K)
    if got != bytes(want):
        die("READ_PLUS: the bytes differ from what was written")
    for h in ((16 * K, 16 * K), (64 * K, 128 * K)):
        if h not in holes:
            die("READ_PLUS: no hole segment %r in %r" % (h, holes))
    if not any(a <= 256 * K and a + n >= 512 * K for a, n in holes):
        die("READ_PLUS: the trailing hole is no hole segment: %r" % holes)
    print("ok READ_PLUS: bytes right, hole segments %r" % holes)
    got, holes = read_plus(sess, fh, sid, 20 * K, 8 * K)
    if got != bytes(8 * K) or holes != [(20 * K, 8 * K)]:
        die("READ_PLUS inside a hole: %r" % holes)
    print("ok READ_PLUS inside a hole: one hole segment")

    # an unaligned DEALLOCATE: zeroes in the range, the bytes around kept
    dealloc(1000, 4000)
    want[1000:5000] = bytes(4000)
    # ALLOCATE past EOF: the size grows, the new range reads zeroes
    res = sess.compound([op.putfh(fh), op.allocate(sid, 1024 * K, 1024 * K)])
    expect(res, NFS4_OK, "ALLOCATE 1M at 1M")
    want += bytes(1536 * K)
    sz = size_of(sess, fh)
    if sz != 2048 * K:
        die("size %d after ALLOCATE, want %d" % (sz, 2048 * K))
    if read_all(sess, fh, sid, 0, 2048 * K) != bytes(want):
        die("READ after DEALLOCATE / ALLOCATE: the bytes differ")
    print("ok READ: unaligned DEALLOCATE and ALLOCATE read as they should")
    got, _ = read_plus(sess, fh, sid, 0, 2048 * K)
    if got != bytes(want):
        die("READ_PLUS after ALLOCATE: the bytes differ")
    print("ok READ_PLUS after ALLOCATE: the same bytes")
    res = sess.compound([op.putfh(fh), op.close(0, sid)])
    expect(res, NFS4_OK, "CLOSE")


def save(port, name, out):
    c, sess = session(port, "nfs42-save-%d" % os.getpid())
    fh, sid = open_file(sess, name)
    data = os.urandom(12345)
    res = sess.compound([op.putfh(fh), op.write(sid, 0, UNSTABLE4, data)])
    expect(res, NFS4_OK, "WRITE UNSTABLE")
    wverf = res.resarray[-1].writeverf
    res = sess.compound([op.putfh(fh), op.commit(0, 0)])
    expect(res, NFS4_OK, "COMMIT")
    if res.resarray[-1].writeverf != wverf:
        die("COMMIT's verifier differs from WRITE's in one server run")
    res = sess.compound([op.putfh(fh), op.close(0, sid)])
    expect(res, NFS4_OK, "CLOSE")
    with open(out, "w") as f:
        json.dump({"fh": fh.hex(), "data": data.hex(), "verf": wverf.hex(),
                   "name": name}, f)


def check(port, inp):
    with open(inp) as f:
        s = json.load(f)
    fh, data, verf = (bytes.fromhex(s["fh"]), bytes.fromhex(s["data"]),
                      bytes.fromhex(s["verf"]))
    c, sess = session(port, "nfs42-check-%d" % os.getpid())
    sz = size_of(sess, fh)
    if sz != len(data):
        die("the old handle's size %d, want %d" % (sz, len(data)))
    print("ok PUTFH old handle + GETATTR: size %d" % sz)
    if read_all(sess, fh, ANON, 0, len(data) + 100) != data:
        die("READ through the old handle: the bytes differ")
    print("ok PUTFH old handle + READ: the bytes")
    if lookup_fh(sess, s["name"]) != fh:
        die("LOOKUP gives another handle than before the restart")
    print("ok LOOKUP gives the same handle")
    _, sid = open_file(sess, s["name"], create=False)
    res = sess.compound([op.putfh(fh), op.write(sid, 0, UNSTABLE4, b"z")])
    expect(res, NFS4_OK, "WRITE UNSTABLE through the old handle")
    v2 = res.resarray[-1].writeverf
    res = sess.compound([op.putfh(fh), op.commit(0, 0)])
    expect(res, NFS4_OK, "COMMIT")
    v3 = res.resarray[-1].writeverf
    if v2 == verf or v3 == verf or v2 != v3:
        die("write verifiers: before %s, after WRITE %s COMMIT %s" % (
            verf.hex(), v2.hex(), v3.hex()))
    print("ok the write verifier changed across the restart")
    res = sess.compound([op.putfh(fh), op.close(0, sid)])
    expect(res, NFS4_OK, "CLOSE")


def zeroes(port, name, offs):
    c, sess = session(port, "nfs42-zeroes-%d" % os.getpid())
    fh = lookup_fh(sess, name)
    for off in offs:
        if read_all(sess, fh, ANON, off, 1 << 20) != bytes(1 << 20):
            die("READ 1 MiB at %d: not zeroes" % off)
        print("ok READ 1 MiB at %d: zeroes" % off)


def main():
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "sparse":
        sparse(port, sys.argv[3])
    elif mode == "save":
        save(port, sys.argv[3], sys.argv[4])
    elif mode == "check":
        check(port, sys.argv[3])
    elif mode == "zeroes":
        zeroes(port, sys.argv[3], [int(x) for x in sys.argv[4:]])
    else:
        die("mode %s" % mode)
    print("PASS")
    os._exit(0)


if __name__ == "__main__":
    main()
