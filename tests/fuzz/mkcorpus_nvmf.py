#!/usr/bin/env python3
"""Write the seed corpus of fuzz_nvmf_pdu (corpus/nvmf_pdu): config byte,
feed granularity byte, then the host's bytes (see the comment at the top
of tests/fuzz/fuzz_nvmf_pdu.c). Seeds: an admin queue (ICReq, Connect,
enable, Identify, Get Log Page, features, AER, keep alive), an I/O queue
joining controller 1 (writes in capsule and through R2T/H2CData, reads,
Write Zeroes with and without DEAC, DSM, Compare, Flush), the same with
digests, and a few malformed streams. Run from the repository root:
    python3 tests/fuzz/mkcorpus_nvmf.py
"""
import hashlib
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
OUT = os.path.join(os.path.dirname(__file__), "corpus", "nvmf_pdu")
NQN = b"nqn.2026-12.org.blkstack:fuzz"
HOST = b"nqn.2014-08.org.example:fuzz"


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def icreq(dg=0):
    return struct.pack("<BBBBIHBBI", 0, 0, 128, 0, 128, 0, 0, dg, 0) + \
        bytes(112)


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


def cap(s, data=b"", dg=False):
    hd = 4 if dg else 0
    pdo = 72 + hd if data else 0
    dd = 4 if (dg and data) else 0
    flags = (1 if dg else 0) | (2 if dd else 0)
    h = struct.pack("<BBBBI", 4, flags, 72, pdo, 72 + hd + len(data) + dd) + s
    if dg:
        h += struct.pack("<I", crc32c(h))
    return h + data + (struct.pack("<I", crc32c(data)) if dd else b"")


def h2c(cid, ttag, off, data, dg=False):
    hd = 4 if dg else 0
    dd = 4 if dg else 0
    flags = 4 | ((1 | 2) if dg else 0)
    h = struct.pack("<BBBBIHHII4x", 6, flags, 24, 24 + hd,
                    24 + hd + len(data) + dd, cid, ttag, off, len(data))
    if dg:
        h += struct.pack("<I", crc32c(h))
    return h + data + (struct.pack("<I", crc32c(data)) if dg else b"")


def connect(qid, cntlid=0xFFFF, dg=False):
    d = bytearray(1024)
    struct.pack_into("<H", d, 16, cntlid)
    d[256:256 + len(NQN)] = NQN
    d[512:512 + len(HOST)] = HOST
    rest = struct.pack("<HHHBBI", 0, qid, 31, 0, 0, 5000)
    return cap(sqe(0x7F, 1, fctype=1, sgl_len=1024, sgl_type=1, rest=rest),
               bytes(d), dg)


def admin(dg=False):
    s = icreq(3 if dg else 0) + connect(0, dg=dg)
    s += cap(sqe(0x7F, 2, fctype=4, rest=struct.pack("<BxxxI", 1, 0)), dg=dg)
    s += cap(sqe(0x7F, 3, fctype=0,
                 rest=struct.pack("<BxxxIQ", 0, 0x14, 0x460001)), dg=dg)
    for cns in (1, 0, 2, 3, 5, 6, 8):
        s += cap(sqe(6, 10 + cns, nsid=1, c10=cns, sgl_len=4096), dg=dg)
    for lid in (1, 2, 4, 0x70):
        s += cap(sqe(2, 20 + lid, c10=lid | (127 << 16), sgl_len=512), dg=dg)
    s += cap(sqe(9, 30, c10=0x0B, c11=0x100), dg=dg)
    s += cap(sqe(9, 31, c10=0x07, c11=0x00030003), dg=dg)
    s += cap(sqe(10, 32, c10=0x0F), dg=dg)
    s += cap(sqe(0x0C, 33), dg=dg)
    s += cap(sqe(0x18, 34), dg=dg)
    s += cap(sqe(8, 35), dg=dg)
    return s


def io(dg=False):
    s = icreq(3 if dg else 0) + connect(1, 1, dg)
    s += cap(sqe(1, 2, nsid=1, c10=0, c12=7, sgl_len=4096, sgl_type=1),
             bytes([0x5A]) * 4096, dg)
    s += cap(sqe(1, 3, nsid=1, c10=64, c12=63, sgl_len=32768), dg=dg)
    s += h2c(3, 0, 0, bytes([0xA5]) * 32768, dg)
    s += cap(sqe(2, 4, nsid=1, c10=0, c12=7, sgl_len=4096), dg=dg)
    s += cap(sqe(8, 5, nsid=1, c10=8, c12=7 | (1 << 25)), dg=dg)
    s += cap(sqe(8, 6, nsid=1, c10=16, c12=7 | (1 << 30)), dg=dg)
    rng = struct.pack("<IIQ", 0, 8, 24)
    s += cap(sqe(9, 7, nsid=1, c10=0, c11=4, sgl_len=16, sgl_type=1), rng, dg)
    s += cap(sqe(5, 8, nsid=1, c10=0, c12=7, sgl_len=4096, sgl_type=1),
             bytes([0x5A]) * 4096, dg)
    s += cap(sqe(0, 9, nsid=1), dg=dg)
    s += cap(sqe(2, 10, nsid=1, c10=2047, c12=1, sgl_len=1024), dg=dg)
    return s


def budget(dg=False):
    """With cfg bit 4 (256 KiB of budget left): the second 192 KiB read
    waits until the first one's data is sent; then a 192 KiB write whose
    R2T goes once its bytes are held."""
    s = icreq(3 if dg else 0) + connect(1, 1, dg)
    s += cap(sqe(2, 2, nsid=1, c10=0, c12=383, sgl_len=196608), dg=dg)
    s += cap(sqe(2, 3, nsid=1, c10=512, c12=383, sgl_len=196608), dg=dg)
    s += cap(sqe(1, 4, nsid=1, c10=1024, c12=383, sgl_len=196608), dg=dg)
    s += h2c(4, 0, 0, bytes([0xC3]) * 196608, dg)
    return s


def write(name, cfg, gran, stream):
    data = bytes([cfg, gran]) + stream
    h = hashlib.sha1(data).hexdigest()[:12]
    with open(os.path.join(OUT, f"{name}-{h}"), "wb") as f:
        f.write(data)


os.makedirs(OUT, exist_ok=True)
write("admin", 0, 0, admin())
write("admin-dg", 1, 3, admin(True))
write("io", 0, 0, io())
write("io-dg", 1, 200, io(True))
write("io-4k", 4, 1, io())
write("io-nozero", 6, 0, io())
write("io-budget", 16, 0, budget())
write("io-budget-dg", 17, 100, budget(True))
write("bad-hlen", 0, 0, icreq() + bytes([4, 0, 64, 0, 72, 0, 0, 0]) + bytes(64))
write("bad-type", 0, 0, icreq() + bytes([0x42, 0, 24, 0, 24, 0, 0, 0]) +
      bytes(16))
write("before-ic", 0, 0, cap(sqe(6, 1, c10=1, sgl_len=4096)))
write("before-connect", 0, 0, icreq() + cap(sqe(6, 1, c10=1, sgl_len=4096)))
