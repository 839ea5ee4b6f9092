"""The userspace cable (``tests.faults.cable``) between two network namespaces: it carries
traffic unimpaired, and impaired it delays each direction and drops frames as netem would.

Skipped with the reason where namespaces or ``/dev/net/tun`` are not available."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from .network import NETEM, PREFIX, cable_unavailable, run_ip

DELAY_MS, LOSS = NETEM


# Run inside namespace A: one-way times each way over TCP (the namespaces share the
# monotonic clock: each side stamps what it sends), then UDP datagrams to B's counter.
PROBE = textwrap.dedent("""
    import json, socket, struct, sys, time
    peer, count = sys.argv[1], int(sys.argv[2])
    a_to_b, b_to_a = [], []
    for _ in range(3):
        with socket.create_connection((peer, 7000), timeout=30) as s:
            s.sendall(struct.pack("d", time.monotonic()))
            reply = b""
            while len(reply) < 16:
                reply += s.recv(16 - len(reply))
            there, sent_back = struct.unpack("dd", reply)
            a_to_b.append(there)
            b_to_a.append(time.monotonic() - sent_back)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for i in range(count):
        udp.sendto(i.to_bytes(4, "big"), (peer, 7001))
        time.sleep(0.001)
    print(json.dumps({"a_to_b": a_to_b, "b_to_a": b_to_a}))
""")

# Run inside namespace B: answer each TCP stamp with its one-way time and a stamp of its
# own; count UDP datagrams.
SERVER = textwrap.dedent("""
    import socket, struct, sys, threading, time
    tcp = socket.create_server(("0.0.0.0", 7000))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("0.0.0.0", 7001))
    udp.settimeout(None)
    def echo():
        while True:
            conn, _ = tcp.accept()
            with conn:
                stamp = b""
                while len(stamp) < 8:
                    stamp += conn.recv(8 - len(stamp))
                there = time.monotonic() - struct.unpack("d", stamp)[0]
                conn.sendall(struct.pack("dd", there, time.monotonic()))
    threading.Thread(target=echo, daemon=True).start()
    print("listening", flush=True)
    seen = set()
    while True:
        data = udp.recv(16)
        seen.add(int.from_bytes(data, "big"))
        print(len(seen), flush=True)
""")


@pytest.fixture
def linked():
    """Namespaces A (10.78.0.1) and B (10.78.0.2) joined by a cable; yields
    (a probe run in A, B's datagram counter, the cable process)."""
    reason = cable_unavailable()
    if reason:
        pytest.skip(reason)
    a, b = (f"{PREFIX}-{os.getpid()}-cable{x}" for x in "ab")
    procs: list[subprocess.Popen] = []
    try:
        for ns in (a, b):
            run_ip("netns", "add", ns)
            run_ip("-n", ns, "link", "set", "lo", "up")
        cable = subprocess.Popen(
            [sys.executable, "-m", "tests.faults.cable", f"{a}:eth0", f"{b}:eth0",
             "--delay-ms", str(DELAY_MS), "--loss", str(LOSS)],
            stdout=subprocess.PIPE, text=True)
        procs.append(cable)
        assert cable.stdout.readline().strip() == "ready"
        for ns, ip in ((a, "10.78.0.1"), (b, "10.78.0.2")):
            run_ip("-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
            run_ip("-n", ns, "link", "set", "eth0", "up")
        server = subprocess.Popen(["ip", "netns", "exec", b, sys.executable, "-c", SERVER],
                                  stdout=subprocess.PIPE, text=True)
        procs.append(server)
        assert server.stdout.readline().strip() == "listening"

        def probe(count: int) -> dict:
            done = subprocess.run(["ip", "netns", "exec", a, sys.executable, "-c", PROBE,
                                   "10.78.0.2", str(count)],
                                  capture_output=True, text=True, timeout=120, check=True)
            return json.loads(done.stdout)

        yield probe, Counter(server), cable
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        for ns in (a, b):
            run_ip("netns", "del", ns, check=False)


class Counter:
    """The count B's server prints after every datagram, read by a thread as it comes."""

    def __init__(self, server: subprocess.Popen) -> None:
        self.count = 0
        threading.Thread(target=self._read, args=(server.stdout,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            self.count = int(line)

    def settled(self, want: int) -> int:
        """The count once it reaches ``want`` or has not moved for 3 s."""
        last, since = -1, time.monotonic()
        while self.count < want and time.monotonic() - since < 3.0:
            if self.count != last:
                last, since = self.count, time.monotonic()
            time.sleep(0.05)
        return self.count


def test_an_unimpaired_cable_carries_everything(linked):
    probe, counter, _ = linked
    out = probe(200)
    assert counter.settled(200) == 200
    assert len(out["a_to_b"]) == len(out["b_to_a"]) == 3     # every exchange came back


def test_an_impaired_cable_delays_each_way_and_drops_about_its_loss(linked):
    probe, counter, cable = linked
    probe(1)
    base = counter.settled(1)
    cable.send_signal(signal.SIGUSR1)
    assert cable.stdout.readline().startswith("impaired: True")
    sent = 2000
    out = probe(sent)
    got = counter.settled(base + sent) - base
    # Each way is late by the delay at least (a lost segment only adds to it).
    assert min(out["a_to_b"]) >= DELAY_MS / 1000, out
    assert min(out["b_to_a"]) >= DELAY_MS / 1000, out
    # 5% of 2,000 frames is 100 +- 10 (one standard deviation): 2-9% is over 3 of them.
    assert 0.02 * sent <= sent - got <= 0.09 * sent, f"{sent - got} of {sent} lost"
    cable.send_signal(signal.SIGUSR2)
    assert cable.stdout.readline().startswith("impaired: False")
