#!/usr/bin/env python3
"""Hold NBD connections that never finish the handshake.

Usage: nbd_stall.py HOST PORT SRC COUNT HOLD READY_FILE

Opens COUNT connections to HOST:PORT from the local address SRC (any
127.x.y.z works on Linux), reads the server greeting where one comes, and
then sends nothing more. A connection the server closes at once (no
greeting within 2 s) counts as refused. When all are open it writes
"accepted=A refused=R" to READY_FILE, then holds the connections for up to
HOLD seconds, stopping early once the server closed every accepted one.
Last line on stdout: "accepted=A refused=R closed=C after=S" where C is
how many accepted connections the server closed and S when the last one
went. Every loop is bounded in count and time.
"""
import select
import socket
import sys
import time

HOST, PORT, SRC = sys.argv[1], int(sys.argv[2]), sys.argv[3]
COUNT, HOLD, READY = int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
GREETING = 18


def open_one():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((SRC, 0))
    s.settimeout(5)
    s.connect((HOST, PORT))
    got = b""
    deadline = time.monotonic() + 2
    try:
        while len(got) < GREETING and time.monotonic() < deadline:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            c = s.recv(GREETING - len(got))
            if not c:
                break
            got += c
    except (socket.timeout, ConnectionResetError):
        pass
    if len(got) == GREETING:
        return s
    s.close()
    return None


held, refused = [], 0
for _ in range(COUNT):
    s = open_one()
    if s is None:
        refused += 1
    else:
        held.append(s)
with open(READY, "w") as f:
    f.write("accepted=%d refused=%d\n" % (len(held), refused))

start = time.monotonic()
open_socks = list(held)
closed, last = 0, 0.0
while open_socks and time.monotonic() - start < HOLD:
    r, _, _ = select.select(open_socks, [], [], 0.1)
    for s in r:
        try:
            data = s.recv(4096)
        except ConnectionResetError:
            data = b""
        if not data:
            closed += 1
            last = time.monotonic() - start
            open_socks.remove(s)
            s.close()
for s in open_socks:
    s.close()
print("accepted=%d refused=%d closed=%d after=%.1f" %
      (len(held), refused, closed, last), flush=True)
