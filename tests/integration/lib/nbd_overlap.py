#!/usr/bin/env python3
"""Overlapping unaligned NBD writes in flight at once, checked byte by byte.

Usage: nbd_overlap.py HOST PORT EXPORT ROUNDS BATCH

One connection sends BATCH writes of 1..511 bytes at random offsets inside
the first 12 KiB (so they overlap, share blocks and never hold a whole
block) without waiting for replies, then collects the BATCH replies in
whatever order they come. The server orders writes that touch the same
block by arrival, so the export must read back as every write applied in
the order sent: the test reads the span at odd offsets and compares every
byte with that model. Exit 0 when it holds.
"""
import random
import socket
import struct
import sys

NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
REPLY_MAGIC = 0x0003E889045565A9
REQ_MAGIC = 0x25609513
SIMPLE_MAGIC = 0x67446698
OPT_GO, REP_ACK, REP_INFO = 7, 1, 3
CMD_READ, CMD_WRITE, CMD_DISC = 0, 1, 2
SPAN = 12 * 1024

HOST, PORT, EXPORT = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ROUNDS, BATCH = int(sys.argv[4]), int(sys.argv[5])


def recvn(s, n):
    b = bytearray()
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError("closed after %d of %d bytes" % (len(b), n))
        b += c
    return bytes(b)


def connect():
    s = socket.create_connection((HOST, PORT), timeout=30)
    magic, opt, flags = struct.unpack(">QQH", recvn(s, 18))
    assert magic == NBDMAGIC and opt == IHAVEOPT and flags & 1, "greeting"
    s.sendall(struct.pack(">I", 3))
    n = EXPORT.encode()
    s.sendall(struct.pack(">QII", IHAVEOPT, OPT_GO, 4 + len(n) + 2) +
              struct.pack(">I", len(n)) + n + struct.pack(">H", 0))
    while True:
        magic, _, typ, ln = struct.unpack(">QIII", recvn(s, 20))
        assert magic == REPLY_MAGIC, "option reply magic"
        recvn(s, ln)
        if typ == REP_ACK:
            return s
        assert typ == REP_INFO, "GO failed: 0x%x" % typ


def request(s, typ, off, ln, cookie, payload=b""):
    s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, 0, typ, cookie, off, ln) +
              payload)


def reply(s):
    magic, err, cookie = struct.unpack(">IIQ", recvn(s, 16))
    assert magic == SIMPLE_MAGIC, "reply magic 0x%x" % magic
    return err, cookie


def main():
    rng = random.Random(20261203)
    s = connect()
    # start from a known span
    request(s, CMD_WRITE, 0, SPAN, 1, bytes(SPAN))
    assert reply(s) == (0, 1), "zeroing write"
    model = bytearray(SPAN)
    cookie = 100
    for rnd in range(ROUNDS):
        msgs, want = [], set()
        for _ in range(BATCH):
            ln = rng.randint(1, 511)
            off = rng.randint(0, SPAN - ln)
            data = bytes(rng.getrandbits(8) for _ in range(ln))
            model[off:off + ln] = data
            msgs.append(struct.pack(">IHHQQI", REQ_MAGIC, 0, CMD_WRITE,
                                    cookie, off, ln) + data)
            want.add(cookie)
            cookie += 1
        # all of them in flight before the first reply is read
        s.sendall(b"".join(msgs))
        for _ in range(BATCH):
            err, c = reply(s)
            assert err == 0, "round %d: write %d failed: %d" % (rnd, c, err)
            assert c in want, "round %d: unexpected cookie %d" % (rnd, c)
            want.discard(c)
    # read back at odd offsets and lengths, every byte against the model
    off, bad = 0, 0
    while off < SPAN:
        ln = min(rng.randint(1, 3000), SPAN - off)
        request(s, CMD_READ, off, ln, cookie)
        err, c = reply(s)
        assert err == 0 and c == cookie, "read %d+%d: %d" % (off, ln, err)
        got = recvn(s, ln)
        if got != bytes(model[off:off + ln]):
            i = next(i for i in range(ln) if got[i] != model[off + i])
            print("FAIL byte %d is 0x%02x, want 0x%02x" %
                  (off + i, got[i], model[off + i]), flush=True)
            bad += 1
        off += ln
        cookie += 1
    request(s, CMD_DISC, 0, 0, 0)
    s.close()
    if bad:
        sys.exit(1)
    print("ok   %d rounds of %d overlapping unaligned writes in flight, "
          "%d bytes as the model" % (ROUNDS, BATCH, SPAN), flush=True)


main()
