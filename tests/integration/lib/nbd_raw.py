#!/usr/bin/env python3
"""Bad input for blkstackd's NBD server from a raw socket client.

Usage: nbd_raw.py HOST PORT EXPORT SIZE
       nbd_raw.py HOST PORT EXPORT SIZE --stop-while-negotiating PID

Each case opens its own connection and checks the server answers as the
NBD protocol says, or closes that connection; a bystander connection opened
first must still work at the end, and a write the client abandoned midway
must not have reached the device. A last group checks conformance details
of the NBD protocol document on the wire (meta contexts, TLS refused in
NOTLS mode, GO after INFO, structured errors, REQ_ONE). Exit 0 when every
case holds.

With --stop-while-negotiating, only this: half an NBD_OPT_INFO is sent, the
daemon PID gets SIGTERM, the rest follows; the server must answer
NBD_REP_ERR_SHUTDOWN and then close (the daemon stops).
"""
import os
import signal
import socket
import struct
import sys
import time

NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
REPLY_MAGIC = 0x0003E889045565A9
REQ_MAGIC = 0x25609513
SIMPLE_MAGIC = 0x67446698
OPT_EXPORT_NAME, OPT_ABORT, OPT_LIST, OPT_GO = 1, 2, 3, 7
REP_ACK, REP_INFO = 1, 3
ERR_UNSUP = (1 << 31) + 1
ERR_TOO_BIG = (1 << 31) + 9
ERR_UNKNOWN = (1 << 31) + 6
CMD_READ, CMD_WRITE, CMD_DISC, CMD_FLUSH, CMD_TRIM = 0, 1, 2, 3, 4
CMD_WRITE_ZEROES = 6
EINVAL, ENOSPC, EOVERFLOW, EPERM = 22, 28, 75, 1

HOST, PORT, EXPORT, SIZE = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def recvn(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError("closed after %d of %d bytes" % (len(b), n))
        b += c
    return b


def closed(s, timeout=5.0):
    """True when the server closes the connection (EOF or reset)."""
    s.settimeout(timeout)
    try:
        while True:
            c = s.recv(65536)
            if not c:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def connect():
    s = socket.create_connection((HOST, PORT), timeout=10)
    magic, opt, flags = struct.unpack(">QQH", recvn(s, 18))
    assert magic == NBDMAGIC and opt == IHAVEOPT, "bad greeting"
    assert flags & 1, "no FIXED_NEWSTYLE"
    s.sendall(struct.pack(">I", 3))  # FIXED_NEWSTYLE | NO_ZEROES
    return s


def send_opt(s, opt, data=b""):
    s.sendall(struct.pack(">QII", IHAVEOPT, opt, len(data)) + data)


def read_opt_reply(s):
    magic, opt, typ, ln = struct.unpack(">QIII", recvn(s, 20))
    assert magic == REPLY_MAGIC, "bad option reply magic %x" % magic
    return opt, typ, recvn(s, ln)


def go(s, name=EXPORT):
    n = name.encode()
    send_opt(s, OPT_GO, struct.pack(">I", len(n)) + n + struct.pack(">H", 0))
    while True:
        opt, typ, data = read_opt_reply(s)
        if typ == REP_ACK:
            return True
        if typ & (1 << 31):
            return typ
        assert typ == REP_INFO


def request(s, typ, off, ln, flags=0, cookie=1, payload=b""):
    s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, flags, typ, cookie, off, ln) + payload)


def simple_reply(s):
    magic, err, cookie = struct.unpack(">IIQ", recvn(s, 16))
    assert magic == SIMPLE_MAGIC, "bad reply magic %x" % magic
    return err, cookie


def ready():
    s = connect()
    r = go(s)
    assert r is True, "GO failed: %r" % r
    return s


def stop_while_negotiating(pid):
    s = connect()
    n = EXPORT.encode()
    data = struct.pack(">I", len(n)) + n + struct.pack(">H", 0)
    s.sendall(struct.pack(">QII", IHAVEOPT, 6, len(data)) + data[:3])
    time.sleep(0.3)
    os.kill(pid, signal.SIGTERM)
    time.sleep(0.5)
    s.sendall(data[3:])
    opt, typ, msg = read_opt_reply(s)
    check((opt, typ) == (6, (1 << 31) + 7) and b"shutting down" in msg,
          "INFO half sent when the daemon stops: NBD_REP_ERR_SHUTDOWN")
    check(closed(s), "then the connection closes")


if len(sys.argv) == 7 and sys.argv[5] == "--stop-while-negotiating":
    stop_while_negotiating(int(sys.argv[6]))
    sys.exit(1 if failures else 0)

# a bystander connection that must survive everything below
bystander = ready()
request(bystander, CMD_WRITE, 0, 4096, cookie=7, payload=b"\x42" * 4096)
check(simple_reply(bystander) == (0, 7), "bystander write")

# --- handshake ---------------------------------------------------------
s = socket.create_connection((HOST, PORT), timeout=10)
recvn(s, 18)
s.sendall(struct.pack(">I", 3))
s.sendall(struct.pack(">QII", 0x1122334455667788, OPT_GO, 0))
check(closed(s), "wrong option magic: connection closed")

s = connect()
send_opt(s, 0x7777, b"junk")
opt, typ, _ = read_opt_reply(s)
check(opt == 0x7777 and typ == ERR_UNSUP, "unknown option: NBD_REP_ERR_UNSUP")
check(go(s) is True, "handshake goes on after an unknown option")
s.close()

s = connect()
big = 100 << 10
s.sendall(struct.pack(">QII", IHAVEOPT, OPT_LIST, big) + b"\0" * big)
try:
    opt, typ, _ = read_opt_reply(s)
    check(typ & (1 << 31) != 0, "100 KiB option: error reply (0x%x)" % typ)
    check(go(s) is True, "handshake goes on after an oversized option")
except EOFError:
    check(True, "100 KiB option: connection closed")
s.close()

s = connect()
r = go(s, "no-such-export")
check(r is not True and r & (1 << 31) != 0, "GO to a missing export: error reply")
check(go(s) is True, "GO to the right export afterwards")
s.close()

s = connect()
send_opt(s, OPT_ABORT)
try:
    opt, typ, _ = read_opt_reply(s)
    check(typ == REP_ACK, "ABORT acknowledged")
except EOFError:
    check(True, "ABORT: closed")
check(closed(s), "ABORT closes")

# --- transmission ------------------------------------------------------
s = ready()
request(s, 99, 0, 512, cookie=11)
check(simple_reply(s) == (EINVAL, 11), "unknown command: EINVAL")
request(s, CMD_READ, 0, 512, flags=0x8000, cookie=12)
err, c = simple_reply(s)
check((err, c) == (EINVAL, 12), "unknown flag: EINVAL")
request(s, CMD_READ, (1 << 64) - 512, 4096, cookie=13)
check(simple_reply(s) == (EINVAL, 13), "offset+length overflow: EINVAL")
request(s, CMD_READ, SIZE - 512, 4096, cookie=14)
check(simple_reply(s) == (EINVAL, 14), "read past the end: EINVAL")
request(s, CMD_WRITE, SIZE - 512, 1024, cookie=15, payload=b"\x01" * 1024)
check(simple_reply(s) == (ENOSPC, 15), "write past the end: ENOSPC")
request(s, CMD_WRITE_ZEROES, SIZE, 4096, cookie=16)
err, c = simple_reply(s)
check(c == 16 and err in (ENOSPC, EINVAL), "zero past the end: ENOSPC/EINVAL (%d)" % err)
request(s, CMD_READ, 0, 64 << 20, cookie=17)
err, c = simple_reply(s)
check(c == 17 and err in (EINVAL, EOVERFLOW), "64 MiB read over the maximum: %d" % err)
big = 40 << 20
try:
    request(s, CMD_WRITE, 0, big, cookie=21, payload=b"\x99" * big)
    err, c = simple_reply(s)
    check(c == 21 and err in (EINVAL, EOVERFLOW), "40 MiB write over the maximum: %d" % err)
except (EOFError, BrokenPipeError, ConnectionResetError):
    check(True, "40 MiB write over the maximum: connection closed")
    s = ready()
request(s, CMD_READ, 0, 4096, cookie=18)
err, c = simple_reply(s)
data = recvn(s, 4096) if err == 0 else b""
check(err == 0 and data == b"\x42" * 4096, "a good read after the errors")
request(s, CMD_FLUSH, 0, 0, cookie=19)
check(simple_reply(s) == (0, 19), "flush")
s.sendall(struct.pack(">IHHQQI", 0xDEADBEEF, 0, CMD_READ, 20, 0, 512))
check(closed(s), "wrong request magic: connection closed")

# many requests in flight, answered (in any order) by cookie
s = ready()
for i in range(64):
    request(s, CMD_READ, i * 4096, 4096, cookie=1000 + i)
seen = set()
for i in range(64):
    err, c = simple_reply(s)
    recvn(s, 4096)
    seen.add(c)
check(seen == set(range(1000, 1064)), "64 reads in flight, 64 replies")
request(s, CMD_DISC, 0, 0)
check(closed(s), "DISC closes")

# a write abandoned midway never reaches the device
s = ready()
off = 8 << 20
request(s, CMD_WRITE, off, 1 << 20, cookie=30, payload=b"\xEE" * (512 << 10))
s.close()
s = ready()
request(s, CMD_READ, off, 1 << 20, cookie=31)
err, c = simple_reply(s)
data = recvn(s, 1 << 20)
check(err == 0 and b"\xEE" not in data, "half-sent write: nothing written")
s.close()

# --- conformance details (NBD protocol document, docs/nbd.md) ------------
OPT_STARTTLS, OPT_INFO, OPT_SR, OPT_LIST_META, OPT_SET_META = 5, 6, 8, 9, 10
REP_META = 4
ERR_INVALID = (1 << 31) + 3
STRUCT_MAGIC = 0x668E33EF


def opt_replies(s, opt, data=b""):
    """All replies to one option, up to the final ACK or error."""
    send_opt(s, opt, data)
    out = []
    while True:
        o, typ, d = read_opt_reply(s)
        assert o == opt, "reply for option %d, sent %d" % (o, opt)
        out.append((typ, d))
        if typ == REP_ACK or typ & (1 << 31):
            return out


def meta_data(name, queries):
    n = name.encode()
    b = struct.pack(">I", len(n)) + n + struct.pack(">I", len(queries))
    for q in queries:
        b += struct.pack(">I", len(q)) + q
    return b


def info_flags(replies):
    for typ, d in replies:
        if typ == REP_INFO and struct.unpack(">H", d[:2])[0] == 0:
            return struct.unpack(">QH", d[2:12])[1]
    return None


def chunk(s):
    magic, flags, typ, cookie, ln = struct.unpack(">IHHQI", recvn(s, 20))
    assert magic == STRUCT_MAGIC, "not a structured chunk: %x" % magic
    return flags, typ, cookie, recvn(s, ln)


s = connect()
r = opt_replies(s, OPT_STARTTLS)
check(r[-1][0] == ERR_UNSUP, "STARTTLS without TLS: NBD_REP_ERR_UNSUP")
r = opt_replies(s, OPT_SET_META, meta_data(EXPORT, [b"base:allocation"]))
check(r[-1][0] == ERR_INVALID, "SET_META_CONTEXT before STRUCTURED_REPLY: "
      "NBD_REP_ERR_INVALID")
check(opt_replies(s, OPT_SR)[-1][0] == REP_ACK, "STRUCTURED_REPLY")
r = opt_replies(s, OPT_LIST_META,
                meta_data(EXPORT, [b"qemu:", b"x-blkstack:nothing"]))
check(r == [(REP_ACK, b"")], "LIST_META_CONTEXT: unknown namespaces ignored")
r = opt_replies(s, OPT_LIST_META, meta_data(EXPORT, [b"base:"]))
check([t for t, _ in r] == [REP_META, REP_ACK] and
      r[0][1][4:] == b"base:allocation", "LIST_META_CONTEXT base: lists "
      "base:allocation")
r = opt_replies(s, OPT_SET_META, meta_data(EXPORT, [b"base:allocation"]))
check([t for t, _ in r] == [REP_META, REP_ACK], "SET_META_CONTEXT "
      "base:allocation")
n = EXPORT.encode()
gd = struct.pack(">I", len(n)) + n + struct.pack(">HH", 1, 3)
fi = info_flags(opt_replies(s, OPT_INFO, gd))
r = opt_replies(s, OPT_GO, gd)
check(r[-1][0] == REP_ACK and info_flags(r) == fi, "GO right after INFO: "
      "the same flags (0x%x)" % fi)
check(fi & (1 << 7) and fi & (1 << 3), "flags: SEND_DF and SEND_FUA")
request(s, CMD_READ, 0, 0, cookie=40)
f, typ, c, d = chunk(s)
check(c == 40 and typ == 0x8001 and struct.unpack(">I", d[:4])[0] == EINVAL,
      "zero-length read: an error chunk with EINVAL")
request(s, CMD_READ, 0, 512, flags=0x2, cookie=41)  # NO_HOLE on a read
f, typ, c, d = chunk(s)
check(c == 41 and typ == 0x8001 and f & 1, "read with a bad flag: a "
      "structured error (never a simple reply)")
request(s, CMD_READ, 0, 512, flags=0x1, cookie=42)  # FUA
f, typ, c, d = chunk(s)
check(c == 42 and typ == 1 and len(d) == 8 + 512, "read with FUA: served")
request(s, 7, 4096, SIZE - 8192, flags=0x8, cookie=43)  # REQ_ONE
f, typ, c, d = chunk(s)
ok = c == 43 and typ == 5 and len(d) == 12
check(ok and struct.unpack(">I", d[4:8])[0] <= SIZE - 8192,
      "block status REQ_ONE: one extent within the request")
request(s, CMD_DISC, 0, 0)
check(closed(s), "DISC closes")

# the bystander still works
request(bystander, CMD_READ, 0, 4096, cookie=8)
err, c = simple_reply(bystander)
data = recvn(bystander, 4096)
check(err == 0 and c == 8 and data == b"\x42" * 4096, "bystander still served")
request(bystander, CMD_DISC, 0, 0)
bystander.close()

print("%d failed" % len(failures))
sys.exit(1 if failures else 0)
