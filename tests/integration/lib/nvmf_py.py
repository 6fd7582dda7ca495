#!/usr/bin/env python3
"""pynvmeof steps for tests/integration/nvmf_*.sh (a peer we did not write).

  nvmf_py.py PORT NQN identify          print "dlfeat= nmic= nguid= eui64= cmic= oncs="
  nvmf_py.py PORT NQN rw                write/read patterns, byte-exact (in-capsule and R2T)
  nvmf_py.py PORT NQN aen CTL DEV       hold an AER, run `blkstack -s CTL attr DEV
                                        queue/write_zeroes_unmap 0`, expect a Namespace
                                        Attribute Changed event, the changed-namespace log
                                        [1], and print the new dlfeat
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.environ.get("PYNVMEOF", "/work/shared/peers/pynvmeof") + "/src")
from nvmeof_client import NVMeoFClient  # noqa: E402

port, nqn, step = int(sys.argv[1]), sys.argv[2], sys.argv[3]
c = NVMeoFClient("127.0.0.1", nqn, port=port, timeout=10)
c.connect()


def ident():
    ns = c.identify_namespace(1)
    ic = c.identify_controller()
    return ns, ic


if step == "identify":
    ns, ic = ident()
    print(f"dlfeat={ns['dlfeat']} nmic={ns['nmic']} nguid={ns['nguid']} "
          f"eui64={ns['eui64']} cmic={ic['cmic']} oncs={ic['oncs']}")
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
else:
    sys.exit(f"unknown step {step}")
c.disconnect()
