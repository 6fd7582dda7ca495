#!/usr/bin/env python3
"""A burst of small NVMe/TCP capsules that each ask for a big answer.

  nvmf_burst.py PORT PID

Before logging in to any real subsystem (the discovery controller serves
anyone): ICReq, Connect to the discovery NQN, CC.EN = 1, then
- Identify with a 1 MiB SGL: Data SGL Length Invalid (Identify data is
  4 KiB; a 1 MiB buffer was allocated, zeroed and sent for each);
- COUNT Get Log Page (discovery log, NUMD for 1 MiB) in one write while
  the client reads nothing: the target (PID) must not queue much more
  than out_max (16 MiB) of answers: its data segment grows by less than
  LIMIT_MIB. Before, one read of 256 KiB of capsules was parsed at once
  and every answer allocated (COUNT MiB);
- then every answer arrives, well framed: input went on as output
  drained.
Exit 1 on a mismatch.
"""
import socket
import struct
import sys
import time

port, pid = int(sys.argv[1]), int(sys.argv[2])
COUNT = 300
LIMIT_MIB = 128
MIB = 1 << 20
DISC = "nqn.2014-08.org.nvmexpress.discovery"
HOSTNQN = "nqn.2014-08.org.example:burst-host"


def recv_into(s, view):
    got = 0
    while got < len(view):
        n = s.recv_into(view[got:])
        if not n:
            raise EOFError("closed")
        got += n


def recv_pdu(s):
    ch = bytearray(8)
    recv_into(s, memoryview(ch))
    plen = struct.unpack_from("<I", ch, 4)[0]
    rest = bytearray(plen - 8)
    recv_into(s, memoryview(rest))
    return ch[0], ch + rest


def capsule(sqe, data=b""):
    pdo = 72 if data else 0
    return struct.pack("<BBBBI", 4, 0, 72, pdo, 72 + len(data)) + sqe + data


def sqe(opc, cid, cdw10=0, cdw11=0, sgl_len=0, sgl_type=0x5A, fctype=None,
        rest=b""):
    b = bytearray(64)
    b[0] = opc
    b[1] = 0x40                                   # PSDT: SGL
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


def vmdata_kib():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmData:"):
                return int(line.split()[1])
    sys.exit("FAIL: no VmData for the daemon")


s = socket.create_connection(("127.0.0.1", port), timeout=30)
s.sendall(struct.pack("<BBBBIHBBI", 0, 0, 128, 0, 128, 0, 0, 0, 0) +
          bytes(112))
t, _ = recv_pdu(s)
assert t == 1, f"no ICResp: type {t}"
data = bytearray(1024)
struct.pack_into("<H", data, 16, 0xFFFF)
data[256:256 + len(DISC)] = DISC.encode()
data[512:512 + len(HOSTNQN)] = HOSTNQN.encode()
s.sendall(capsule(sqe(0x7F, 1, fctype=1, sgl_len=1024, sgl_type=0x01,
                      rest=struct.pack("<HHHBBI", 0, 0, 31, 0, 0, 0)),
                  bytes(data)))
t, p = recv_pdu(s)
assert t == 5 and status(p) == 0, f"connect failed: {status(p):#x}"
s.sendall(capsule(sqe(0x7F, 2, fctype=0,
                      rest=struct.pack("<BxxxIQ", 0, 0x14, 0x460001))))
t, p = recv_pdu(s)
assert t == 5 and status(p) == 0, "CC.EN failed"

# Identify with a 1 MiB buffer: refused, nothing but the response
s.sendall(b"".join(capsule(sqe(0x06, 10 + i, cdw10=1, sgl_len=MIB))
                   for i in range(8)))
for i in range(8):
    t, p = recv_pdu(s)
    if t != 5 or status(p) & 0x7FF != 0x0F:
        sys.exit(f"FAIL 1 MiB Identify: PDU type {t}, status "
                 f"{status(p):#x}, want 0xf")
print("ok Identify with a 1 MiB SGL: Data SGL Length Invalid")

numd = MIB // 4 - 1
burst = b"".join(capsule(sqe(0x02, 100 + i,
                             cdw10=0x70 | (numd & 0xFFFF) << 16,
                             cdw11=numd >> 16, sgl_len=MIB))
                 for i in range(COUNT))
before = vmdata_kib()
s.sendall(burst)
time.sleep(2)
grown = (vmdata_kib() - before) // 1024
print(f"{COUNT} Get Log Page of 1 MiB unread: the target's data grew "
      f"{grown} MiB")
if grown >= LIMIT_MIB:
    sys.exit(f"FAIL burst: {grown} MiB queued (limit {LIMIT_MIB})")
c2h = rsp = 0
while rsp < COUNT:
    t, p = recv_pdu(s)
    if t == 7 and struct.unpack_from("<I", p, 16)[0] == MIB:
        c2h += 1
    elif t == 5 and status(p) == 0:
        rsp += 1
    else:
        sys.exit(f"FAIL burst: PDU type {t}")
if c2h != COUNT:
    sys.exit(f"FAIL burst: {c2h} C2HData for {COUNT} commands")
print(f"ok {COUNT} answers of 1 MiB, each in its turn")
s.close()
