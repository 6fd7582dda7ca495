#!/usr/bin/env python3
"""Write the seed corpus of fuzz_scsi_cdb (corpus/scsi_cdb): a config byte,
then records (selector, CDB length, CDB, 2-byte Data-Out length, Data-Out,
Data-In maximum in 512-byte units); see tests/fuzz/fuzz_scsi_cdb.c.
Run from the repository root:
    python3 tests/fuzz/mkcorpus_scsi.py
"""
import os
import struct

OUT = os.path.join(os.path.dirname(__file__), "corpus", "scsi_cdb")


def rec(cdb, dout=b"", din=16, nexus=0, lun=0):
    return (bytes([nexus | lun << 1, len(cdb)]) + cdb +
            struct.pack(">H", len(dout)) + dout + bytes([din]))


def event(kind, nexus=0):
    return bytes([0xe0 | kind << 1 | nexus])


def cdb16(op, lba, n, b1=0):
    return struct.pack(">BBQIBB", op, b1, lba, n, 0, 0)


def cdb10(op, lba, n, b1=0):
    return struct.pack(">BBIBHB", op, b1, lba, 0, n, 0)


TUR = bytes(6)
INQ = bytes([0x12, 0, 0, 0, 255, 0])
SEEDS = {
    "inquiry": [rec(INQ), rec(bytes([0x12, 1, 0xb0, 0, 255, 0])),
                rec(bytes([0x12, 1, 0xb2, 0, 255, 0])),
                rec(bytes([0x12, 1, 0x83, 0, 255, 0]), lun=2)],
    "rw": [rec(TUR), rec(cdb10(0x2a, 8, 2), b"\x5a" * 1024),
           rec(cdb10(0x28, 8, 2)), rec(cdb16(0x88, 0, 1)),
           rec(bytes([0x08, 0, 0, 0, 0, 0]), din=255)],
    "zero": [rec(TUR), rec(cdb16(0x93, 0, 64, 0x09)),
             rec(cdb16(0x93, 0, 0, 0x08), bytes(512)),
             rec(cdb10(0x41, 4, 8), b"\x01" * 512),
             rec(bytes([0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0]),
                 struct.pack(">HHI", 22, 16, 0) +
                 struct.pack(">QII", 0, 16, 0)),
             rec(bytes([0x9e, 0x12]) + bytes(8) + struct.pack(">I", 4096) +
                 bytes(2))],
    "pr": [rec(TUR), rec(TUR, nexus=1),
           rec(bytes([0x5f, 0, 0, 0, 0, 0, 0, 0, 24, 0]),
               struct.pack(">QQ", 0, 7) + bytes(8)),
           rec(bytes([0x5f, 1, 1, 0, 0, 0, 0, 0, 24, 0]),
               struct.pack(">QQ", 7, 0) + bytes(8)),
           rec(cdb10(0x2a, 0, 1), bytes(512), nexus=1),
           rec(bytes([0x5e, 0, 0, 0, 0, 0, 0, 0, 255, 0])),
           rec(bytes([0x16, 0, 0, 0, 0, 0]), nexus=1)],
    "mode": [rec(TUR), rec(bytes([0x1a, 0, 0x3f, 0, 255, 0])),
             rec(bytes([0x15, 0x10, 0, 0, 16, 0]),
                 bytes(4) + bytes([0x0a, 0x0a, 0x04, 0x10]) + bytes(8)),
             rec(bytes([0x02]) + bytes(5)),
             rec(bytes([0x5a, 0x10, 0x08, 0, 0, 0, 0, 0, 255, 0]))],
    "caw": [rec(TUR), rec(struct.pack(">BBQIBBBB", 0x89, 0, 3, 0, 0, 1, 0, 0),
                          bytes(1024))],
    "xcopy": [rec(TUR), rec(bytes([0x12, 1, 0x83, 0, 255, 0])),
              rec(bytes([0x83, 0]) + bytes(8) + struct.pack(">I", 16 + 32 + 28) +
                  bytes(2),
                  bytes([1, 0]) + struct.pack(">H", 32) + bytes(4) +
                  struct.pack(">II", 28, 0) +
                  bytes([0xe4, 0, 0, 0, 0x01, 0x03, 0, 8]) + bytes(8) +
                  bytes(13) + bytes([0, 2, 0]) +
                  bytes([0x02, 0]) + struct.pack(">HHHHHQQ", 24, 0, 0, 0, 8,
                                                 0, 64)),
              rec(bytes([0x84, 0, 1]) + bytes(7) + struct.pack(">I", 255) +
                  bytes(2)),
              rec(bytes([0x84, 3]) + bytes(8) + struct.pack(">I", 255) +
                  bytes(2))],
    "orwrite": [rec(TUR), rec(cdb16(0x8b, 2, 1), b"\x0f" * 512),
                rec(bytes([0x37, 0, 0x18, 0, 0, 0, 0, 0, 32, 0]))],
    "events": [rec(TUR), event(2), rec(TUR), event(0, 1), rec(TUR, nexus=1),
               rec(bytes([0xa3, 0x0c, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0]))],
}

os.makedirs(OUT, exist_ok=True)
for name, recs in SEEDS.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(bytes([0]) + b"".join(recs))
with open(os.path.join(OUT, "ro_4k"), "wb") as f:
    f.write(bytes([0x07]) + b"".join(SEEDS["zero"]))
