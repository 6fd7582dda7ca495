#!/usr/bin/env python3
"""Write the seed corpus of fuzz_nvmf_cmd (corpus/nvmf_cmd): a config byte,
then records (see the comment at the top of tests/fuzz/fuzz_nvmf_cmd.c).
Seeds: admin commands on controller 1's admin queue (Identify of every
CNS, Get Log Page, features, AERs then a namespace change notice, the
changed namespace log, keep alive, abort; ANA: the log with and without
RGO, AERs then port state changes), I/O commands on its I/O queue
(also while the port is inaccessible)
(in-capsule writes, reads, Write Zeroes with and without DEAC, DSM,
Compare, Flush, out of range), Connect on an unattached queue (admin and
I/O), Property Get/Set, Disconnect. Run from the repository root:
    python3 tests/fuzz/mkcorpus_nvmf_cmd.py
"""
import hashlib
import os
import struct

OUT = os.path.join(os.path.dirname(__file__), "corpus", "nvmf_cmd")
NQN = b"nqn.2026-12.org.blkstack:fuzz"
HOST = b"nqn.2014-08.org.example:fuzz"


def sqe(opc, cid, nsid=0, c10=0, c11=0, c12=0, sgl_len=0, sgl_type=0x5A,
        fctype=None, rest=b""):
    b = bytearray(64)
    b[0], b[1] = opc, 0x40
    struct.pack_into("<H", b, 2, cid)
    if fctype is not None:
        b[4] = fctype
    else:
        struct.pack_into("<I", b, 4, nsid)
    struct.pack_into("<I", b, 32, sgl_len)
    b[39] = sgl_type
    struct.pack_into("<III", b, 40, c10, c11, c12)
    if rest:
        b[40:40 + len(rest)] = rest
    return bytes(b)


def rec(s, data=b""):
    return b"\x00" + s + struct.pack("<H", len(data)) + data


def notice(nsid=1):
    return bytes([7, nsid])


def ana_state(v):
    return bytes([6, v])


def connect(qid, cntlid=0xFFFF, cid=1):
    d = bytearray(1024)
    struct.pack_into("<H", d, 16, cntlid)
    d[256:256 + len(NQN)] = NQN
    d[512:512 + len(HOST)] = HOST
    rest = struct.pack("<HHHBBI", 0, qid, 31, 0, 0, 5000)
    return rec(sqe(0x7F, cid, fctype=1, sgl_len=1024, sgl_type=1, rest=rest),
               bytes(d))


def admin():
    s = b""
    for cns in (1, 0, 2, 3, 5, 6, 8):
        s += rec(sqe(6, 10 + cns, nsid=1, c10=cns, sgl_len=4096))
    for lid in (1, 2, 4, 0x70):
        s += rec(sqe(2, 20 + lid, c10=lid | (127 << 16), sgl_len=512))
    s += rec(sqe(9, 30, c10=0x0B, c11=0x100))
    s += rec(sqe(9, 31, c10=0x07, c11=0x00030003))
    s += rec(sqe(10, 32, c10=0x0F))
    s += rec(sqe(9, 33, c10=0x06, c11=0))
    s += rec(sqe(0x0C, 34)) + rec(sqe(0x0C, 35))
    s += notice(1)
    s += rec(sqe(2, 36, c10=4 | (1023 << 16), sgl_len=4096))
    s += notice(1) + notice(2)
    s += rec(sqe(0x18, 37)) + rec(sqe(8, 38))
    s += rec(sqe(0x7F, 39, fctype=4, rest=struct.pack("<BxxxI", 1, 0)))
    s += rec(sqe(0x7F, 40, fctype=0,
                 rest=struct.pack("<BxxxIQ", 0, 0x14, 0x460000)))
    return s


def ana():
    s = rec(sqe(9, 50, c10=0x0B, c11=0x900))
    s += rec(sqe(2, 51, c10=0x0C | (13 << 16), sgl_len=56))
    s += rec(sqe(2, 52, c10=0x0C | (1 << 8) | (1 << 15) | (11 << 16),
                 sgl_len=48))
    s += rec(sqe(0x0C, 53)) + rec(sqe(0x0C, 54))
    s += ana_state(2) + ana_state(0)
    s += rec(sqe(2, 55, c10=0x0C | (1023 << 16), sgl_len=4096))
    s += ana_state(4) + notice(1)
    s += rec(sqe(6, 56, nsid=1, c10=8, sgl_len=4096))
    return s


def io():
    s = rec(sqe(1, 2, nsid=1, c10=0, c12=7, sgl_len=4096, sgl_type=1),
            bytes([0x5A]) * 4096)
    s += rec(sqe(2, 4, nsid=1, c10=0, c12=7, sgl_len=4096))
    s += rec(sqe(8, 5, nsid=1, c10=8, c12=7 | (1 << 25)))
    s += rec(sqe(8, 6, nsid=1, c10=16, c12=7 | (1 << 30)))
    rng = struct.pack("<IIQ", 0, 8, 24)
    s += rec(sqe(9, 7, nsid=1, c10=0, c11=4, sgl_len=16, sgl_type=1), rng)
    s += rec(sqe(5, 8, nsid=1, c10=0, c12=7, sgl_len=4096, sgl_type=1),
             bytes([0x5A]) * 4096)
    s += rec(sqe(0, 9, nsid=1))
    s += rec(sqe(2, 10, nsid=1, c10=2047, c12=1, sgl_len=1024))
    s += rec(sqe(1, 11, nsid=1, c10=64, c12=63, sgl_len=32768))
    s += rec(sqe(2, 12, nsid=2, c10=0, c12=0, sgl_len=512))
    s += rec(sqe(0x7F, 13, fctype=8))
    return s


def write(name, cfg, stream):
    data = bytes([cfg]) + stream
    h = hashlib.sha1(data).hexdigest()[:12]
    with open(os.path.join(OUT, f"{name}-{h}"), "wb") as f:
        f.write(data)


os.makedirs(OUT, exist_ok=True)
write("admin", 0, admin())
write("admin-4k", 2, admin())
write("io", 4, io())
write("io-4k", 6, io())
write("io-nozero", 7, io())
write("connect-admin", 8, connect(0) + rec(sqe(0x7F, 2, fctype=4,
      rest=struct.pack("<BxxxI", 0, 0x14))) + rec(sqe(0x7F, 3, fctype=0,
      rest=struct.pack("<BxxxIQ", 0, 0x14, 0x460001))) + admin())
write("connect-io", 8, connect(1, 1) + io())
write("disabled", 16, admin())
write("ana", 0, ana())
write("io-inaccessible", 4, ana_state(2) + io() + ana_state(3) + io() +
      ana_state(0) + io())
