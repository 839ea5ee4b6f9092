"""The fault harness's network (issue #17): one network namespace per host, on a switch.

Each daemon runs in its own network namespace (``ip netns``), started with ``ip netns exec
NS``. A "switch" namespace holds a bridge; every host namespace is linked to it by a veth
pair (``eth0`` in the host, ``p<i>`` on the switch) and has one address in ``10.77.0.0/24``
(the scheduler ``.1``, the workers ``.2``, ``.3``), which its daemon binds. Every interface
is created inside a namespace, so parallel runs (pytest ``-n 2``) share no names but the
namespaces' own, which carry this process's id and a counter. All namespaces share the
filesystem. A link can be pulled (``Net.link``) or impaired with ``NETEM``'s delay and loss
(``Net.impair``): by ``tc netem`` where the kernel has it, else every host's link is a
userspace cable that does the same (``tests.faults.cable``). The ``*_unavailable`` probes say
why a piece cannot be had here.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from gavelsched.daemon.local import subprocess_env

PREFIX = "gavelfault"
NETEM = (200.0, 0.05)           # the netem fault: ms of delay and loss, each direction
SUBNET = "10.77.0"
_names = itertools.count()


# ---- small helpers --------------------------------------------------------------------------

def run_ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """``ip ARGS``; raises with its error unless ``check`` is false."""
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")
    return proc


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def netns_unavailable() -> str | None:
    """Why network namespaces cannot be used here (None: they can)."""
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2) on this machine"
    if os.geteuid() != 0:
        return f"`ip netns add` needs root (CAP_SYS_ADMIN); running as uid {os.geteuid()}"
    name = f"{PREFIX}-probe-{os.getpid()}-{next(_names)}"
    made = run_ip("netns", "add", name, check=False)
    if made.returncode != 0:
        return f"`ip netns add` is not permitted here: {_first_line(made.stderr)}"
    try:
        veth = run_ip("-n", name, "link", "add", "a0", "type", "veth", "peer", "name", "b0",
                   check=False)
        if veth.returncode != 0:
            return f"cannot make a veth pair in a namespace: {_first_line(veth.stderr)}"
        bridge = run_ip("-n", name, "link", "add", "br0", "type", "bridge", check=False)
        if bridge.returncode != 0:
            return f"cannot make a bridge in a namespace: {_first_line(bridge.stderr)}"
    finally:
        run_ip("netns", "del", name, check=False)
    return None


def netem_unavailable() -> str | None:
    """Why ``tc qdisc ... netem`` cannot be used in a namespace here (None: it can)."""
    if shutil.which("tc") is None:
        return "no `tc` command (iproute2) on this machine"
    name = f"{PREFIX}-probe-{os.getpid()}-{next(_names)}"
    made = run_ip("netns", "add", name, check=False)
    if made.returncode != 0:
        return f"`ip netns add` is not permitted here: {_first_line(made.stderr)}"
    try:
        run_ip("-n", name, "link", "add", "probe0", "type", "veth", "peer", "name", "probe1")
        got = subprocess.run(["ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", "probe0",
                              "root", "netem", "delay", "1ms"], capture_output=True, text=True,
                             check=False)
        if got.returncode != 0:
            return (f"`tc qdisc add ... netem` fails in a namespace "
                    f"({_first_line(got.stderr) or got.returncode}): this kernel has no netem "
                    "(sch_netem module)")
    finally:
        run_ip("netns", "del", name, check=False)
    return None


def needs_cables() -> bool:
    """The netem fault runs on userspace cables: the kernel has no netem, and TAP devices
    can be made (``cable_unavailable``)."""
    return netem_unavailable() is not None and cable_unavailable() is None


def netem_fault_unavailable() -> str | None:
    """Why the netem fault cannot run here, by ``tc netem`` or by a cable (None: it can)."""
    reason = netem_unavailable()
    if reason is None:
        return None
    cable = cable_unavailable()
    return f"{reason}; no userspace cable either: {cable}" if cable else None


def cable_unavailable() -> str | None:
    """Why a userspace cable (``tests.faults.cable``) cannot be made here (None: it can)."""
    if not os.path.exists("/dev/net/tun"):
        return "no /dev/net/tun (TUN/TAP) on this machine"
    return netns_unavailable()


def reap_stale() -> None:
    """Remove namespaces an earlier, killed run of this harness left behind (their name
    holds the id of the process that made them, which no longer exists), with the
    processes still inside them."""
    listing = run_ip("netns", "list", check=False).stdout
    for line in listing.splitlines():
        name = line.split()[0] if line.split() else ""
        parts = name.split("-")
        if len(parts) < 3 or parts[0] != PREFIX or not parts[1].isdigit():
            continue
        if Path(f"/proc/{parts[1]}").exists():
            continue
        _kill_namespace(name)
        run_ip("netns", "del", name, check=False)


def namespace_pids(ns: str) -> list[int]:
    out = run_ip("netns", "pids", ns, check=False).stdout
    return [int(p) for p in out.split() if p.isdigit()]


def _kill_namespace(ns: str, timeout: float = 10.0) -> None:
    """SIGKILL every process in ``ns`` until none is left."""
    deadline = time.monotonic() + timeout
    while True:
        pids = namespace_pids(ns)
        if not pids or time.monotonic() > deadline:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


# ---- the network ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Host:
    name: str      # "sch", "w0", ...
    ns: str        # its network namespace
    ip: str        # its address on the switch
    port: str      # its veth's name on the switch


class Net:
    """A switch namespace with a bridge, and host namespaces linked to it: by veth pairs,
    or with ``cables`` by userspace cables (``tests.faults.cable``) that can delay and drop
    frames as netem would, for kernels without netem."""

    def __init__(self, *, cables: bool = False) -> None:
        reap_stale()
        self.prefix = f"{PREFIX}-{os.getpid()}-{next(_names)}"
        self.switch = f"{self.prefix}-sw"
        self.hosts: dict[str, Host] = {}
        self.cables: dict[str, subprocess.Popen] | None = {} if cables else None
        self._made: list[str] = []
        try:
            self._add_ns(self.switch)
            run_ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            run_ip("-n", self.switch, "link", "set", "br0", "up")
        except BaseException:
            self.destroy()
            raise

    def _add_ns(self, ns: str) -> None:
        run_ip("netns", "add", ns)
        self._made.append(ns)
        run_ip("-n", ns, "link", "set", "lo", "up")

    def add_host(self, name: str) -> Host:
        i = len(self.hosts)
        host = Host(name, f"{self.prefix}-{name}", f"{SUBNET}.{i + 1}", f"p{i}")
        self._add_ns(host.ns)
        if self.cables is None:
            run_ip("-n", self.switch, "link", "add", host.port, "type", "veth", "peer", "name",
                "eth0", "netns", host.ns)
        else:
            self.cables[name] = self._cable(host)
        run_ip("-n", self.switch, "link", "set", host.port, "master", "br0")
        run_ip("-n", self.switch, "link", "set", host.port, "up")
        run_ip("-n", host.ns, "addr", "add", f"{host.ip}/24", "dev", "eth0")
        run_ip("-n", host.ns, "link", "set", "eth0", "up")
        self.hosts[name] = host
        return host

    def _cable(self, host: Host) -> subprocess.Popen:
        """A userspace cable from the host's ``eth0`` to its switch port, unimpaired."""
        delay_ms, loss = NETEM
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.faults.cable", f"{host.ns}:eth0",
             f"{self.switch}:{host.port}", "--delay-ms", str(delay_ms), "--loss", str(loss)],
            stdout=subprocess.PIPE, text=True, env=subprocess_env())
        if proc.stdout.readline().strip() != "ready":
            proc.kill()
            raise RuntimeError(f"the cable of {host.name} did not start "
                               f"(exit code {proc.wait()})")
        return proc

    def link(self, host: Host, up: bool) -> None:
        """Plug the host's cable into the switch, or pull it out."""
        run_ip("-n", self.switch, "link", "set", host.port, "up" if up else "down")

    def _tc(self, ns: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["ip", "netns", "exec", ns, "tc", *args], capture_output=True,
                              text=True, check=False)

    def impair(self, host: Host, on: bool) -> str:
        """``NETEM``'s delay and loss on both ends of the host's link (each direction), or
        (``on=False``) none; says how. By the host's cable where the net has cables (with
        the frames it has carried and dropped), else by ``tc netem`` (deleting the
        namespaces removes it too)."""
        if self.cables is not None:
            cable = self.cables[host.name]
            cable.send_signal(signal.SIGUSR1 if on else signal.SIGUSR2)
            answer = cable.stdout.readline().strip()
            if not answer.startswith(f"impaired: {on}"):
                raise RuntimeError(f"the cable of {host.name} did not answer")
            return f"the userspace cable (tests/faults/cable.py; {answer.split('(')[-1]}"
        delay_ms, loss = NETEM
        for ns, dev in ((host.ns, "eth0"), (self.switch, host.port)):
            if not on:
                self._tc(ns, "qdisc", "del", "dev", dev, "root")
                continue
            got = self._tc(ns, "qdisc", "add", "dev", dev, "root", "netem", "delay",
                           f"{delay_ms:g}ms", "loss", f"{100 * loss:g}%")
            if got.returncode != 0:
                raise RuntimeError(f"tc netem on {dev} in {ns}: {got.stderr.strip()}")
        return "tc netem"

    def destroy(self) -> None:
        """Kill every process left in the namespaces and the cables, then delete the
        namespaces (their veths go with them)."""
        for cable in (self.cables or {}).values():
            cable.kill()
            cable.wait()
        for ns in reversed(self._made):
            _kill_namespace(ns)
        for ns in reversed(self._made):
            run_ip("netns", "del", ns, check=False)
        self._made.clear()
