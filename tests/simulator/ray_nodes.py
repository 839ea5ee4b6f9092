"""Ray nodes on this machine, for the Ray sweep's tests and benchmark (issue #30).

Each node is a ``ray start --block`` in its own session, its own temp dir and its own
ports, so it stops (or dies, as a lost node does) by its own pids: never ``ray stop``, which
stops every Ray node on the machine, other people's too. Ray turns ``127.0.0.1`` into the
machine's own address and its servers listen on every interface; nothing leaves the
machine. ``RAY_*`` settings in ``env`` reach every node (e.g. the head's health checks).
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from gavelsched.daemon.leases import free_port as _free_port

STARTED = "Ray runtime started"
NODE_ID = re.compile(r"Node ID: ([0-9a-f]+)")     # the raylet's log names its node


def ray_cli() -> str | None:
    """The ``ray`` command beside this Python (or on PATH), or None."""
    beside = Path(sys.executable).parent / "ray"
    return str(beside) if beside.exists() else shutil.which("ray")


def missing() -> str | None:
    """Why Ray nodes cannot start here (no module, no command), or None."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return "the ray extra is not installed (pip install 'gavelsched[ray]')"
    if ray_cli() is None:
        return "no 'ray' command beside this Python or on PATH"
    return None


def _stop_with_owner() -> None:
    """In the child: SIGTERM (``ray start`` then stops its node) when the process that
    started it dies, even killed, so a node never outlives its test or benchmark."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass                                                          # not Linux


@dataclass
class RayNode:
    name: str
    process: subprocess.Popen
    log: Path
    temp_dir: Path

    def node_id(self) -> str:
        """Ray's id of the node (hex), from its raylet's log."""
        raylet = self.temp_dir / "session_latest" / "logs" / "raylet.out"
        found = NODE_ID.search(raylet.read_text(errors="replace"))
        if found is None:
            raise RuntimeError(f"ray node {self.name}: no node id in {raylet}")
        return found.group(1)

    def members(self) -> dict[int, bytes]:
        """The node's processes (its session: ``ray start``'s group and its workers' own
        groups): pid -> command line."""
        found = {}
        for proc in Path("/proc").iterdir():
            try:
                if proc.name.isdigit() and os.getsid(int(proc.name)) == self.process.pid:
                    found[int(proc.name)] = (proc / "cmdline").read_bytes()
            except OSError:
                continue
        return found

    def running(self, function: str) -> int:
        """How many of the node's workers run a task of ``function`` now (Ray titles such
        a worker ``ray::FUNCTION``; an idle one ``ray::IDLE``)."""
        title = f"ray::{function}".encode()
        return sum(1 for cmd in self.members().values() if cmd.startswith(title))

    def kill(self) -> None:
        """SIGKILL every process of the node (raylet, agents, workers): a lost node."""
        for pid in self.members():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait()


class RayNodes:
    """A head and worker nodes on this machine, in one temp dir; a context manager that
    stops them all (``with RayNodes() as nodes: address = nodes.head(cpus=1)``)."""

    def __init__(self, env: dict[str, str] | None = None, timeout_s: float = 120.0):
        self.root = Path(tempfile.mkdtemp(prefix="gs-ray-"))   # short: Ray's socket paths
        self.env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", **(env or {})}
        self.timeout_s = timeout_s
        self.nodes: list[RayNode] = []
        self.address: str | None = None

    def head(self, cpus: int) -> str:
        """Start the head with ``cpus`` CPUs; its ``127.0.0.1:port``."""
        port = _free_port()
        self._start("head", ["--head", f"--port={port}", "--include-dashboard=false",
                             f"--dashboard-port={_free_port()}",
                             f"--ray-client-server-port={_free_port()}"], cpus)
        self.address = f"127.0.0.1:{port}"
        return self.address

    def add(self, name: str, cpus: int) -> RayNode:
        """Start a worker node with ``cpus`` CPUs joined to the head."""
        assert self.address is not None, "start the head first"
        return self._start(name, [f"--address={self.address}"], cpus)

    def _start(self, name: str, flags: list[str], cpus: int) -> RayNode:
        log, temp_dir = self.root / f"{name}.log", self.root / name
        with open(log, "w") as out:
            process = subprocess.Popen(
                [ray_cli(), "start", "--block", *flags, "--node-ip-address=127.0.0.1",
                 f"--num-cpus={cpus}", "--object-store-memory=100000000",
                 f"--dashboard-agent-listen-port={_free_port()}", "--disable-usage-stats",
                 f"--temp-dir={temp_dir}"],
                env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_stop_with_owner)
        node = RayNode(name, process, log, temp_dir)
        self.nodes.append(node)
        deadline = time.monotonic() + self.timeout_s
        while STARTED not in log.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace").strip().splitlines()[-1:]
                raise RuntimeError(f"ray node {name} did not start: {tail}")
            time.sleep(0.2)
        return node

    def close(self) -> None:
        """Stop every node (workers first, the head last): SIGTERM to its ``ray start``,
        which stops its processes, then SIGKILL to whatever of its session is left; remove
        the temp dir."""
        for node in reversed(self.nodes):
            if node.process.poll() is None:
                node.process.terminate()
                try:
                    node.process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    pass
            node.kill()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> RayNodes:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
