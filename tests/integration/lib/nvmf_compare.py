#!/usr/bin/env python3
"""NVMe Compare (opcode 05h) with pynvmeof, for tests/integration/nvmf_compare.sh.

pynvmeof's own compare_data() cannot be used as it is: its capsule's SGL
says the data comes later by R2T (transport data block, 5Ah) but the data
rides in the capsule, and it goes out on the admin socket. So the Compare
is built here from pynvmeof's lower-level pieces: the SQE from
pack_nvme_compare_command() with the SGL type set for where the data
goes, the PDU header from pack_pdu_header(), the R2T answered by
_handle_r2t_and_send_data(), all on the I/O socket. The data goes in the
capsule when it fits the target's IOCCSZ, else by R2T/H2CData.

  nvmf_compare.py PORT NQN

prints "oncs=N incapsule=N lbs=N", then for each case one line
  "case=NAME len=N via=capsule|r2t sct=S sc=0xSC dnr=D"
and finally "unchanged" when the device still holds what was written.
"""
import os
import random
import struct
import sys

sys.path.insert(0, os.environ.get("PYNVMEOF", "/work/shared/peers/pynvmeof") + "/src")
from nvmeof_client import NVMeoFClient  # noqa: E402
from nvmeof_client.protocol import (PDUType, pack_nvme_compare_command,  # noqa: E402
                                    pack_pdu_header)

CMD_HLEN = 72           # CapsuleCmd header: 8 common + 64 SQE
SGL_INCAPSULE = 0x01    # data block, offset subtype: the data is in the capsule
SGL_TRANSPORT = 0x5A    # transport data block: the data comes by R2T

port, nqn = int(sys.argv[1]), sys.argv[2]
c = NVMeoFClient("127.0.0.1", nqn, port=port, timeout=20)
c.connect()
ic = c.identify_controller()
c.setup_io_queues()
lbs = c._get_namespace_logical_block_size(1)
incapsule = c._get_inline_data_size()
print(f"oncs={ic['oncs']} incapsule={incapsule} lbs={lbs}")


def compare(lba, data):
    """One Compare of @data at @lba on NSID 1: (via, sct, sc, dnr)."""
    sock = c._io_socket
    cid = c._get_next_io_command_id()
    sqe = bytearray(pack_nvme_compare_command(cid, 1, lba, len(data) // lbs - 1, lbs))
    inline = len(data) <= incapsule
    sqe[39] = SGL_INCAPSULE if inline else SGL_TRANSPORT
    if inline:
        sock.sendall(pack_pdu_header(PDUType.CMD, 0, CMD_HLEN, CMD_HLEN,
                                     CMD_HLEN + len(data)) + bytes(sqe) + data)
    else:
        sock.sendall(pack_pdu_header(PDUType.CMD, 0, CMD_HLEN, 0, CMD_HLEN) + bytes(sqe))
        # the target asks for all of it in one R2T (MAXH2CDATA is its MDTS)
        c._handle_r2t_and_send_data(cid, bytes(data), sock)
    h, d = c._receive_pdu_on_socket(sock)
    assert h.pdu_type == PDUType.RSP, f"expected a response, got PDU type {h.pdu_type}"
    rcid, status = struct.unpack_from("<HH", d, 12)
    assert rcid == cid, f"response for CID {rcid}, not {cid}"
    sf = status >> 1    # bit 0 is the phase tag
    return ("capsule" if inline else "r2t"), (sf >> 8) & 7, sf & 0xFF, (sf >> 14) & 1


def case(name, lba, data):
    via, sct, sc, dnr = compare(lba, data)
    print(f"case={name} len={len(data)} via={via} sct={sct} sc=0x{sc:02x} dnr={dnr}")


def flip(data, off):
    b = bytearray(data)
    b[off] ^= 0x5A
    return bytes(b)


rng = random.Random(port)
# what the device holds: three areas, written through pynvmeof's own
# write_data (in the capsule or by R2T)
small = rng.randbytes(4096)             # at LBA 16
mid = rng.randbytes(32 * 1024)          # at LBA 64
big = rng.randbytes(1024 * 1024)        # at LBA 2048: 16 chunks of 64 KiB
odd = rng.randbytes(200 * 1024)         # at LBA 8192: 3 chunks and 8 KiB
areas = ((16, small), (64, mid), (2048, big), (8192, odd))
for lba, data in areas:
    c.write_data(1, lba, data)

case("small-equal", 16, small)
case("small-differs", 16, flip(small, 1000))
case("mid-equal", 64, mid)
case("mid-differs", 64, flip(mid, len(mid) - 1))
case("big-equal", 2048, big)
case("big-differs-first-chunk", 2048, flip(big, 0))
case("big-differs-last-chunk", 2048, flip(big, len(big) - 1))
case("big-differs-chunk-edge", 2048, flip(big, 15 * 64 * 1024))
case("odd-equal", 8192, odd)
case("odd-differs-last-chunk", 8192, flip(odd, 3 * 64 * 1024 + 5))
# a Compare changes nothing: the equal ones still are, and reads agree
case("big-equal-again", 2048, big)
for lba, data in areas:
    assert c.read_data(1, lba, len(data) // lbs) == data, f"LBA {lba} changed"
print("unchanged")
c.disconnect()
