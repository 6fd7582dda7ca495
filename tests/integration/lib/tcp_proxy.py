#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A TCP forwarder for tests: listens on 127.0.0.1:LISTEN and connects
each client to 127.0.0.1:TARGET, copying bytes both ways. Killing the
process drops the listener and every connection through it, which to a
client looks like one listener (one path) of the target going away.

  tcp_proxy.py LISTEN_PORT TARGET_PORT
"""
import socket, sys, threading

lp, tp = int(sys.argv[1]), int(sys.argv[2])


def pump(a, b):
    try:
        while True:
            d = a.recv(1 << 16)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(('127.0.0.1', lp))
ls.listen(32)
while True:
    c, _ = ls.accept()
    try:
        t = socket.create_connection(('127.0.0.1', tp))
    except OSError:
        c.close()
        continue
    for s in (c, t):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=pump, args=(c, t), daemon=True).start()
    threading.Thread(target=pump, args=(t, c), daemon=True).start()
