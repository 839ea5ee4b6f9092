"""A userspace Ethernet cable with netem's delay and loss, for kernels without ``sch_netem``.

The fault suite's "200 ms delay and 5% loss" fault (issue #17) is ``tc qdisc ... netem``
where the kernel has it (``tests.faults.network.netem_unavailable``). Where it does not, a
host's link is this cable instead of a veth pair: two TAP devices, one in the host's
namespace (``eth0``) and one in the switch's (``pI``, on the bridge), and one process that
carries every Ethernet frame between them. Impaired, it does what ``netem delay D loss P``
on both ends of a veth does: each frame, in each direction, is dropped with probability P
independently of the others, and every other frame is delivered D seconds after it was sent,
in order. TCP sees real loss and real round trips, as it would through netem.

    python -m tests.faults.cable HOST_NS:eth0 SWITCH_NS:p1 [--delay-ms 200] [--loss 0.05]

prints ``ready`` once both devices exist (the caller then configures them with ``ip``), and
carries frames until it is killed. It starts unimpaired; SIGUSR1 turns the impairment on,
SIGUSR2 off. The devices are not persistent: they go away with the process.
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import os
import random
import signal
import struct
import sys
import threading
import time
from collections import deque

TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000
CLONE_NEWNET = 0x40000000
FRAME_MAX = 65536


def _setns(fd: int) -> None:
    """Move the calling thread into the network namespace open at ``fd``."""
    if hasattr(os, "setns"):          # Python 3.12+
        os.setns(fd, CLONE_NEWNET)
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def die_with_parent() -> None:
    """SIGTERM this process when the process that started it dies (``PR_SET_PDEATHSIG``):
    a killed harness leaves no cable behind."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)       # PR_SET_PDEATHSIG


def open_tap(ns: str, name: str) -> int:
    """A new TAP device ``name`` in network namespace ``ns`` (``ip netns`` name); its fd.
    The calling thread is back in its own namespace on return."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        _setns(target)
        try:
            fd = os.open("/dev/net/tun", os.O_RDWR)
            fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
        finally:
            _setns(home)
    finally:
        os.close(home)
        os.close(target)
    return fd


class Direction:
    """Frames read from one TAP and written to the other, through the impairment: a reader
    thread decides each frame's fate on arrival, a writer thread delivers it when due."""

    def __init__(self, src: int, dst: int, cable: Cable) -> None:
        self.src, self.dst, self.cable = src, dst, cable
        self.queue: deque[tuple[float, bytes]] = deque()
        self.ready = threading.Condition()
        self.last_due = 0.0

    def start(self) -> None:
        for target in (self._read, self._write):
            threading.Thread(target=target, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                frame = os.read(self.src, FRAME_MAX)
            except OSError:
                return
            delay, loss = self.cable.impairment()
            if loss and self.cable.rng.random() < loss:
                self.cable.dropped += 1
                continue
            with self.ready:
                # A constant delay keeps the order; max() keeps it when the delay changes.
                self.last_due = max(time.monotonic() + delay, self.last_due)
                self.queue.append((self.last_due, frame))
                self.ready.notify()

    def _write(self) -> None:
        while True:
            with self.ready:
                while not self.queue:
                    self.ready.wait()
                due, frame = self.queue[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self.ready.wait(wait)
                    continue
                self.queue.popleft()
            try:
                os.write(self.dst, frame)
                self.cable.carried += 1
            except OSError:
                pass          # the other end is down (its link pulled): the frame is lost


class Cable:
    """Two TAP fds and the impairment both directions share."""

    def __init__(self, a: int, b: int, delay_s: float, loss: float, seed: int = 0) -> None:
        self.delay_s, self.loss = delay_s, loss
        self.impaired = False
        self.rng = random.Random(seed)
        self.carried = self.dropped = 0
        self.directions = (Direction(a, b, self), Direction(b, a, self))

    def impairment(self) -> tuple[float, float]:
        """(delay s, loss probability) for a frame sent now."""
        return (self.delay_s, self.loss) if self.impaired else (0.0, 0.0)

    def start(self) -> None:
        for direction in self.directions:
            direction.start()


def _end(text: str) -> tuple[str, str]:
    ns, sep, dev = text.partition(":")
    if not sep or not ns or not dev or len(dev) > 15:
        raise argparse.ArgumentTypeError(f"expected NAMESPACE:DEVICE, got {text!r}")
    return ns, dev


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", type=_end, help="one end, NAMESPACE:DEVICE")
    parser.add_argument("b", type=_end, help="the other end, NAMESPACE:DEVICE")
    parser.add_argument("--delay-ms", type=float, default=200.0,
                        help="each direction's delay while impaired")
    parser.add_argument("--loss", type=float, default=0.05,
                        help="each direction's probability of dropping a frame while impaired")
    parser.add_argument("--seed", type=int, default=0, help="the loss's random seed")
    args = parser.parse_args(argv)
    die_with_parent()
    if not 0.0 <= args.loss < 1.0 or not 0.0 <= args.delay_ms < 60_000:
        parser.error("--loss must be in [0, 1) and --delay-ms in [0, 60000)")
    cable = Cable(open_tap(*args.a), open_tap(*args.b), args.delay_ms / 1000.0, args.loss,
                  args.seed)

    def impair(on: bool) -> None:
        cable.impaired = on
        print(f"impaired: {on} (carried {cable.carried}, dropped {cable.dropped})",
              flush=True)

    signal.signal(signal.SIGUSR1, lambda *_: impair(True))
    signal.signal(signal.SIGUSR2, lambda *_: impair(False))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    cable.start()
    print("ready", flush=True)
    while True:
        signal.pause()


if __name__ == "__main__":
    sys.exit(main())
