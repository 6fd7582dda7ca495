#!/usr/bin/env python3
"""A small raw NVMe/TCP client for malformed-input tests of blkstack's target.

  nvmf_raw.py PORT NQN

Each case opens its own connection and checks the specified answer: a
C2HTermReq with the right FES (then the connection closes), or a response
capsule with the right status. Prints one line per case; exit 1 on the
first mismatch.
"""
import socket
import struct
import sys

port, nqn = int(sys.argv[1]), sys.argv[2]
HOSTNQN = "nqn.2014-08.org.example:raw-host"


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        d = s.recv(n - len(buf))
        if not d:
            raise EOFError("closed")
        buf += d
    return buf


def recv_pdu(s):
    ch = recv_exact(s, 8)
    plen = struct.unpack_from("<I", ch, 4)[0]
    return ch[0], ch + recv_exact(s, plen - 8)


def conn(hdgst=False):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    icreq = struct.pack("<BBBBIHBBI", 0, 0, 128, 0, 128, 0, 0,
                        1 if hdgst else 0, 0) + bytes(112)
    s.sendall(icreq)
    t, p = recv_pdu(s)
    assert t == 1, f"no ICResp: type {t}"
    return s


def capsule(sqe, data=b"", hdgst=False):
    hlen = 72
    hd = 4 if hdgst else 0
    pdo = hlen + hd if data else 0
    plen = hlen + hd + len(data)
    flags = 1 if hdgst else 0
    hdr = struct.pack("<BBBBI", 4, flags, hlen, pdo, plen) + sqe
    if hdgst:
        hdr += struct.pack("<I", crc32c(hdr))
    return hdr + data


def sqe(opc, cid, nsid=0, cdw10=0, cdw11=0, cdw12=0, sgl_len=0,
        sgl_type=0x5A, fctype=None, rest=b""):
    b = bytearray(64)
    b[0] = opc
    b[1] = 0x40                                   # PSDT: SGL
    struct.pack_into("<H", b, 2, cid)
    if fctype is not None:
        b[4] = fctype
    else:
        struct.pack_into("<I", b, 4, nsid)
    struct.pack_into("<I", b, 24 + 8, sgl_len)
    b[24 + 15] = sgl_type
    struct.pack_into("<III", b, 40, cdw10, cdw11, cdw12)
    if rest:
        b[40:40 + len(rest)] = rest
    return bytes(b)


def status(p):
    return struct.unpack_from("<H", p, 8 + 14)[0] >> 1


def connect(s, qid, cntlid=0xFFFF):
    data = bytearray(1024)
    struct.pack_into("<H", data, 16, cntlid)
    data[256:256 + len(nqn)] = nqn.encode()
    data[512:512 + len(HOSTNQN)] = HOSTNQN.encode()
    rest = struct.pack("<HHHBBI", 0, qid, 31, 0, 0, 0)
    s.sendall(capsule(sqe(0x7F, 1, fctype=1, sgl_len=1024, sgl_type=0x01,
                          rest=rest), bytes(data)))
    t, p = recv_pdu(s)
    assert t == 5 and status(p) == 0, f"connect failed: {status(p):#x}"
    return struct.unpack_from("<I", p, 8)[0] & 0xFFFF


def enable(s):
    rest = struct.pack("<BxxxIQ", 0, 0x14, 0x460001)
    s.sendall(capsule(sqe(0x7F, 2, fctype=0, rest=rest)))
    t, p = recv_pdu(s)
    assert t == 5 and status(p) == 0


def expect_term(s, fes, what):
    try:
        t, p = recv_pdu(s)
    except EOFError:
        sys.exit(f"FAIL {what}: closed without C2HTermReq")
    if t != 3:
        sys.exit(f"FAIL {what}: PDU type {t}, not C2HTermReq")
    got = struct.unpack_from("<H", p, 8)[0]
    if got != fes:
        sys.exit(f"FAIL {what}: FES {got}, want {fes}")
    try:
        s.settimeout(5)
        if s.recv(1):
            sys.exit(f"FAIL {what}: data after C2HTermReq")
    except ConnectionResetError:
        pass
    print(f"ok {what}: C2HTermReq FES {fes}, closed")


def expect_status(s, sf, what):
    t, p = recv_pdu(s)
    if t != 5:
        sys.exit(f"FAIL {what}: PDU type {t}")
    got = status(p)
    if got & 0x7FF != sf:
        sys.exit(f"FAIL {what}: status {got:#x}, want {sf:#x}")
    print(f"ok {what}: status {got:#x}")


# bad header length
s = conn()
hdr = bytearray(capsule(sqe(0x06, 1)))
hdr[2] = 64
s.sendall(bytes(hdr))
expect_term(s, 1, "capsule with HLEN 64")

# unknown PDU type
s = conn()
s.sendall(struct.pack("<BBBBI", 0x42, 0, 24, 0, 24) + bytes(16))
expect_term(s, 1, "unknown PDU type 0x42")

# PDU before ICReq
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(capsule(sqe(0x06, 1)))
expect_term(s, 2, "capsule before ICReq")

# ICReq asking for data aligned (HPDA 1): refused, as Linux's nvmet does
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(struct.pack("<BBBBIHBBI", 0, 0, 128, 0, 128, 0, 1, 0, 0) +
          bytes(112))
expect_term(s, 6, "ICReq with HPDA 1")

# bad header digest
s = conn(hdgst=True)
bad = bytearray(capsule(sqe(0x06, 1), hdgst=True))
bad[72] ^= 0xFF
s.sendall(bytes(bad))
expect_term(s, 3, "bad header digest")

# a command before Connect: Command Sequence Error
s = conn()
s.sendall(capsule(sqe(0x06, 7, cdw10=1, sgl_len=4096)))
expect_status(s, 0x0C, "Identify before Connect")
s.close()

# admin: before CC.EN, unknown opcode, bad log page
s = conn()
cntlid = connect(s, 0)
s.sendall(capsule(sqe(0x06, 3, cdw10=1, sgl_len=4096)))
expect_status(s, 0x0C, "Identify before CC.EN")
enable(s)
s.sendall(capsule(sqe(0x7E, 4)))
expect_status(s, 0x01, "unknown admin opcode")
s.sendall(capsule(sqe(0x02, 5, cdw10=0x33 | (127 << 16), sgl_len=512)))
expect_status(s, 0x109, "unknown log page")

# I/O queue: out of range LBA, unknown opcode, bad namespace
io = conn()
connect(io, 1, cntlid)
nblocks = (64 << 20) // 512
io.sendall(capsule(sqe(0x02, 1, nsid=1, cdw10=nblocks - 1, cdw12=1,
                       sgl_len=1024)))
expect_status(io, 0x80, "read past the end")
io.sendall(capsule(sqe(0x7E, 2, nsid=1)))
expect_status(io, 0x01, "unknown I/O opcode")
io.sendall(capsule(sqe(0x02, 3, nsid=9, sgl_len=512)))
expect_status(io, 0x0B, "read of NSID 9")
io.sendall(capsule(sqe(0x08, 4, nsid=1, cdw10=nblocks, cdw12=0)))
expect_status(io, 0x80, "write zeroes past the end")
# in-capsule data: 16 KiB (IOCCSZ) is taken, 32 KiB is Data SGL Length
# Invalid (the PDU itself is within MAXH2CDATA)
io.sendall(capsule(sqe(0x01, 5, nsid=1, cdw12=31, sgl_len=16384,
                       sgl_type=0x01), bytes(16384)))
expect_status(io, 0x00, "16 KiB write in capsule")
io.sendall(capsule(sqe(0x01, 6, nsid=1, cdw12=63, sgl_len=32768,
                       sgl_type=0x01), bytes(32768)))
expect_status(io, 0x0F, "32 KiB in capsule, above IOCCSZ")

# 32 reads of 64 KiB pipelined while the client does not read: the
# stream that comes out once it does is well framed
import time  # noqa: E402
for i in range(32):
    io.sendall(capsule(sqe(0x02, 100 + i, nsid=1, cdw10=i * 128, cdw12=127,
                           sgl_len=65536)))
time.sleep(1)
c2h = rsp = 0
while rsp < 32:
    t, p = recv_pdu(io)
    if t == 7 and struct.unpack_from("<I", p, 16)[0] == 65536 and \
            len(p) == 24 + 65536:
        c2h += 1
    elif t == 5 and status(p) == 0:
        rsp += 1
    else:
        sys.exit(f"FAIL pipelined reads: PDU type {t}")
if c2h != 32:
    sys.exit(f"FAIL pipelined reads: {c2h} C2HData")
print("ok 32 pipelined 64 KiB reads under backpressure")
io.close()
s.close()
print("all malformed cases answered")
