"""NVMe/TCP PDUs for the raw-socket tests (nvmf_burst.py, nvmf_stuck.py).

Only what they need: the ICReq, a Connect (admin queue, a 1 KiB
in-capsule data block) and CC.EN = 1, capsules of a 64-byte SQE, and
whole PDUs read back. No digests.
"""
import struct


def recv_into(s, view):
    got = 0
    while got < len(view):
        n = s.recv_into(view[got:])
        if not n:
            raise EOFError("closed")
        got += n


def recv_pdu(s):
    """(type, whole PDU) of the next PDU on @s."""
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
    """An SQE; @rest goes from byte 40 (after DPTR) on."""
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
    """The status field of a response capsule PDU (no phase bit)."""
    return struct.unpack_from("<H", p, 8 + 14)[0] >> 1


def admin_queue(s, subnqn, hostnqn, kato_ms=0):
    """ICReq, Connect of an admin queue to @subnqn, CC.EN = 1."""
    s.sendall(struct.pack("<BBBBIHBBI", 0, 0, 128, 0, 128, 0, 0, 0, 0) +
              bytes(112))
    t, _ = recv_pdu(s)
    assert t == 1, f"no ICResp: type {t}"
    data = bytearray(1024)
    struct.pack_into("<H", data, 16, 0xFFFF)
    data[256:256 + len(subnqn)] = subnqn.encode()
    data[512:512 + len(hostnqn)] = hostnqn.encode()
    s.sendall(capsule(sqe(0x7F, 1, fctype=1, sgl_len=1024, sgl_type=0x01,
                          rest=struct.pack("<HHHBBI", 0, 0, 31, 0, 0,
                                           kato_ms)),
                      bytes(data)))
    t, p = recv_pdu(s)
    assert t == 5 and status(p) == 0, f"connect failed: {status(p):#x}"
    s.sendall(capsule(sqe(0x7F, 2, fctype=0,
                          rest=struct.pack("<BxxxIQ", 0, 0x14, 0x460001))))
    t, p = recv_pdu(s)
    assert t == 5 and status(p) == 0, "CC.EN failed"
