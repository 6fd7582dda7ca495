#!/usr/bin/env python3
"""Write the seed corpus of fuzz_iscsi_pdu (corpus/iscsi_pdu): config byte,
feed granularity byte, then the initiator's bytes (see the comment at the
top of tests/fuzz/fuzz_iscsi_pdu.c). Seeds are valid sessions (full
logins, CHAP, discovery, commands with immediate data, unsolicited and
R2T'd Data-Out, task management, logout) and a few invalid streams.
Run from the repository root:
    python3 tests/fuzz/mkcorpus_iscsi.py
"""
import hashlib
import os
import struct

OUT = os.path.join(os.path.dirname(__file__), "corpus", "iscsi_pdu")
TGT = b"iqn.2026-12.org.blkstack:fuzz"
LOGIN, TEXT, CMD, DOUT, NOP, TMF, LOGOUT, SNACK = 3, 4, 1, 5, 0, 2, 6, 0x10


def pad(b):
    return b + b"\0" * (-len(b) % 4)


def pdu(op, flags, itt, data=b"", lun=0, f20=0, f24=0, f28=0, f32=b"",
        imm=False, ahs=b""):
    bhs = bytearray(48)
    bhs[0] = op | (0x40 if imm else 0)
    bhs[1] = flags
    bhs[4] = len(ahs) // 4
    bhs[5:8] = len(data).to_bytes(3, "big")
    bhs[8:16] = struct.pack(">Q", lun << 48)
    bhs[16:20] = struct.pack(">I", itt)
    bhs[20:24] = struct.pack(">I", f20)
    bhs[24:28] = struct.pack(">I", f24)
    bhs[28:32] = struct.pack(">I", f28)
    bhs[32:32 + len(f32)] = f32
    return bytes(bhs) + ahs + pad(data)


def keys(*kv):
    return b"".join(k + b"=" + v + b"\0" for k, v in kv)


def login(flags, data, cmdsn=1, itt=1):
    p = bytearray(pdu(LOGIN, flags, itt, data, f24=cmdsn, imm=True))
    p[8] = 0x40
    return bytes(p)


SEC = keys((b"InitiatorName", b"iqn.fuzz"), (b"SessionType", b"Normal"),
           (b"TargetName", TGT), (b"AuthMethod", b"None"))
OPS = keys((b"HeaderDigest", b"None"), (b"DataDigest", b"None"),
           (b"MaxRecvDataSegmentLength", b"8192"),
           (b"MaxBurstLength", b"65536"), (b"FirstBurstLength", b"8192"),
           (b"ImmediateData", b"Yes"), (b"InitialR2T", b"No"),
           (b"MaxOutstandingR2T", b"2"))
FULL_LOGIN = login(0x81, SEC) + login(0x87, OPS)


def cmd(itt, sn, cdb, edtl=0, read=False, write=False, data=b"", final=True,
        lun=0):
    flags = (0x80 if final else 0) | (0x40 if read else 0) | \
        (0x20 if write else 0) | 1
    return pdu(CMD, flags, itt, data, lun=lun, f20=edtl, f24=sn, f28=1,
               f32=cdb.ljust(16, b"\0"))


def cdb10(op, lba, n, b1=0):
    return bytes([op, b1]) + struct.pack(">IBHB", lba, 0, n, 0)


def dout(itt, ttt, datasn, off, data, final=True):
    p = bytearray(pdu(DOUT, 0x80 if final else 0, itt, data, f20=ttt))
    p[36:40] = struct.pack(">I", datasn)
    p[40:44] = struct.pack(">I", off)
    return bytes(p[:48]) + pad(data)


def ffp_stream():
    s = b""
    s += cmd(0x10, 1, b"\x00")                                 # TUR
    s += cmd(0x11, 2, b"\x12\x00\x00\x00\xff\x00", 255, read=True)
    s += cmd(0x12, 3, b"\x12\x01\xb2\x00\xff\x00", 255, read=True)
    s += cmd(0x13, 4, b"\x9e\x10" + b"\0" * 8 + b"\0\0\0\x20\0\0", 32,
             read=True)                                        # RC16
    s += cmd(0x14, 5, cdb10(0x2a, 0, 1), 512, write=True,
             data=b"\xab" * 512)                               # imm data
    s += cmd(0x15, 6, cdb10(0x2a, 8, 32), 16384, write=True,
             data=b"\x01" * 4096, final=False)                 # unsolicited
    s += dout(0x15, 0xffffffff, 0, 4096, b"\x02" * 4096)
    s += cmd(0x16, 7, cdb10(0x28, 0, 8), 4096, read=True)
    s += cmd(0x17, 8, cdb10(0x41, 0, 16, 0x08), 512, write=True,
             data=b"\0" * 512)                                 # WS10 unmap
    s += pdu(NOP, 0x80, 0x18, b"ping", f20=0xffffffff, f24=9, imm=True)
    s += pdu(TEXT, 0x80, 0x19, keys((b"SendTargets", b"All")),
             f20=0xffffffff, f24=9)
    s += pdu(TMF, 0x81, 0x1a, f20=0x15, f24=10, imm=True)      # abort
    s += pdu(TMF, 0x85, 0x1b, f24=10, imm=True)                # LU reset
    s += pdu(LOGOUT, 0x80, 0x1c, f24=10, imm=True)
    return s


def write_seed(name, cfg, gran, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(bytes([cfg, gran]) + data)


def main():
    os.makedirs(OUT, exist_ok=True)
    write_seed("full_session", 0x00, 255, FULL_LOGIN + ffp_stream())
    write_seed("full_session_bytewise", 0x00, 0, FULL_LOGIN + ffp_stream())
    write_seed("canned_login_ffp", 0x02, 255, ffp_stream())
    write_seed("canned_login_digests", 0x06, 255, b"")
    write_seed("canned_4k_lazy", 0x4a, 3, ffp_stream())
    write_seed("discovery", 0x00, 255,
               login(0x87, keys((b"InitiatorName", b"iqn.fuzz"),
                                (b"SessionType", b"Discovery"))) +
               pdu(TEXT, 0x80, 2, keys((b"SendTargets", b"All")),
                   f20=0xffffffff, f24=1) +
               pdu(LOGOUT, 0x80, 3, f24=2, imm=True))
    # CHAP: the fuzzer's challenge is bytes 1..16 after CHAP_I=0
    chal = bytes(range(1, 17))
    r = hashlib.md5(b"\0" + b"fuzz-secret-12" + chal).hexdigest()
    mr = keys((b"CHAP_N", b"u"), (b"CHAP_R", b"0x" + r.encode()),
              (b"CHAP_I", b"7"), (b"CHAP_C", b"0x0badc0de"))
    chap = login(0x01, keys((b"InitiatorName", b"iqn.fuzz"),
                            (b"TargetName", TGT),
                            (b"AuthMethod", b"CHAP,None"))) + \
        login(0x01, keys((b"CHAP_A", b"5"))) + login(0x81, mr) + \
        login(0x87, OPS)
    write_seed("chap_mutual", 0x01, 255, chap + ffp_stream())
    write_seed("garbage_before_login", 0x00, 255,
               cmd(1, 1, b"\x00") + FULL_LOGIN)
    write_seed("bad_pdus", 0x02, 255,
               pdu(0x1c, 0x80, 5) + pdu(SNACK, 0x80, 6) +
               dout(0x99, 0x1234, 0, 0, b"x" * 8) +
               cmd(0x20, 1, cdb10(0x2a, 0, 1), 512, write=True,
                   data=b"y" * 1024) +
               pdu(CMD, 0x81, 0x21, ahs=b"\x00\x05\x01\x00" + b"\0" * 4,
                   f24=2))


if __name__ == "__main__":
    main()
