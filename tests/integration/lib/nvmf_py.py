#!/usr/bin/env python3
"""pynvmeof steps for tests/integration/nvmf_*.sh (a peer we did not write).

  nvmf_py.py PORT NQN identify          print "dlfeat= nmic= nguid= eui64= cmic= oncs="
  nvmf_py.py PORT NQN rw                write/read patterns, byte-exact (in-capsule and R2T)
  nvmf_py.py PORT NQN ids               print "nsids=[..]" (Identify CNS 02h) and, from
                                        each one's identification descriptors (CNS 03h),
                                        "ns=N nidt=[types] uuid=U version=V"
  nvmf_py.py PORT NQN aen CTL DEV       hold an AER, run `blkstack -s CTL attr DEV
                                        queue/write_zeroes_unmap 0`, expect a Namespace
                                        Attribute Changed event, the changed-namespace log
                                        [1], and print the new dlfeat
  nvmf_py.py PORT - discover            print one "subnqn traddr trsvcid portid" per entry
  nvmf_py.py PORT NQN badhost HOSTNQN   connect as HOSTNQN, print "refused status=0xSS"
  nvmf_py.py PORT NQN disconnect        send a Fabrics Disconnect (raw capsule) on the admin
                                        queue, print "status=N" and "eof" when the target closes
  nvmf_py.py PORT NQN kato MS           connect with KATO MS, send nothing, and print
                                        "closed after N s" once the target drops the queue
  nvmf_py.py PORT NQN ana               print "cmic= anacap= anatt= anagrpmax= nanagrpid=
                                        anagrpid= chgcnt= group=G state=NAME nsids=[..]"
                                        from Identify and the ANA log page, then
                                        "read ok" or "read status=0xSSS" for one Read
"""
import os
import struct
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.environ.get("PYNVMEOF", "/work/shared/peers/pynvmeof") + "/src")
from nvmeof_client import NVMeoFClient  # noqa: E402
from nvmeof_client.exceptions import CommandError  # noqa: E402
from nvmeof_client.parsers import ResponseParser  # noqa: E402
from nvmeof_client.protocol import (PDUFlags, PDUType,  # noqa: E402
                                    pack_identify_command)

port, nqn, step = int(sys.argv[1]), sys.argv[2], sys.argv[3]
if step == "discover":
    c = NVMeoFClient("127.0.0.1", None, port=port, timeout=10)
    c.connect()
    for e in c.discover_subsystems():
        print(" ".join(str(e.get(k, "?")).strip() for k in
                       ("subsystem_nqn", "transport_address", "transport_service_id", "port_id")))
    c.disconnect()
    sys.exit(0)
if step == "badhost":
    c = NVMeoFClient("127.0.0.1", nqn, port=port, timeout=10, host_nqn=sys.argv[4])
    try:
        c.connect()
    except Exception as e:  # connect() wraps the CommandError
        while e is not None and not isinstance(e, CommandError):
            e = e.__cause__ or e.__context__
        if e is None:
            raise
        print(f"refused status=0x{int(e.status_code):x}")
        sys.exit(0)
    sys.exit("connect was accepted")
if step == "kato":
    c = NVMeoFClient("127.0.0.1", nqn, port=port, timeout=10, kato=int(sys.argv[4]))
    c.connect()
    t0 = time.time()
    sock = c._socket
    sock.settimeout(0.5)
    while time.time() - t0 < 20:
        try:
            if sock.recv(4096) == b"":
                break
        except TimeoutError:
            continue
        except OSError:
            break
    print(f"closed after {time.time() - t0:.0f} s")
    sys.exit(0)
c = NVMeoFClient("127.0.0.1", nqn, port=port, timeout=10)
c.connect()
if step == "disconnect":
    # CapsuleCmd PDU: type 4, no digests, HLEN 72, PDO 0, PLEN 72; SQE:
    # opcode 7Fh (Fabrics), CID 0x4242, FCTYPE 08h (Disconnect) at byte 4,
    # an SGL data block of length 0 (transport data block, type 5Ah)
    sqe = bytearray(64)
    sqe[0] = 0x7F
    sqe[1] = 0x40  # PSDT: SGL
    struct.pack_into("<H", sqe, 2, 0x4242)
    sqe[4] = 0x08
    sqe[39] = 0x5A
    pdu = bytes([4, 0, 72, 0]) + struct.pack("<I", 72) + bytes(sqe)
    sock = c._socket
    sock.settimeout(5)
    sock.sendall(pdu)
    rsp = b""
    while len(rsp) < 24:
        chunk = sock.recv(24 - len(rsp))
        if not chunk:
            sys.exit("closed before the Disconnect response")
        rsp += chunk
    cid, status = struct.unpack_from("<HH", rsp, 20)
    assert rsp[0] == 5 and cid == 0x4242, f"not our response: {rsp.hex()}"
    print(f"status={status >> 1}")
    try:
        print("eof" if sock.recv(1) == b"" else "more data")
    except OSError as e:
        print(f"recv: {e}")
    sys.exit(0)


def ident():
    ns = c.identify_namespace(1)
    ic = c.identify_controller()
    return ns, ic


if step == "identify":
    ns, ic = ident()
    print(f"dlfeat={ns['dlfeat']} nmic={ns['nmic']} nguid={ns['nguid']} "
          f"eui64={ns['eui64']} cmic={ic['cmic']} ioccsz={ic['ioccsz']} "
          f"oncs={ic['oncs']}")
elif step == "rw":
    c.setup_io_queues()
    small = bytes((i * 7 + 1) & 0xff for i in range(4096))
    c.write_data(1, 16, small)
    assert c.read_data(1, 16, 8) == small, "4 KiB in-capsule write read back differs"
    big = bytes((i * 13 + 5) & 0xff for i in range(256 * 1024))
    c.write_data(1, 1024, big)
    assert c.read_data(1, 1024, 512) == big, "256 KiB R2T write read back differs"
    # the neighbours are untouched
    assert c.read_data(1, 15, 1) == bytes(512)
    assert c.read_data(1, 1024 + 512, 1) == bytes(512)
    print("rw ok")
elif step == "ids":
    nsids = c.list_namespaces()
    print(f"nsids={nsids}")
    for nsid in nsids:
        # pynvmeof reads no descriptor list: its Identify capsule, CNS 03h
        cid = c._get_next_command_id()
        c._send_admin_command_pdu(pack_identify_command(cid, 0x03, nsid))
        data, status = b"", None
        while status is None:
            h, d = c._receive_pdu()
            if h.pdu_type == PDUType.C2H_DATA:
                data += d
                if h.flags & PDUFlags.SCSS:
                    status = 0
            elif h.pdu_type == PDUType.RSP:
                status = ResponseParser.parse_response(d, cid)["status"]
            else:
                sys.exit(f"unexpected PDU type {h.pdu_type}")
        assert status == 0, f"CNS 03h status 0x{status:x}"
        # descriptors: type, length, 2 reserved, the value; length 0 ends
        ids, off = {}, 0
        while off + 4 <= len(data) and data[off + 1]:
            ids[data[off]] = data[off + 4:off + 4 + data[off + 1]]
            off += 4 + data[off + 1]
        u = uuid.UUID(bytes=bytes(ids[3]))
        print(f"ns={nsid} nidt={sorted(ids)} uuid={u} version={u.version}")
elif step == "aen":
    ctl, dev = sys.argv[4], sys.argv[5]
    bs = os.environ["BUILD"] + "/blkstack"
    c.enable_async_events()
    c.request_async_events(1)
    subprocess.run([bs, "-s", ctl, "attr", dev, "queue/write_zeroes_unmap", "0"],
                   check=True, stdout=subprocess.DEVNULL)
    events = []
    deadline = time.time() + 5
    while not events and time.time() < deadline:
        events = c.poll_async_events(timeout=0.5)
    assert events, "no asynchronous event within 5 s"
    ev = events[0]
    print(f"event type={int(ev.event_type)} info={int(ev.event_info)} "
          f"log={int(ev.log_page_id)}")
    changed = c.get_changed_namespace_list()
    print(f"changed={changed}")
    ns, _ = ident()
    print(f"dlfeat={ns['dlfeat']}")
elif step == "ana":
    ns, ic = ident()
    log = c.get_ana_log_page()
    print(f"cmic={ic['cmic']} anacap={ic['anacap']} anatt={ic['anatt']} "
          f"anagrpmax={ic['anagrpmax']} nanagrpid={ic['nanagrpid']} "
          f"anagrpid={ns['anagrpid']} chgcnt={log.change_count}")
    for g in log.groups:
        print(f"group={g.ana_group_id} state={g.ana_state.name} "
              f"nsids={g.namespace_ids}")
    c.setup_io_queues()
    try:
        c.read_data(1, 0, 1)
        print("read ok")
    except CommandError as e:
        print(f"read status=0x{int(e.status_code):x}")
else:
    sys.exit(f"unknown step {step}")
c.disconnect()
