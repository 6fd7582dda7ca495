#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A small NVMe/TCP target over one file, for testing blkstack's nvmf host
driver where blkstack's own target is not what is under test (several
paths to one namespace, a path killed and restored, a path whose namespace
lacks DEAC). One process = one listener = one controller per connection
association. Not a conformance target: only what the host driver uses.

  nvmf_mini_target.py --port P --file F --nqn NQN [--dlfeat 9] [--nguid HEX]
      [--pidfile F]
SIGUSR1 toggles DLFEAT between its value and 0 and sends a Namespace
Attribute Changed event to every host that has an event request posted.
"""
import argparse, os, signal, socket, struct, threading

p = argparse.ArgumentParser()
p.add_argument('--port', type=int, required=True)
p.add_argument('--file', required=True)
p.add_argument('--nqn', required=True)
p.add_argument('--dlfeat', type=int, default=9)
p.add_argument('--nguid', default='00112233445566778899aabbccddeeff')
p.add_argument('--maxh2c', type=int, default=32768)
p.add_argument('--pidfile')
a = p.parse_args()

LBS = 512
fd = os.open(a.file, os.O_RDWR)
state = {'dlfeat': a.dlfeat, 'orig': a.dlfeat, 'cntlid': 1}
lock = threading.Lock()
aers = []          # (conn, cid) waiting


def nsze():
    return os.fstat(fd).st_size // LBS


def pdu(t, flags, hdr, data=b''):
    hlen = 8 + len(hdr)
    pdo = hlen if data else 0
    return struct.pack('<BBBBI', t, flags, hlen, pdo, hlen + len(data)) + hdr + data


class Conn:
    def __init__(self, s):
        self.s = s
        self.wl = threading.Lock()
        self.qid = None
        self.pending = {}

    def send(self, b):
        with self.wl:
            self.s.sendall(b)

    def recvn(self, n):
        b = b''
        while len(b) < n:
            c = self.s.recv(n - len(b))
            if not c:
                raise EOFError
            b += c
        return b

    def resp(self, cid, status=0, dw0=0, dw1=0):
        cqe = struct.pack('<IIHHHH', dw0, dw1, 0, self.qid or 0, cid, status << 1)
        self.send(pdu(0x05, 0, cqe))

    def c2h(self, cid, data, success):
        hdr = struct.pack('<HHIII', cid, 0, 0, len(data), 0)
        self.send(pdu(0x07, 0x04 | (0x08 if success else 0), hdr, data))

    def want_data(self, cid, length, then):
        """R2T for the whole data; @then(data) runs when it has come."""
        self.pending[cid] = [bytearray(length), 0, then]
        self.send(pdu(0x09, 0, struct.pack('<HHIII', cid, cid, 0, length, 0)))

    def h2c(self, rest, pdo):
        c, tt, off, dl, _ = struct.unpack('<HHIII', rest[:16])
        w = self.pending[tt]
        w[0][off:off + dl] = rest[pdo - 8:pdo - 8 + dl]
        w[1] += dl
        if w[1] == len(w[0]):
            del self.pending[tt]
            w[2](bytes(w[0]))

    def run(self):
        ch = self.recvn(8)
        t, fl, hlen, pdo, plen = struct.unpack('<BBBBI', ch)
        self.recvn(plen - 8)
        icresp = struct.pack('<HBBI', 0, 0, 0, a.maxh2c) + bytes(128 - 16)
        self.send(pdu(0x01, 0, icresp))
        while True:
            ch = self.recvn(8)
            t, fl, hlen, pdo, plen = struct.unpack('<BBBBI', ch)
            rest = self.recvn(plen - 8)
            if t == 0x06:
                self.h2c(rest, pdo)
                continue
            if t != 0x04:
                return
            sqe = rest[:64]
            data = rest[pdo - 8:] if pdo else b''
            self.cmd(sqe, data)

    def cmd(self, sqe, icd):
        opc = sqe[0]
        cid, nsid = struct.unpack_from('<HI', sqe, 2)
        dlen = struct.unpack_from('<I', sqe, 32)[0]
        sgl_type = sqe[39]
        c10, c11, c12 = struct.unpack_from('<III', sqe, 40)
        if opc == 0x7f:
            fct = sqe[4]
            if fct == 0x01:
                self.qid = struct.unpack_from('<H', sqe, 42)[0]
                with lock:
                    cntlid = state['cntlid']
                    state['cntlid'] += 1
                return self.resp(cid, 0, cntlid)
            if fct == 0x04:
                off = struct.unpack_from('<I', sqe, 44)[0]
                v = {0: (1023 | 1 << 16 | 20 << 24 | 1 << 37), 0x08: 0x10400,
                     0x14: 0x460001, 0x1c: 1}.get(off, 0)
                return self.resp(cid, 0, v & 0xffffffff, v >> 32)
            return self.resp(cid, 0)
        if self.qid == 0:
            return self.admin(opc, cid, nsid, c10, c11)
        return self.io(opc, cid, nsid, c10, c11, c12, dlen, sgl_type, icd)

    def admin(self, opc, cid, nsid, c10, c11):
        if opc == 0x06:
            cns = c10 & 0xff
            d = bytearray(4096)
            if cns == 1:
                d[76] = 2                               # CMIC multi-ctrl
                d[77] = 5                               # MDTS 128 KiB
                struct.pack_into('<I', d, 92, 1 << 8)  # OAES ns attr
                struct.pack_into('<H', d, 520, 0x0c)   # ONCS DSM+WZ
                d[525] = 1
                struct.pack_into('<I', d, 516, 1)
                n = a.nqn.encode()
                d[768:768 + len(n)] = n
                struct.pack_into('<I', d, 1792, (8192 + 64) // 16)
            elif cns == 0 and nsid == 1:
                s = nsze()
                struct.pack_into('<QQQ', d, 0, s, s, s)
                d[30] = 1
                d[33] = state['dlfeat']
                d[104:120] = bytes.fromhex(a.nguid)
                d[128 + 2] = 9
            elif cns == 3 and nsid == 1:
                d[0] = 2
                d[1] = 16
                d[4:20] = bytes.fromhex(a.nguid)
            elif cns == 0:
                pass
            else:
                return self.resp(cid, 0x02)
            self.c2h(cid, bytes(d), True)
            return
        if opc == 0x0c:
            with lock:
                aers.append((self, cid))
            return
        if opc == 0x09 and (c10 & 0xff) == 7:
            return self.resp(cid, 0, c11)
        if opc == 0x02:
            self.c2h(cid, bytes(((c10 >> 16) + 1) * 4), True)
            return
        return self.resp(cid, 0)

    def io(self, opc, cid, nsid, c10, c11, c12, dlen, sgl_type, icd):
        slba = c10 | c11 << 32
        nlb = (c12 & 0xffff) + 1
        if opc == 0x02:
            data = os.pread(fd, nlb * LBS, slba * LBS)
            # both ways of ending a read: SUCCESS flag, or a response
            if cid % 2:
                self.c2h(cid, data, False)
                return self.resp(cid, 0)
            return self.c2h(cid, data, True)
        if opc == 0x01:
            def write(data):
                os.pwrite(fd, data, slba * LBS)
                self.resp(cid, 0)
            if sgl_type == 0x01:
                return write(icd[:dlen])
            return self.want_data(cid, dlen, write)
        if opc == 0x00:
            os.fsync(fd)
            return self.resp(cid, 0)
        if opc == 0x08:
            mode = 0x02 | 0x01 if (c12 & (1 << 25)) and state['dlfeat'] == 9 else 0x10
            try:
                libc_fallocate(fd, mode, slba * LBS, nlb * LBS)
            except OSError:
                os.pwrite(fd, bytes(nlb * LBS), slba * LBS)
            return self.resp(cid, 0)
        if opc == 0x09:
            def dsm(data):
                for i in range((c10 & 0xff) + 1):
                    _, n, lba = struct.unpack_from('<IIQ', data, 16 * i)
                    try:
                        libc_fallocate(fd, 0x03, lba * LBS, n * LBS)
                    except OSError:
                        pass
                self.resp(cid, 0)
            if sgl_type == 0x01:
                return dsm(icd[:dlen])
            return self.want_data(cid, dlen, dsm)
        return self.resp(cid, 0x01)


import ctypes
_libc = ctypes.CDLL(None, use_errno=True)


def libc_fallocate(f, mode, off, ln):
    if _libc.fallocate(f, mode, ctypes.c_long(off), ctypes.c_long(ln)):
        raise OSError(ctypes.get_errno(), 'fallocate')


def toggle(sig, frm):
    with lock:
        state['dlfeat'] = 0 if state['dlfeat'] else state['orig']
        pend = list(aers)
        aers.clear()
    for c, cid in pend:
        try:
            c.resp(cid, 0, 0x02 | 0x00 << 8 | 0x04 << 16)
        except OSError:
            pass


def serve(s):
    c = Conn(s)
    try:
        c.run()
    except (EOFError, OSError, AssertionError):
        pass
    with lock:
        aers[:] = [x for x in aers if x[0] is not c]
    s.close()


signal.signal(signal.SIGUSR1, toggle)
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(('127.0.0.1', a.port))
ls.listen(16)
if a.pidfile:
    with open(a.pidfile, 'w') as f:
        f.write(str(os.getpid()))
while True:
    s, _ = ls.accept()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=serve, args=(s,), daemon=True).start()
