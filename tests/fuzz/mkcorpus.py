#!/usr/bin/env python3
"""Write the seed corpus of fuzz_nbd_session: valid client streams (and a
few invalid ones) in the target's input layout: config byte, feed
granularity byte, then the client's bytes. Run from the repository root:
    python3 tests/fuzz/mkcorpus.py
"""
import os
import struct

OUT = os.path.join(os.path.dirname(__file__), "corpus", "nbd_session")

IHAVEOPT = 0x49484156454F5054
REQ_MAGIC = 0x25609513
OPT = dict(EXPORT_NAME=1, ABORT=2, LIST=3, STARTTLS=5, INFO=6, GO=7,
           STRUCTURED_REPLY=8, LIST_META_CONTEXT=9, SET_META_CONTEXT=10)
CMD = dict(READ=0, WRITE=1, DISC=2, FLUSH=3, TRIM=4, CACHE=5,
           WRITE_ZEROES=6, BLOCK_STATUS=7)
FUA, NO_HOLE, DF, REQ_ONE, FAST_ZERO = 1, 2, 4, 8, 16
INFO_NAME, INFO_DESC, INFO_BLOCK = 1, 2, 3


def opt(code, data=b""):
    return struct.pack(">QII", IHAVEOPT, code, len(data)) + data


def info(name, reqs=(INFO_BLOCK,)):
    n = name.encode()
    return (struct.pack(">I", len(n)) + n + struct.pack(">H", len(reqs)) +
            b"".join(struct.pack(">H", r) for r in reqs))


def meta(name, queries):
    n = name.encode()
    d = struct.pack(">I", len(n)) + n + struct.pack(">I", len(queries))
    for q in queries:
        d += struct.pack(">I", len(q)) + q.encode()
    return d


def req(cmd, off=0, length=0, flags=0, cookie=1, payload=None):
    r = struct.pack(">IHHQQI", REQ_MAGIC, flags, CMD[cmd], cookie, off,
                    length)
    if cmd == "WRITE":
        r += payload if payload is not None else bytes(
            (i * 7 + cookie) & 0xff for i in range(length))
    return r


def go(name="vol0", structured=True, meta_ctx=True):
    s = struct.pack(">I", 3)  # FIXED_NEWSTYLE | NO_ZEROES
    if structured:
        s += opt(OPT["STRUCTURED_REPLY"])
    if meta_ctx:
        s += opt(OPT["SET_META_CONTEXT"], meta(name, ["base:allocation"]))
    return s + opt(OPT["GO"], info(name, (INFO_BLOCK, INFO_NAME, INFO_DESC)))


def seed(name, cfg, gran, body):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(bytes([cfg, gran]) + body)


def main():
    os.makedirs(OUT, exist_ok=True)
    K = 1024
    # oldest path: EXPORT_NAME, simple replies, every data command
    seed("export_name_simple", 0, 255,
         struct.pack(">I", 1) + opt(OPT["EXPORT_NAME"], b"vol0") +
         req("WRITE", 0, 4096, cookie=1) + req("READ", 0, 4096, cookie=2) +
         req("WRITE", 8192, 4096, FUA, cookie=3) +
         req("FLUSH", cookie=4) + req("TRIM", 0, 64 * K, cookie=5) +
         req("WRITE_ZEROES", 4096, 4096, cookie=6) +
         req("CACHE", 0, 4096, cookie=7) + req("DISC", cookie=8))
    # GO with structured replies and base:allocation
    seed("go_structured_meta", 0, 13,
         go() + req("WRITE", 64 * K, 32 * K, cookie=1) +
         req("BLOCK_STATUS", 0, 1024 * K, cookie=2) +
         req("BLOCK_STATUS", 0, 1024 * K, REQ_ONE, cookie=3) +
         req("READ", 64 * K, 32 * K, DF, cookie=4) +
         req("WRITE_ZEROES", 64 * K, 4096, NO_HOLE, cookie=5) +
         req("WRITE_ZEROES", 0, 256 * K, FAST_ZERO, cookie=6) +
         req("WRITE_ZEROES", 0, 4096, FAST_ZERO | NO_HOLE | FUA, cookie=7) +
         req("READ", 4 * 1024 * K - 4096, 4096, cookie=8) +
         req("DISC", cookie=9))
    # every handshake option, then abort
    seed("options_abort", 0, 3,
         struct.pack(">I", 3) + opt(OPT["LIST"]) +
         opt(OPT["INFO"], info("", (INFO_NAME, INFO_DESC, INFO_BLOCK))) +
         opt(OPT["INFO"], info("nope")) +
         opt(OPT["LIST_META_CONTEXT"], meta("vol0", [])) +
         opt(OPT["STRUCTURED_REPLY"]) +
         opt(OPT["LIST_META_CONTEXT"], meta("vol0", ["base:", "x-a:b"])) +
         opt(OPT["SET_META_CONTEXT"], meta("other", ["base:allocation"])) +
         opt(OPT["STARTTLS"]) + opt(42, b"junk") + opt(OPT["ABORT"]))
    # bad requests after GO: the stream must stay in sync
    seed("bad_requests", 0, 200,
         go(structured=False, meta_ctx=False) +
         req("READ", 0, 4096, 0x40, cookie=1) +
         struct.pack(">IHHQQI", REQ_MAGIC, 0, 99, 2, 0, 512) +
         req("WRITE", 4 * 1024 * K - 512, 4096, cookie=3) +
         req("READ", 2**64 - 512, 4096, cookie=4) +
         req("READ", 1, 511, cookie=5) +
         req("FLUSH", 512, 0, cookie=6) +
         req("BLOCK_STATUS", 0, 4096, cookie=7) +
         req("WRITE_ZEROES", 0, 4096, FAST_ZERO, cookie=8) +
         struct.pack(">IHHQQI", 0xdeadbeef, 0, 0, 9, 0, 0))
    # many reads, output left unread: the caps
    seed("many_reads_lazy", 8, 255,
         go() + b"".join(req("READ", (i % 64) * 64 * K, 64 * K, cookie=i)
                         for i in range(300)))
    # read-only export (on the 4K device): writes are refused
    seed("readonly", 1 | (3 << 1), 40,
         go() + req("WRITE", 0, 4096, cookie=1) +
         req("TRIM", 0, 4096, cookie=2) +
         req("WRITE_ZEROES", 0, 4096, cookie=3) +
         req("READ", 0, 4096, cookie=4) + req("FLUSH", FUA, cookie=5))
    # zeroes = none: write-zeroes through the fallback, freed in flight
    seed("fallback_freed_inflight", 16 | (2 << 1), 255,
         go() + req("WRITE_ZEROES", 0, 4 * 1024 * K, cookie=1) +
         req("WRITE", 0, 4096, cookie=2) + req("WRITE", 0, 4096)[:40])
    # an option above the server's limit, read past; then EXPORT_NAME
    seed("oversized_option", 0, 255,
         struct.pack(">I", 3) + opt(OPT["GO"], bytes(65 * K)) +
         opt(OPT["EXPORT_NAME"], b"") + req("READ", 0, 512) +
         req("DISC"))
    # 4K blocks: unaligned requests, overlapping writes in flight (RMW)
    seed("unaligned_overlap", 3 << 1, 255,
         go() + b"".join(req("WRITE", 4000 + 37 * i, 100 + 61 * i,
                             FUA if i % 3 == 0 else 0, cookie=i)
                         for i in range(24)) +
         req("WRITE", 4096, 4096, cookie=30) +
         req("WRITE_ZEROES", 3, 5000, cookie=31) +
         req("WRITE_ZEROES", 4095, 2, NO_HOLE | FUA, cookie=32) +
         req("WRITE_ZEROES", 4001, 100, FAST_ZERO, cookie=33) +
         req("TRIM", 100, 20000, cookie=34) +
         req("READ", 1, 9000, cookie=35) +
         req("READ", 4 * 1024 * K - 1, 1, DF, cookie=36) +
         req("BLOCK_STATUS", 5, 10000, cookie=37) + req("DISC", cookie=38))
    # no fixed newstyle; ends in the middle of a write
    seed("nonfixed_partial", 1 << 1, 0,
         struct.pack(">I", 0) + opt(OPT["EXPORT_NAME"], b"other") +
         req("WRITE", 0, 8192)[:28 + 5000])


if __name__ == "__main__":
    main()
