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
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvmf_tcp import admin_queue, capsule, recv_pdu, sqe, status  # noqa: E402

port, pid = int(sys.argv[1]), int(sys.argv[2])
COUNT = 300
LIMIT_MIB = 128
MIB = 1 << 20
DISC = "nqn.2014-08.org.nvmexpress.discovery"
HOSTNQN = "nqn.2014-08.org.example:burst-host"


def vmdata_kib():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmData:"):
                return int(line.split()[1])
    sys.exit("FAIL: no VmData for the daemon")


s = socket.create_connection(("127.0.0.1", port), timeout=30)
admin_queue(s, DISC, HOSTNQN)

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
