"""The fault harness (issue #17): a scheduler and two workers on separate network hosts, with
faults injected while ``tests.faults.job`` jobs train.

**Hosts.** Each daemon runs in its own network namespace (``ip netns``), started with ``ip
netns exec NS``. A "switch" namespace holds a bridge; every host namespace is linked to it
by a veth pair (``eth0`` in the host, ``p<i>`` on the switch) and has one address in
``10.77.0.0/24`` (the scheduler ``.1``, the workers ``.2``, ``.3``), which its daemon binds.
Every interface is created inside a namespace, so parallel runs (pytest ``-n 2``) share no
names but the namespaces' own, which carry this process's id and a counter. All namespaces
share the filesystem: the scheduler's ``checkpoint_dir`` (``ROOT/checkpoints``) is the
cluster's shared storage. The daemons use a real token (``--token-file``,
``auth_token_file``). The test process itself reaches the scheduler through a Unix socket
(filesystem sockets cross network namespaces) that a small forwarder (``python -m
tests.faults.netns proxy``) serves from inside the scheduler's namespace. Faults on the
workers' links never touch that path.

**Faults** (``FAULTS``), each injected once while three jobs train on a ``v100`` worker with
two GPUs and a ``k80`` worker with one, at a moment when a job's process trains past its last
checkpoint (the job's ``running-`` marker; the fault strikes that process, or its host): a
worker's link down for three rounds and a second (the lease is a round); ``kill -9``
of a worker daemon (restarted with the same work dir), of a job process, and of the
scheduler (restarted on the same state dir); 200 ms delay and 5% loss each way on a
worker's link (``tc netem``; where the kernel has no netem, every host's link is a userspace
cable that does the same, ``tests.faults.cable``; skipped, with the reason, where neither can
be had); and a checkpoint corrupted (the job's process killed, then the state file in its
newest checkpoint directory truncated).

**Checks** (``Outcome.problems``): every job ends ``done``, or ``failed`` with a one-line
reason; a done job has ``steps_done == total_steps``, and each of its final states (the
result files the job writes when it finishes, and every state file of ``total_steps`` steps
in its checkpoint directory) has parameters equal to the standalone reference run within
1e-9 and a step log holding steps 1..total exactly once each; no GPU lock was ever found
held by another job (``violations.log``).

**Recovery time** (``Outcome.recovery_s``): from the fault's end (the link back up, the
killed daemon restarted and serving, netem removed; for a killed job process and a
corrupted checkpoint, the injection itself) until every job that was not finished at that
moment has made durable progress past its count at that moment (``steps_done`` in
``status``, polled every 0.25 s; the count "at that moment" is the first poll after it) or
reached a final state. Durable progress moves at checkpoints, so its resolution is about a
round.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from gavelsched.cli.local_cluster import scaled
from gavelsched.daemon.local import FINAL_STATES, LocalCluster, kill_tree, subprocess_env, wait_until
from gavelsched.rpc import pb
from gavelsched.rpc.security import channel, new_token
from traces import default_table
from traces.throughputs import dump_table

log = logging.getLogger(__name__)

PREFIX = "gavelfault"
NETEM = (200.0, 0.05)           # the netem fault: ms of delay and loss, each direction
SUBNET = "10.77.0"
SCHEDULER_PORT = 50051
TOLERANCE = 1e-9
JOB_COMMAND = f"{sys.executable} -m tests.faults.job"
_names = itertools.count()


# ---- small helpers --------------------------------------------------------------------------

def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
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
    made = _ip("netns", "add", name, check=False)
    if made.returncode != 0:
        return f"`ip netns add` is not permitted here: {_first_line(made.stderr)}"
    try:
        veth = _ip("-n", name, "link", "add", "a0", "type", "veth", "peer", "name", "b0",
                   check=False)
        if veth.returncode != 0:
            return f"cannot make a veth pair in a namespace: {_first_line(veth.stderr)}"
        bridge = _ip("-n", name, "link", "add", "br0", "type", "bridge", check=False)
        if bridge.returncode != 0:
            return f"cannot make a bridge in a namespace: {_first_line(bridge.stderr)}"
    finally:
        _ip("netns", "del", name, check=False)
    return None


def netem_unavailable() -> str | None:
    """Why ``tc qdisc ... netem`` cannot be used in a namespace here (None: it can)."""
    if shutil.which("tc") is None:
        return "no `tc` command (iproute2) on this machine"
    name = f"{PREFIX}-probe-{os.getpid()}-{next(_names)}"
    made = _ip("netns", "add", name, check=False)
    if made.returncode != 0:
        return f"`ip netns add` is not permitted here: {_first_line(made.stderr)}"
    try:
        _ip("-n", name, "link", "add", "probe0", "type", "veth", "peer", "name", "probe1")
        got = subprocess.run(["ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", "probe0",
                              "root", "netem", "delay", "1ms"], capture_output=True, text=True,
                             check=False)
        if got.returncode != 0:
            return (f"`tc qdisc add ... netem` fails in a namespace "
                    f"({_first_line(got.stderr) or got.returncode}): this kernel has no netem "
                    "(sch_netem module)")
    finally:
        _ip("netns", "del", name, check=False)
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
    listing = _ip("netns", "list", check=False).stdout
    for line in listing.splitlines():
        name = line.split()[0] if line.split() else ""
        parts = name.split("-")
        if len(parts) < 3 or parts[0] != PREFIX or not parts[1].isdigit():
            continue
        if Path(f"/proc/{parts[1]}").exists():
            continue
        _kill_namespace(name)
        _ip("netns", "del", name, check=False)


def namespace_pids(ns: str) -> list[int]:
    out = _ip("netns", "pids", ns, check=False).stdout
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
            _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.switch, "link", "set", "br0", "up")
        except BaseException:
            self.destroy()
            raise

    def _add_ns(self, ns: str) -> None:
        _ip("netns", "add", ns)
        self._made.append(ns)
        _ip("-n", ns, "link", "set", "lo", "up")

    def add_host(self, name: str) -> Host:
        i = len(self.hosts)
        host = Host(name, f"{self.prefix}-{name}", f"{SUBNET}.{i + 1}", f"p{i}")
        self._add_ns(host.ns)
        if self.cables is None:
            _ip("-n", self.switch, "link", "add", host.port, "type", "veth", "peer", "name",
                "eth0", "netns", host.ns)
        else:
            self.cables[name] = self._cable(host)
        _ip("-n", self.switch, "link", "set", host.port, "master", "br0")
        _ip("-n", self.switch, "link", "set", host.port, "up")
        _ip("-n", host.ns, "addr", "add", f"{host.ip}/24", "dev", "eth0")
        _ip("-n", host.ns, "link", "set", "eth0", "up")
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
        _ip("-n", self.switch, "link", "set", host.port, "up" if up else "down")

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
            _ip("netns", "del", ns, check=False)
        self._made.clear()


# ---- the client path: a Unix socket forwarded into the scheduler's namespace ---------------

async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


async def _forward(sock: str, host: str, port: int) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = await asyncio.start_unix_server(handle, path=sock)
    os.chmod(sock, 0o600)
    async with server:
        await server.serve_forever()


def proxy_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.faults.netns proxy")
    parser.add_argument("socket")
    parser.add_argument("target", metavar="HOST:PORT")
    args = parser.parse_args(argv)
    host, _, port = args.target.rpartition(":")
    asyncio.run(_forward(args.socket, host, int(port)))
    return 0


# ---- the cluster ----------------------------------------------------------------------------

@dataclass(frozen=True)
class JobProcess:
    pid: int
    job_id: str
    host: str


class NetnsCluster(LocalCluster):
    """``LocalCluster`` (its config YAML, token, client calls and ``stop``) with every daemon
    in its own namespace of ``net``. Workers get ``FAULTS_*`` in their environment, which
    their jobs inherit (``tests.faults.job``)."""

    def __init__(self, root: Path, net: Net, *, round_seconds: float = 2.0,
                 heartbeat_seconds: float = 0.3, policy: str = "max_min_fairness_perf",
                 expected_gpus: int = 1, emulation_speed: float = 1.0) -> None:
        self.net = net
        self.sched = net.add_host("sch")
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        # The scheduler's priors: the table at the workers' emulated pace, as local-cluster
        # gives its scheduler (leases then hold what the workers can run).
        priors = root / "throughputs.json"
        dump_table(scaled(default_table(), emulation_speed), priors)
        super().__init__(root, policy=policy, round_seconds=round_seconds,
                         heartbeat_seconds=heartbeat_seconds, token=new_token(),
                         config={"listen": f"{self.sched.ip}:{SCHEDULER_PORT}",
                                 "checkpoint_dir": str(root / "checkpoints"),
                                 "throughputs": str(priors),
                                 "min_resolve_interval_s": 0.0,
                                 "expected_workers": expected_gpus})
        self.emulation_speed = emulation_speed
        self.address = f"{self.sched.ip}:{SCHEDULER_PORT}"
        self.checkpoints = root / "checkpoints"
        self.lock_dir = root / "gpu-locks"
        self.result_dir = root / "results"
        self.lock_dir.mkdir(exist_ok=True)
        self.result_dir.mkdir(exist_ok=True)
        self._sock_dir = Path(tempfile.mkdtemp(prefix="gf", dir="/tmp"))   # short: 108 bytes
        self.socket = self._sock_dir / "sched.sock"
        self.proxy: subprocess.Popen | None = None
        self.worker_procs: dict[str, subprocess.Popen] = {}
        self.worker_types: dict[str, str] = {}
        self._worker_args: dict[str, list[str]] = {}
        self._client: grpc.Channel | None = None

    # -- processes ------------------------------------------------------------------------
    def _spawn_in(self, ns: str, argv: list[str], log_name: str,
                  env: dict[str, str] | None = None) -> subprocess.Popen:
        with open(self.root / log_name, "ab") as out:
            return subprocess.Popen(["ip", "netns", "exec", ns, *argv], stdout=out,
                                    stderr=subprocess.STDOUT,
                                    env={**subprocess_env(), **(env or {})})

    def _start_proxy(self) -> None:
        if self.proxy is not None and self.proxy.poll() is None:
            return
        self.proxy = self._spawn_in(self.sched.ns, [
            sys.executable, "-m", "tests.faults.netns", "proxy", str(self.socket),
            self.address], "proxy.log")
        wait_until(lambda: self.socket.exists() or self.proxy.poll() is not None, 30,
                   "the client proxy")
        if self.proxy.poll() is not None:
            raise RuntimeError(f"the client proxy exited; see {self.root / 'proxy.log'}")

    def start_scheduler(self, timeout: float = 60.0) -> NetnsCluster:
        self._start_proxy()
        self.scheduler = self._spawn_in(self.sched.ns, [
            sys.executable, "-m", "gavelsched", "scheduler", "--config",
            str(self.config_path)], "scheduler.log")
        self.wait_serving(timeout)
        return self

    def start_host_worker(self, name: str, worker_type: str, gpus: int, *,
                          grace_s: float = 10.0) -> subprocess.Popen:
        """A worker daemon on a new host ``name``, emulating ``worker_type``."""
        host = self.net.add_host(name)
        self._worker_args[name] = [
            sys.executable, "-m", "gavelsched", "worker", "--scheduler", self.address,
            "--type", worker_type, "--gpus", str(gpus), "--listen", f"{host.ip}:0",
            "--work-dir", str(self.root / f"worker-{name}"), "--grace", str(grace_s),
            "--emulation-speed", str(self.emulation_speed), "--token-file",
            str(self.token_file)]
        self.worker_types[name] = worker_type
        return self.restart_worker(name)

    def restart_worker(self, name: str) -> subprocess.Popen:
        """(Re)start host ``name``'s worker daemon, with the same flags and work dir."""
        from . import job as faults_job

        host = self.net.hosts[name]
        proc = self._spawn_in(host.ns, self._worker_args[name], f"worker-{name}.log", env={
            faults_job.LOCK_DIR_VAR: str(self.lock_dir),
            faults_job.RESULT_DIR_VAR: str(self.result_dir),
            faults_job.HOST_VAR: name})
        self.workers.append(proc)
        self.worker_procs[name] = proc
        return proc

    def kill9_daemon(self, name: str) -> None:
        """``kill -9`` of the worker daemon alone: its job processes live on (each in its
        own session), as on a machine whose daemon crashed."""
        proc = self.worker_procs[name]
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def job_processes(self) -> list[JobProcess]:
        """The job processes (``tests.faults.job`` under a scheduler) on the worker hosts."""
        found = []
        for name, host in self.net.hosts.items():
            if name == self.sched.name:
                continue
            for pid in namespace_pids(host.ns):
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                    env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                except OSError:
                    continue
                if b"tests.faults.job" not in cmd or cmd[0].endswith(b"sh"):
                    continue
                job = next((e.split(b"=", 1)[1].decode() for e in env
                            if e.startswith(b"GAVEL_JOB_ID=")), None)
                if job is not None:
                    found.append(JobProcess(pid, job, name))
        return found

    def stop(self) -> None:  # type: ignore[override]
        try:
            super().stop(grace_s=0.5)
        finally:
            if self._client is not None:
                self._client.close()
                self._client = None
            if self.proxy is not None and self.proxy.poll() is None:
                kill_tree(self.proxy.pid)
                self.proxy.wait()
            self.net.destroy()
            shutil.rmtree(self._sock_dir, ignore_errors=True)

    # -- client ---------------------------------------------------------------------------
    @property
    def chan(self) -> grpc.Channel:
        if self._client is None:
            self._client = channel(f"unix:{self.socket}", token=self.token)
        return self._client

    def reconnect(self) -> None:
        """A fresh client channel next time (after the scheduler restarted: no reconnect
        backoff). The old one is left to the garbage collector, not closed: another thread
        may be calling through it."""
        self._client = None

    def try_jobs(self) -> dict[str, pb.JobStatus] | None:
        """``jobs()``, or None while the scheduler cannot be reached."""
        try:
            return self.jobs()
        except grpc.RpcError:
            self.reconnect()
            return None

    def alive_by_host(self) -> dict[str, bool]:
        """Whether the scheduler has a live server of each host's type (one host a type)."""
        workers = self.status().workers
        return {name: any(w.alive for w in workers if w.type == t)
                for name, t in self.worker_types.items()}


# ---- references -------------------------------------------------------------------------

def references(steps: Iterable[int], directory: Path) -> dict[int, list[list[float]]]:
    """The standalone runs' parameters for each step count (``python -m tests.faults.job
    --reference N``, run in parallel; kept in ``directory``)."""
    from . import job as faults_job

    directory.mkdir(parents=True, exist_ok=True)
    todo = {n: directory / f"reference-{n}.json" for n in sorted(set(steps))}
    procs = [subprocess.Popen([sys.executable, "-m", "tests.faults.job", "--reference", str(n),
                               "--out", str(path)], env=subprocess_env(),
                              stderr=subprocess.PIPE)
             for n, path in todo.items() if not path.exists()]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"reference run failed: {err.decode(errors='replace')[-2000:]}")
    return {n: _params(faults_job.read_state(path)) for n, path in todo.items()}


def _params(body: dict) -> list[list[float]]:
    return [[float.fromhex(v) for v in p] for p in body["params"]]


# ---- scenarios --------------------------------------------------------------------------

@dataclass(frozen=True)
class Setup:
    """The cluster and the jobs of every fault scenario."""

    round_seconds: float = 2.0
    heartbeat_seconds: float = 0.3
    policy: str = "max_min_fairness_perf"
    job_type: str = "A3C"          # 24 / 11 steps/s on v100 / k80 (the catalog's table)
    total_steps: tuple[int, ...] = (200, 250, 300)
    workers: tuple[tuple[str, str, int], ...] = (("w0", "v100", 2), ("w1", "k80", 1))
    # x4: ~96 / 44 steps/s, so that a run's lease holds ~100 steps although a torch job's
    # start-up (3-4 s on a busy 2-core machine) is longer than a 2 s round
    emulation_speed: float = 4.0
    timeout_s: float = 240.0       # for every job to reach a final state after the fault


class Skip(Exception):
    """The fault cannot be injected on this machine; the message says why."""


@dataclass
class JobVerdict:
    id: str
    state: str
    steps_done: int
    total_steps: int
    reason: str
    problems: list[str] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return self.state == "done" and not self.problems


@dataclass
class Outcome:
    fault: str
    root: Path
    jobs: list[JobVerdict] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    recovery_s: float | None = None
    wall_s: float = 0.0
    skipped: str | None = None
    corrupted: str | None = None     # the job whose checkpoint was corrupted

    @property
    def problems(self) -> list[str]:
        out = list(self.errors)
        out += [f"job {j.id}: {p}" for j in self.jobs for p in j.problems]
        out += [f"GPU held by two jobs: {v}" for v in self.violations]
        return out

    @property
    def lost(self) -> int:
        return sum(1 for j in self.jobs if not j.exact)

    def report(self) -> str:
        lines = [f"fault {self.fault!r} (logs under {self.root}):"]
        lines += [f"  note: {n}" for n in self.notes]
        for j in self.jobs:
            lines.append(f"  job {j.id}: {j.state} {j.steps_done}/{j.total_steps}"
                         + (f" reason={j.reason!r}" if j.reason else ""))
            lines += [f"    - {p}" for p in j.problems]
        lines += [f"  violation: {v}" for v in self.violations]
        lines += [f"  error: {e}" for e in self.errors]
        return "\n".join(lines)


class Monitor:
    """Polls ``status`` every 0.25 s: (time, {job: (state, steps_done)}) samples."""

    def __init__(self, cluster: NetnsCluster) -> None:
        self.cluster = cluster
        self.samples: list[tuple[float, dict[str, tuple[str, int]]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="faults-monitor")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            try:
                jobs = self.cluster.try_jobs()
            except Exception as err:  # noqa: BLE001 - a sample missed; the monitor goes on
                log.warning("status poll failed: %s", err)
                continue
            if jobs is not None:
                self.record(jobs)

    def record(self, jobs: dict[str, pb.JobStatus]) -> None:
        self.samples.append((time.monotonic(),
                             {j.id: (j.state, j.steps_done) for j in jobs.values()}))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def recovery_s(self, fault_end: float) -> float | None:
        """Seconds from ``fault_end`` until every job unfinished then has made durable
        progress or finished (None: never seen). The counts "then" are the first sample
        taken at or after ``fault_end``, so a sample from before the fault cannot make a
        checkpoint that landed just before it look like recovery."""
        after = [(t, s) for t, s in self.samples if t >= fault_end]
        if not after:
            return None
        waiting = {j: steps for j, (state, steps) in after[0][1].items()
                   if state not in FINAL_STATES}
        for t, sample in after:
            for j in list(waiting):
                state, steps = sample.get(j, ("", -1))
                if state in FINAL_STATES or steps > waiting[j]:
                    del waiting[j]
            if not waiting:
                return t - fault_end
        return None


class Trial:
    """One scenario's cluster, jobs and notes, handed to a fault's injector."""

    def __init__(self, cluster: NetnsCluster, setup: Setup, jobs: list[str],
                 outcome: Outcome) -> None:
        self.cluster = cluster
        self.net = cluster.net
        self.setup = setup
        self.jobs = jobs
        self.outcome = outcome

    def note(self, text: str) -> None:
        self.outcome.notes.append(text)

    def training(self, timeout: float = 120.0) -> tuple[pb.JobStatus, JobProcess]:
        """A job with durable progress (a checkpoint to resume from) whose process is
        training past it now (its ``running-`` marker is at least half a second old): the
        least advanced such job, and that process."""
        from . import job as faults_job

        def pick():
            jobs = self.cluster.try_jobs() or {}
            procs = {p.pid: p for p in self.cluster.job_processes()}
            found = []
            for marker in self.cluster.result_dir.glob(f"*/{faults_job.RUNNING_PREFIX}*"):
                status = jobs.get(marker.parent.name)
                pid = marker.name.rsplit("-", 1)[-1]
                proc = procs.get(int(pid)) if pid.isdigit() else None
                try:
                    age = time.time() - marker.stat().st_mtime
                except OSError:
                    continue
                if (status is not None and proc is not None and status.state == "running"
                        and 0 < status.steps_done < 0.7 * status.total_steps and age >= 0.5):
                    found.append((status.steps_done / status.total_steps, status.id, status,
                                  proc))
            return min(found)[2:] if found else None

        return wait_until(pick, timeout, "a job training past its first checkpoint")

    def wait_dead(self, name: str, timeout: float = 60.0) -> None:
        wait_until(lambda: not self.cluster.alive_by_host()[name], timeout,
                   f"the scheduler to fail worker {name}")


def fault_link_down(trial: Trial) -> float:
    job, proc = trial.training()
    name = proc.host
    host = trial.net.hosts[name]
    down_s = 3 * trial.setup.round_seconds + 1.0
    trial.net.link(host, up=False)
    trial.note(f"link of {name} down for {down_s:.0f}s while job {job.id} trained there "
               f"(process {proc.pid}) past {job.steps_done}/{job.total_steps} durable")
    time.sleep(down_s)
    alive = trial.cluster.alive_by_host()[name]
    trial.note(f"the scheduler had {'not ' if alive else ''}failed {name} when it came back")
    trial.net.link(host, up=True)
    return time.monotonic()


def fault_kill_worker(trial: Trial) -> float:
    job, proc = trial.training()
    name = proc.host
    orphans = [p for p in trial.cluster.job_processes() if p.host == name]
    trial.cluster.kill9_daemon(name)
    trial.note(f"kill -9 of worker daemon {name} while job {job.id} trained there past "
               f"{job.steps_done}/{job.total_steps} durable; its job processes live on: "
               f"{[(p.job_id, p.pid) for p in orphans]}")
    trial.wait_dead(name)
    trial.cluster.restart_worker(name)
    trial.note(f"worker {name} restarted with the same work dir")
    return time.monotonic()


def fault_kill_job(trial: Trial) -> float:
    job, proc = trial.training()
    os.kill(proc.pid, signal.SIGKILL)
    trial.note(f"kill -9 of job {job.id}'s process {proc.pid} on {proc.host}, training past "
               f"{job.steps_done}/{job.total_steps} durable")
    return time.monotonic()


def fault_kill_scheduler(trial: Trial) -> float:
    job, proc = trial.training()
    trial.cluster.kill9_scheduler()
    trial.note(f"kill -9 of the scheduler while job {job.id} trained on {proc.host} past "
               f"{job.steps_done}/{job.total_steps} durable")
    time.sleep(trial.setup.round_seconds / 2)
    trial.cluster.reconnect()
    trial.cluster.start_scheduler()
    trial.note("scheduler restarted on the same state dir")
    return time.monotonic()


def fault_netem(trial: Trial) -> float:
    if trial.net.cables is None and (reason := netem_unavailable()):
        raise Skip(reason)
    job, proc = trial.training()
    name = proc.host
    host = trial.net.hosts[name]
    window = 5 * trial.setup.round_seconds
    how = trial.net.impair(host, True)
    delay_ms, loss = NETEM
    trial.note(f"{delay_ms:g} ms delay and {100 * loss:g}% loss by {how} on both ends of "
               f"{name}'s link for {window:.0f}s (job {job.id} trained there past "
               f"{job.steps_done}/{job.total_steps} durable)")
    try:
        time.sleep(window)
    finally:
        trial.note(f"removed from {name}'s link: {trial.net.impair(host, False)}")
    return time.monotonic()


def newest_state_file(checkpoints: Path) -> Path | None:
    """The job's state file (``tests.faults.job.STATE_FILE``) written last, anywhere under
    its checkpoint directory."""
    from . import job as faults_job

    files = [p for p in checkpoints.rglob(faults_job.STATE_FILE) if p.is_file()]
    return max(files, key=lambda p: p.stat().st_mtime_ns) if files else None


def fault_corrupt_checkpoint(trial: Trial) -> float:
    from . import job as faults_job

    job, proc = trial.training()
    os.kill(proc.pid, signal.SIGKILL)         # nothing writes a newer checkpoint now
    path = newest_state_file(trial.cluster.checkpoints / job.id)
    if path is None:
        trial.outcome.errors.append(f"job {job.id} had durable steps but no "
                                    f"{faults_job.STATE_FILE} under its checkpoint dir")
        return time.monotonic()
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.truncate(size // 3)
    trial.note(f"kill -9 of job {job.id}'s process {proc.pid}, training past "
               f"{job.steps_done}/{job.total_steps} durable, then "
               f"{path.relative_to(trial.cluster.root)} truncated from {size} to {size // 3} bytes")
    trial.outcome.corrupted = job.id
    return time.monotonic()


FAULTS: dict[str, Callable[[Trial], float]] = {
    "link-down": fault_link_down,
    "kill-worker": fault_kill_worker,
    "kill-job": fault_kill_job,
    "kill-scheduler": fault_kill_scheduler,
    "netem": fault_netem,
    "corrupt-checkpoint": fault_corrupt_checkpoint,
}
TITLES = {
    "none": "no fault",
    "link-down": "worker link down 3 rounds + 1 s",
    "kill-worker": "kill -9 worker daemon, restart",
    "kill-job": "kill -9 job process",
    "kill-scheduler": "kill -9 scheduler, restart",
    "netem": "200 ms delay + 5% loss each way",
    "corrupt-checkpoint": "corrupt newest checkpoint",
}


def run_fault(fault: str, root: Path, refs: dict[int, list[list[float]]],
              setup: Setup = Setup()) -> Outcome:
    """Start the cluster, submit the jobs, inject ``fault`` ("none": no fault) once they
    train, wait for every job to finish, and check the outcome. Always cleans up."""
    root = Path(root)
    outcome = Outcome(fault, root)
    started = time.monotonic()
    net = Net(cables=fault == "netem" and needs_cables())
    try:
        cluster = NetnsCluster(root, net, round_seconds=setup.round_seconds,
                               heartbeat_seconds=setup.heartbeat_seconds, policy=setup.policy,
                               expected_gpus=sum(g for _, _, g in setup.workers),
                               emulation_speed=setup.emulation_speed)
    except BaseException:
        net.destroy()
        raise
    monitor: Monitor | None = None
    try:
        cluster.start_scheduler()
        for name, worker_type, gpus in setup.workers:
            cluster.start_host_worker(name, worker_type, gpus)
        wait_until(lambda: cluster.alive_workers() == len(setup.workers), 60,
                   "the workers to register")
        jobs = [cluster.submit(pb.JobRequest(job_type=setup.job_type, total_steps=n,
                                             command=JOB_COMMAND))
                for n in setup.total_steps]
        monitor = Monitor(cluster)
        trial = Trial(cluster, setup, jobs, outcome)
        fault_end = None
        if fault != "none":
            try:
                fault_end = FAULTS[fault](trial)
            except Skip as why:
                outcome.skipped = str(why)
                return outcome
        done = None
        try:
            done = wait_until(lambda: _all_final(cluster, jobs), setup.timeout_s,
                              "every job to finish")
        except TimeoutError as err:
            outcome.errors.append(str(err))
        monitor.stop()
        if done:
            monitor.record(done)     # the poll that saw every job final
        if fault_end is not None:
            outcome.recovery_s = monitor.recovery_s(fault_end)
        final = done or cluster.try_jobs() or {}
        outcome.jobs = [check_job(cluster, final[j], refs) if j in final else
                        JobVerdict(j, "?", 0, 0, "", ["missing from status"]) for j in jobs]
        for verdict in outcome.jobs:
            if verdict.id == outcome.corrupted and verdict.state == "failed" \
                    and "corrupt" not in verdict.reason:
                verdict.problems.append("failed after its checkpoint was corrupted, but the "
                                        f"reason does not say so: {verdict.reason!r}")
        outcome.violations = _violations(cluster.lock_dir)
    except Exception as err:  # noqa: BLE001 - a harness failure is the outcome's error
        outcome.errors.append(f"{type(err).__name__}: {err}")
    finally:
        if monitor is not None:
            monitor.stop()
        cluster.stop()
        outcome.wall_s = time.monotonic() - started
        (root / "outcome.txt").write_text(outcome.report() + "\n")
    return outcome


def _all_final(cluster: NetnsCluster, jobs: list[str]) -> dict[str, pb.JobStatus] | None:
    got = cluster.try_jobs()
    if got and all(j in got and got[j].state in FINAL_STATES for j in jobs):
        return got
    return None


def _violations(lock_dir: Path) -> list[str]:
    from . import job as faults_job

    path = lock_dir / faults_job.VIOLATIONS_FILE
    return [ln for ln in path.read_text().splitlines() if ln.strip()] if path.exists() else []


def check_job(cluster: NetnsCluster, status: pb.JobStatus,
              refs: dict[int, list[list[float]]]) -> JobVerdict:
    """The must-hold list for one job (module docstring, Checks)."""
    from . import job as faults_job

    v = JobVerdict(status.id, status.state, status.steps_done, status.total_steps, status.reason)
    if status.state == "failed":
        if not status.reason.strip() or "\n" in status.reason.strip():
            v.problems.append(f"failed without a one-line reason: {status.reason!r}")
        return v
    if status.state != "done":
        v.problems.append(f"ended {status.state!r}, not done or failed")
        return v
    total = status.total_steps
    if status.steps_done != total:
        v.problems.append(f"done with steps_done {status.steps_done} != total_steps {total}")
    finals = sorted((cluster.result_dir / status.id).glob("final-*.json"))
    for path in sorted((cluster.checkpoints / status.id).rglob(faults_job.STATE_FILE)):
        try:
            if faults_job.read_state(path)["steps"] == total:
                finals.append(path)
        except faults_job.StateError:
            continue
    if not finals:
        v.problems.append(f"no final state of {total} steps (no result file, no checkpoint)")
    ref = refs[total]
    for path in finals:
        where = path.relative_to(cluster.root)
        try:
            body = faults_job.read_state(path)
        except faults_job.StateError as err:
            v.problems.append(str(err))
            continue
        got = _params(body)
        diff = max(abs(a - b) for p, q in zip(got, ref) for a, b in zip(p, q))
        if diff > TOLERANCE:
            v.problems.append(f"{where}: parameters differ from the reference run by {diff:.3g}")
        v.problems += [f"{where}: {p}" for p in log_problems(body["log"], total)]
    return v


def log_problems(lines: Sequence[str], total: int) -> list[str]:
    """What is wrong with a step log that should hold steps 1..total once each."""
    seen: dict[int, list[str]] = {}
    for line in lines:
        seen.setdefault(int(line.split()[0]), []).append(line)
    problems = []
    twice = {k: ls for k, ls in seen.items() if len(ls) > 1}
    if twice:
        shown = "; ".join(" | ".join(ls) for _, ls in sorted(twice.items())[:3])
        problems.append(f"{len(twice)} steps trained more than once "
                        f"(steps {min(twice)}..{max(twice)}), e.g. {shown}")
    missing = [k for k in range(1, total + 1) if k not in seen]
    if missing:
        problems.append(f"{len(missing)} steps missing from the log, e.g. {missing[:5]}")
    extra = sorted(k for k in seen if not 1 <= k <= total)
    if extra:
        problems.append(f"steps outside 1..{total} in the log: {extra[:5]}")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["proxy"]:
        return proxy_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m tests.faults.netns",
                                     description="Run one fault scenario and print its outcome.")
    parser.add_argument("fault", choices=["none", *FAULTS])
    parser.add_argument("--root", type=Path, help="keep the cluster's files here")
    args = parser.parse_args(argv)
    reason = netns_unavailable()
    if reason:
        print(f"skipped: {reason}")
        return 0
    root = args.root or Path(tempfile.mkdtemp(prefix="gavelfaults-"))
    refs = references(Setup().total_steps, root / "references")
    outcome = run_fault(args.fault, root / "cluster", refs)
    print(outcome.report())
    print(json.dumps({"skipped": outcome.skipped, "lost": outcome.lost,
                      "recovery_s": outcome.recovery_s, "wall_s": round(outcome.wall_s, 1),
                      "problems": outcome.problems}, indent=1))
    return 1 if outcome.problems else 0


if __name__ == "__main__":
    sys.exit(main())
