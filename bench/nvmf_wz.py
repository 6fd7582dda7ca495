#!/usr/bin/env python3
"""pynvmeof (a peer host we did not write) zeroing a range by Write Zeroes.

  nvmf_wz.py PORT NQN BYTES [deac|nodeac] [DEPTH]

Connects to namespace 1 of NQN on 127.0.0.1:PORT, then sends Write Zeroes
commands of the largest count (65536 blocks, the 16-bit NLB) over the
first BYTES of the namespace, DEPTH in flight on its one I/O queue, DEAC
(CDW12 bit 25) set unless "nodeac". Every completion must carry status 0.
Exits non-zero on any error. Used by bench/nvmf.sh.

pynvmeof's own write_zeroes() waits for its reply on the admin socket
(../shared/peers/README.md) and cannot set DEAC: the commands are built
with its pack_nvme_write_zeroes_command() and sent and received on its
I/O socket here.
"""
import os
import struct
import sys

sys.path.insert(0, os.environ["PYNVMEOF"] + "/src")
from nvmeof_client import NVMeoFClient  # noqa: E402
from nvmeof_client.protocol import (  # noqa: E402
    NVMEOF_TCP_CMD_HEADER_LEN, PDUType, pack_nvme_write_zeroes_command,
    pack_pdu_header)

port, nqn, nbytes = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
deac = (sys.argv[4] if len(sys.argv) > 4 else "deac") == "deac"
depth = int(sys.argv[5]) if len(sys.argv) > 5 else 8
DEAC = 1 << 25
MAX_NLB = 65536

c = NVMeoFClient("127.0.0.1", nqn, port=port, timeout=60)
c.connect()
ns = c.identify_namespace(1)
lbs = 1 << ns["lbaf"][ns["flbas"] & 0xF]["lbads"]
c.setup_io_queues()
sock = c._io_socket
blocks = nbytes // lbs
if blocks * lbs != nbytes or blocks > ns["nsze"]:
    sys.exit(f"{nbytes} bytes is not a whole number of {lbs}-byte blocks "
             f"inside the namespace ({ns['nsze']} blocks)")


def send(cid, lba, nlb):
    cmd = bytearray(pack_nvme_write_zeroes_command(cid, 1, lba, nlb - 1))
    if deac:
        (cdw12,) = struct.unpack_from("<I", cmd, 48)
        struct.pack_into("<I", cmd, 48, cdw12 | DEAC)
    hdr = pack_pdu_header(pdu_type=PDUType.CMD, flags=0,
                          hlen=NVMEOF_TCP_CMD_HEADER_LEN, pdo=0,
                          plen=NVMEOF_TCP_CMD_HEADER_LEN)
    sock.sendall(hdr + bytes(cmd))


def reap():
    h, data = c._receive_pdu_on_socket(sock)
    if h.pdu_type != PDUType.RSP:
        sys.exit(f"expected a response capsule, got PDU type {h.pdu_type}")
    cid, status = struct.unpack_from("<HH", data, 12)
    if status >> 1:
        sys.exit(f"Write Zeroes cid {cid} failed: status 0x{status >> 1:x}")


lba, cid, inflight = 0, 0, 0
while lba < blocks or inflight:
    while lba < blocks and inflight < depth:
        nlb = min(MAX_NLB, blocks - lba)
        send(cid, lba, nlb)
        cid = (cid + 1) & 0xFFFF
        lba += nlb
        inflight += 1
    reap()
    inflight -= 1
c.disconnect()
