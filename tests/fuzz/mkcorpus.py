#!/usr/bin/env python3
"""Write the seed corpora of the NBD fuzzers, valid client streams (and a
few invalid ones) in each target's input layout:
  fuzz_nbd_session (corpus/nbd_session): config byte, feed granularity
    byte, then the client's bytes;
  fuzz_nbd_conn (corpus/nbd_conn): config byte, schedule length and error
    count byte, the schedule (chunk size code and client action per step),
    then the client's bytes (see the comment at the top of
    tests/fuzz/fuzz_nbd_conn.c).
Run from the repository root:
    python3 tests/fuzz/mkcorpus.py
"""
import os
import struct

OUT = os.path.join(os.path.dirname(__file__), "corpus", "nbd_session")
OUT_CONN = os.path.join(os.path.dirname(__file__), "corpus", "nbd_conn")

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
    # the server stops half way: options answered ERR_SHUTDOWN, ABORT
    seed("options_stopping", 32, 2,
         struct.pack(">I", 3) + opt(OPT["LIST"]) + opt(OPT["LIST"]) +
         opt(OPT["INFO"], info("vol0", (INFO_BLOCK,))) +
         opt(OPT["GO"], info("vol0", (INFO_BLOCK,))) +
         b"".join(opt(OPT["LIST"]) for _ in range(20)) + opt(OPT["ABORT"]))
    # ... and in transmission: what is in flight finishes
    seed("requests_stopping", 32, 7,
         go() + b"".join(req("WRITE", i * 4096, 4096, cookie=i)
                         for i in range(8)) + req("DISC", cookie=9))
    # no fixed newstyle; ends in the middle of a write
    seed("nonfixed_partial", 1 << 1, 0,
         struct.pack(">I", 0) + opt(OPT["EXPORT_NAME"], b"other") +
         req("WRITE", 0, 8192)[:28 + 5000])


# ---- fuzz_nbd_conn --------------------------------------------------------

# client actions of a schedule step (fuzz_nbd_conn.c)
READ_ALL, READ_100, NO_READ, SETTLE, ZEROES, HALF_CLOSE, CLOSE, DRAIN = \
    range(8)
# chunk sizes by code, as chunk_size() in fuzz_nbd_conn.c
SIZES = ([c + 1 for c in range(8)] + [1 << (c - 4) for c in range(8, 24)] +
         [13, 27, 100, 511, 1000, 4095, 4097, 65537])


def steps(action, length):
    """Schedule bytes sending exactly @length bytes with @action: the
    action applies after every chunk, so all but the last chunk read
    everything (or, for ZEROES, send zeroes too)."""
    out = []
    while length > 0:
        code = max((c for c, n in enumerate(SIZES) if n <= length),
                   key=lambda c: SIZES[c])
        length -= SIZES[code]
        last = length == 0
        a = action if last or action in (ZEROES, NO_READ, READ_100) \
            else READ_ALL
        out.append(a << 5 | code)
    return out


def conn_seed(name, cfg, segments, after=0, big_sndbuf=False):
    """@segments: (action, bytes) sends the bytes in chunks; (ZEROES, n)
    sends n zero bytes that are not part of the stream."""
    sched, body = [], b""
    for action, data in segments:
        if action == ZEROES:
            sched += steps(ZEROES, data)
        else:
            sched += steps(action, len(data))
            body += data
    assert 1 <= len(sched) <= 16, (name, len(sched))
    assert sched[0] >> 5 != ZEROES, name
    with open(os.path.join(OUT_CONN, name), "wb") as f:
        f.write(bytes([cfg, (big_sndbuf << 7) | (after << 4) |
                       (len(sched) - 1)]) +
                bytes(sched) + body)


def conn_main():
    os.makedirs(OUT_CONN, exist_ok=True)
    K = 1024
    ex = (struct.pack(">I", 1) + opt(OPT["EXPORT_NAME"], b"vol0"))
    cmds = (req("WRITE", 0, 4096, cookie=1) + req("READ", 0, 4096, cookie=2) +
            req("WRITE", 8192, 4096, FUA, cookie=3) + req("FLUSH", cookie=4) +
            req("TRIM", 0, 64 * K, cookie=5) +
            req("WRITE_ZEROES", 4096, 4096, cookie=6) +
            req("CACHE", 0, 4096, cookie=7) +
            req("BLOCK_STATUS", 0, 4096, cookie=8))
    # everything in one go, read as it comes
    conn_seed("all_commands", 0, [(READ_ALL, go() + cmds + req("DISC"))])
    # the oldest handshake, one byte at a time (schedule: one step)
    with open(os.path.join(OUT_CONN, "byte_at_a_time"), "wb") as f:
        f.write(bytes([1 << 3, 0, READ_ALL << 5 | 0]) + ex +
                req("WRITE", 0, 512) + req("READ", 0, 512) + req("DISC"))
    # a big write received in place (zero copy), then read back
    conn_seed("zero_copy_write", 2 << 3,
              [(READ_ALL, go() + req("WRITE", 0, 768 * K, payload=b"")),
               (ZEROES, 768 * K),
               (SETTLE, req("READ", 0, 768 * K, cookie=2) +
                req("DISC", cookie=3))])
    # replies left unread: the output bound (4 KiB) stops input
    conn_seed("unread_output_bound", 0 << 3,
              [(NO_READ, go() + b"".join(
                  req("READ", (i % 64) * 64 * K, 64 * K, cookie=i)
                  for i in range(64))),
               (READ_ALL, req("DISC", cookie=99))])
    # replies read 100 bytes at a time
    conn_seed("partial_reads", 1 << 3,
              [(READ_100, go() + b"".join(
                  req("READ", i * 4 * K, 4 * K, cookie=i)
                  for i in range(16)) + req("DISC"))])
    # writes and reads in flight, then the client half-closes
    conn_seed("half_close_inflight", 2 << 3,
              [(NO_READ, go() + b"".join(
                  req("WRITE", i * 32 * K, 4 * K, cookie=i) +
                  req("READ", i * 32 * K, 32 * K, cookie=100 + i)
                  for i in range(8))),
               (HALF_CLOSE, req("READ", 0, 1024 * K, cookie=999))])
    # the client goes in the middle of a write payload, replies unread
    conn_seed("close_mid_write", 0,
              [(NO_READ, go() + req("READ", 0, 256 * K, cookie=1) +
                req("WRITE", 0, 128 * K, payload=b"")),
               (ZEROES, 64 * K),
               (CLOSE, bytes(1000))])
    # a graceful drain with requests in flight, then more requests
    conn_seed("drain_inflight", 3 << 3,
              [(DRAIN, go() + b"".join(
                  req("READ", i * 64 * K, 64 * K, cookie=i)
                  for i in range(32))),
               (READ_ALL, req("READ", 0, 4096, cookie=77) + req("DISC"))])
    # the error device: the first two requests pass, then EIO
    conn_seed("error_device", 3 << 1 | 1 << 3,
              [(READ_ALL, go() + cmds + req("WRITE", 0, 32 * K, cookie=9) +
                req("READ", 0, 32 * K, cookie=10) + req("DISC"))], after=2)
    # the listener goes with requests in flight and the client connected
    conn_seed("abrupt_end", 32 | 2 << 3,
              [(NO_READ, go())] + [
                  seg for i in range(2) for seg in (
                      (NO_READ, req("WRITE", i * 128 * K, 128 * K, cookie=i,
                                    payload=b"")),
                      (ZEROES, 128 * K))] +
              [(NO_READ, req("READ", 0, 4 * 1024 * K, cookie=9))])
    # max_connections 1: a second client is refused; 4K blocks, read-only
    conn_seed("refused_readonly_4k", 64 | 1 | 1 << 1 | 1 << 3,
              [(READ_ALL, go() + cmds + req("DISC"))])
    # 1 ms handshake and idle timeouts with a slow client
    conn_seed("timeouts", 128 | 1 << 3,
              [(SETTLE, struct.pack(">I", 3)),
               (SETTLE, opt(OPT["LIST"])),
               (READ_ALL, opt(OPT["GO"], info("other")) +
                req("READ", 0, 4096))])
    # the session at its request cap while a big client send buffer fills
    # the server's input buffer: it is compacted when the session resumes
    conn_seed("input_buffer_full", 0,
              [(NO_READ, go() + b"".join(
                  req("READ", (i % 1024) * 4 * K, 4 * K, cookie=i)
                  for i in range(300)) +
                req("WRITE", 0, 1024 * K, cookie=999, payload=b"")),
               (ZEROES, 1024 * K),
               (READ_ALL, req("DISC"))], big_sndbuf=True)
    # a file device (io_uring): the client goes with requests in the kernel
    conn_seed("file_close_inflight", 2 << 1 | 2 << 3,
              [(NO_READ, go() + b"".join(
                  req("READ", i * 1024 * K, 1024 * K, cookie=i)
                  for i in range(4)) + req("WRITE", 0, 4096, cookie=5) +
                req("FLUSH", cookie=6)),
               (CLOSE, req("WRITE", 8192, 512, FUA, cookie=7))])
    # ... and the listener is freed with them there
    conn_seed("file_abrupt_end", 32 | 2 << 1,
              [(NO_READ, go() + b"".join(
                  req("WRITE", i * 64 * K, 4096, FUA, cookie=i) +
                  req("READ", i * 64 * K, 64 * K, cookie=100 + i)
                  for i in range(8)) + req("FLUSH", cookie=99))])
    # ... and a client that hangs up with everything still in flight
    conn_seed("file_half_close", 2 << 1 | 1 << 3,
              [(HALF_CLOSE, go() + b"".join(
                  req("WRITE_ZEROES", i * 256 * K, 256 * K, cookie=i) +
                  req("READ", i * 256 * K, 256 * K, cookie=100 + i)
                  for i in range(8)))])
    # a crowd: the client holds budget (unread 4 MiB reads, half a 32 MiB
    # write) and stalls while a bystander writes 32 MiB: it is evicted
    conn_seed("crowd_evict", 64,
              [(NO_READ, go() + b"".join(
                  req("READ", i * 4096 * K, 4096 * K, cookie=i)
                  for i in range(3)) +
                req("WRITE", 0, 32768 * K, cookie=9, payload=b"")),
               (ZEROES, 64 * K)])
    # options: list, info, a too-big option, abort
    conn_seed("options_abort", 2 << 1,
              [(READ_ALL, struct.pack(">I", 3) + opt(OPT["LIST"]) +
                opt(OPT["INFO"], info("", (INFO_NAME, INFO_DESC))) +
                opt(OPT["GO"], bytes(65 * K)) + opt(OPT["ABORT"]))])


if __name__ == "__main__":
    main()
    conn_main()
