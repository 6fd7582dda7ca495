#!/usr/bin/env python3
"""An ended NVMe/TCP queue whose host stopped reading still closes on KATO.

  nvmf_stuck.py PORT NQN LOG

An admin queue with KATO 1 s and a small receive buffer: 12 Get Log Page
commands of 1 MiB each, then a PDU of an unknown type (fatal: the queue
ends, a C2HTermReq is queued behind 12 MiB of answers), in one write; the
client then reads nothing and sends no Keep Alive, but keeps the socket
open. The daemon must close the connection for the keep alive timeout
(its log, LOG, says so) within a few seconds. Before, the timeout's close
was dropped because the queue had ended, and an ended queue closes only
once its output is sent: the connection, its 12 MiB and its controller
stayed for as long as the client liked. Exit 1 if no close came.
"""
import socket
import struct
import sys
import time

port, nqn, log = int(sys.argv[1]), sys.argv[2], sys.argv[3]
HOSTNQN = "nqn.2014-08.org.example:stuck-host"
MIB = 1 << 20


def recv_pdu(s):
    ch = b""
    while len(ch) < 8:
        ch += s.recv(8 - len(ch))
    plen = struct.unpack_from("<I", ch, 4)[0]
    rest = b""
    while len(rest) < plen - 8:
        rest += s.recv(plen - 8 - len(rest))
    return ch[0], ch + rest


def capsule(sqe, data=b""):
    pdo = 72 if data else 0
    return struct.pack("<BBBBI", 4, 0, 72, pdo, 72 + len(data)) + sqe + data


def sqe(opc, cid, cdw10=0, cdw11=0, sgl_len=0, sgl_type=0x5A, fctype=None,
        rest=b""):
    b = bytearray(64)
    b[0] = opc
    b[1] = 0x40
    struct.pack_into("<H", b, 2, cid)
    if fctype is not None:
        b[4] = fctype
    struct.pack_into("<I", b, 32, sgl_len)
    b[39] = sgl_type
    struct.pack_into("<II", b, 40, cdw10, cdw11)
    if rest:
        b[40:40 + len(rest)] = rest
    return bytes(b)


def status(p):
    return struct.unpack_from("<H", p, 8 + 14)[0] >> 1


s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 10)
s.settimeout(10)
s.connect(("127.0.0.1", port))
s.sendall(struct.pack("<BBBBIHBBI", 0, 0, 128, 0, 128, 0, 0, 0, 0) +
          bytes(112))
t, _ = recv_pdu(s)
assert t == 1, f"no ICResp: type {t}"
data = bytearray(1024)
struct.pack_into("<H", data, 16, 0xFFFF)
data[256:256 + len(nqn)] = nqn.encode()
data[512:512 + len(HOSTNQN)] = HOSTNQN.encode()
# KATO 1000 ms
s.sendall(capsule(sqe(0x7F, 1, fctype=1, sgl_len=1024, sgl_type=0x01,
                      rest=struct.pack("<HHHBBI", 0, 0, 31, 0, 0, 1000)),
                  bytes(data)))
t, p = recv_pdu(s)
assert t == 5 and status(p) == 0, f"connect failed: {status(p):#x}"
s.sendall(capsule(sqe(0x7F, 2, fctype=0,
                      rest=struct.pack("<BxxxIQ", 0, 0x14, 0x460001))))
t, p = recv_pdu(s)
assert t == 5 and status(p) == 0, "CC.EN failed"

numd = MIB // 4 - 1
s.sendall(b"".join(capsule(sqe(0x02, 10 + i,
                               cdw10=0x01 | (numd & 0xFFFF) << 16,
                               cdw11=numd >> 16, sgl_len=MIB))
                   for i in range(12)) +
          struct.pack("<BBBBI", 0x42, 0, 24, 0, 24) + bytes(16))
deadline = time.time() + 10
while time.time() < deadline:
    with open(log, errors="replace") as f:
        if any(HOSTNQN in line and "keep alive timeout" in line
               for line in f):
            print("ok an ended queue nobody reads closed on KATO")
            s.close()
            sys.exit(0)
    time.sleep(0.2)
s.close()
sys.exit("FAIL an ended queue nobody reads was not closed on KATO")
