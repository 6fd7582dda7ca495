#!/usr/bin/env python3
"""Seeds for fuzz_nfs_rpc: record-marked RPC calls (NULL, a 4.0 COMPOUND
walking the namespace, a 4.1 EXCHANGE_ID + CREATE_SESSION + SEQUENCE
session doing OPEN/WRITE/READ/CLOSE, refusals), written from the RFCs'
layouts by hand. Usage: mkcorpus_nfs.py DIR"""
import hashlib, os, struct, sys

def u32(v): return struct.pack('>I', v & 0xffffffff)
def u64(v): return struct.pack('>Q', v)
def opaque(b): return u32(len(b)) + b + b'\0' * (-len(b) % 4)

def call(xid, proc, args, prog=100003, vers=4):
    cred = u32(1) + opaque(u32(0) + opaque(b'fuzz') + u32(0) + u32(0) + u32(0))
    body = u32(xid) + u32(0) + u32(2) + u32(prog) + u32(vers) + u32(proc)
    body += cred + u32(0) + u32(0) + args
    return u32(0x80000000 | len(body)) + body

def compound(minor, ops):
    return opaque(b'') + u32(minor) + u32(len(ops)) + b''.join(ops)

def op(n, args=b''): return u32(n) + args

SID = b'\0' * 16  # a guess: the fuzzer finds real session ids by mutation
chan = (u32(0) + u32(65536) + u32(65536) + u32(4096) + u32(8) + u32(4) + u32(0))
seq = lambda s: op(53, SID + u32(s) + u32(0) + u32(0) + u32(1))
stateid0 = u32(0) + b'\0' * 12
seeds = {
    'null': call(1, 0, b''),
    'badprog': call(2, 0, b'', prog=100005),
    'badvers': call(3, 0, b'', vers=3),
    'v40-walk': call(4, 1, compound(0, [op(24), op(10), op(9, u32(2) + u32(0x0010011a) + u32(0x00b0a23a)),
                                        op(26, u64(0) + b'\0' * 8 + u32(4096) + u32(8192) + u32(1) + u32(2)),
                                        op(15, opaque(b'nope')), op(16)])),
    'illegal': call(5, 1, compound(0, [op(24), op(2), op(10044)])),
    'minor3': call(6, 1, compound(3, [op(24)])),
    'v41-session': (call(7, 1, compound(1, [op(42, b'verifier' + opaque(b'fuzz-client') + u32(0) + u32(0) + u32(0))]))
                    + call(8, 1, compound(1, [op(43, u64(0x200000001) + u32(1) + u32(0) + chan + chan + u32(0x40000000) + u32(0))]))
                    + call(9, 1, compound(1, [seq(1), op(24), op(18, u32(0) + u32(3) + u32(0) + u64(0) + opaque(b'owner')
                                                         + u32(1) + u32(0) + u32(0) + opaque(b'') + u32(0) + opaque(b'f')),
                                              op(38, stateid0 + u64(0) + u32(2) + opaque(b'hello')),
                                              op(25, stateid0 + u64(0) + u32(5)), op(4, u32(0) + stateid0)]))),
    'fragments': (lambda c: u32(10) + c[4:14] + u32(0x80000000 | (len(c) - 14)) + c[14:])(call(10, 0, b'')),
}
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    data = bytes([0]) + data
    with open(os.path.join(out, '%s-%s' % (name, hashlib.sha1(data).hexdigest()[:12])), 'wb') as f:
        f.write(data)
