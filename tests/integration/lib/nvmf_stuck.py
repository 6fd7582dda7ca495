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
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvmf_tcp import admin_queue, capsule, sqe  # noqa: E402

port, nqn, log = int(sys.argv[1]), sys.argv[2], sys.argv[3]
HOSTNQN = "nqn.2014-08.org.example:stuck-host"
MIB = 1 << 20

s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 10)
s.settimeout(10)
s.connect(("127.0.0.1", port))
admin_queue(s, nqn, HOSTNQN, kato_ms=1000)

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
