#!/usr/bin/env python3
"""Raw iSCSI sessions against blkstackd for what libiscsi cannot be made to
do: two logins with the same InitiatorName and ISID (session
reinstatement), and bad PDUs on a logged-in session.

Usage: iscsi_raw.py HOST PORT TARGET

Checks, each with its own connections:
  reinstate  session A logs in with ISID X; session B logs in with ISID X
             and is admitted (even at max_sessions = 1); A's connection is
             closed by the target; B still answers a NOP-Out and logs
             out, which frees its place at once: the next login (badpdu,
             at max_sessions = 1) must not race the connection's close.
  badpdu     on a logged-in session: an unknown opcode gets Reject 05h, a
             SNACK Reject 03h, a Data-Out for no task with a TTT Reject
             09h, a NOP-Out echoes its data; then a data segment over the
             target's MaxRecvDataSegmentLength closes the connection.
Exit 0 when every check holds.
"""
import socket
import struct
import sys

HOST, PORT, TARGET = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAILED: " + what)


def pad(b):
    return b + b"\0" * (-len(b) % 4)


def pdu(op, flags, itt, data=b"", f20=0, f24=0, f28=0, f36=0, f40=0,
        imm=False, isid=b"\0" * 6):
    bhs = bytearray(48)
    bhs[0] = op | (0x40 if imm else 0)
    bhs[1] = flags
    bhs[5:8] = len(data).to_bytes(3, "big")
    bhs[8:14] = isid
    struct.pack_into(">IIIII", bhs, 16, itt, f20, f24, f28, 0)
    struct.pack_into(">II", bhs, 36, f36, f40)
    return bytes(bhs) + pad(data)


def recv_pdu(s):
    hdr = b""
    while len(hdr) < 48:
        chunk = s.recv(48 - len(hdr))
        if not chunk:
            return None
        hdr += chunk
    dsl = int.from_bytes(hdr[5:8], "big")
    need = dsl + (-dsl % 4) + hdr[4] * 4
    data = b""
    while len(data) < need:
        chunk = s.recv(need - len(data))
        if not chunk:
            return None
        data += chunk
    return hdr, data[:dsl]


def login(isid, name=b"iqn.2026-12.org.test:raw"):
    s = socket.create_connection((HOST, PORT), timeout=10)
    keys = (b"InitiatorName=" + name + b"\0SessionType=Normal\0"
            b"TargetName=" + TARGET + b"\0HeaderDigest=None\0"
            b"DataDigest=None\0MaxRecvDataSegmentLength=65536\0")
    # straight from the operational stage to full feature (no CHAP)
    s.sendall(pdu(0x03, 0x87, 1, keys, f24=1, imm=True, isid=isid))
    r = recv_pdu(s)
    check(r is not None and r[0][0] == 0x23, "login response")
    check(r is not None and r[0][36] == 0 and r[0][1] & 0x80,
          "login admitted (status %r)" % (r and r[0][36:38],))
    return s


def nop(s, itt, data=b"hello"):
    s.sendall(pdu(0x00, 0x80, itt, data, f20=0xffffffff, f24=2, imm=True))
    r = recv_pdu(s)
    return r is not None and r[0][0] == 0x20 and r[1] == data


def logout(s, itt):
    s.sendall(pdu(0x06, 0x80, itt, f24=2, imm=True))
    r = recv_pdu(s)
    return r is not None and r[0][0] == 0x26 and r[0][2] == 0


def closed(s):
    s.settimeout(5)
    try:
        while True:
            if not s.recv(4096):
                return True
    except (socket.timeout, ConnectionResetError):
        return False
    except OSError:
        return True


def reinstate():
    isid = bytes([0x80, 0x12, 0x34, 0x56, 0x78, 0x9a])
    a = login(isid)
    check(nop(a, 10), "session A answers a NOP-Out")
    b = login(isid)
    check(closed(a), "session A closed when B reinstated it")
    check(nop(b, 11), "session B answers a NOP-Out")
    check(logout(b, 12), "session B logs out")
    b.close()


def reject_reason(s, bhs_bytes):
    s.sendall(bhs_bytes)
    r = recv_pdu(s)
    if r is None or r[0][0] != 0x3f:
        return None
    return r[0][2]


def badpdu():
    s = login(bytes([0x80, 1, 2, 3, 4, 5]))
    check(reject_reason(s, pdu(0x1c, 0x80, 20)) == 0x05,
          "unknown opcode: Reject 05h")
    check(reject_reason(s, pdu(0x10, 0x80, 21)) == 0x03,
          "SNACK: Reject 03h")
    check(reject_reason(s, pdu(0x05, 0x80, 22, b"x" * 8,
                               f20=0x1234)) == 0x09,
          "Data-Out for no task: Reject 09h")
    check(nop(s, 23, b"ping-data"), "NOP-Out echoed")
    big = pdu(0x00, 0x80, 24, b"", f20=0xffffffff, imm=True)
    big = big[:5] + (1 << 20).to_bytes(3, "big") + big[8:]
    s.sendall(big)
    check(closed(s), "a data segment over MaxRecvDataSegmentLength "
          "closes the connection")


for name in sys.argv[4:] or ["reinstate", "badpdu"]:
    globals()[name]()
sys.exit(1 if failures else 0)
