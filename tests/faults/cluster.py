"""The fault harness's cluster (issue #17): the real scheduler and worker daemons, each on a
host of its own (``tests.faults.network``).

``NetnsCluster`` is ``LocalCluster`` (its config YAML, token, client calls and ``stop``) with
every daemon in its own namespace. The daemons use a real token (``--token-file``,
``auth_token_file``); the scheduler's ``checkpoint_dir`` (``ROOT/checkpoints``) is the
cluster's shared storage. The test process reaches the scheduler through
``tests.faults.proxy``. Workers get ``FAULTS_*`` in their environment, which their jobs
inherit (``tests.faults.job``).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import grpc

from gavelsched.daemon.local import LocalCluster, kill_tree, subprocess_env, wait_until
from gavelsched.rpc import pb
from gavelsched.rpc.security import channel, new_token
from traces import default_table
from traces.throughputs import dump_table

from .network import Net, namespace_pids

SCHEDULER_PORT = 50051
JOB_COMMAND = f"{sys.executable} -m tests.faults.job"


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
        dump_table(default_table().scaled(emulation_speed), priors)
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
            if log_name == "scheduler.log":         # (``wait_serving`` reads on from here)
                self._log_size_at_spawn = out.tell()
            return subprocess.Popen(["ip", "netns", "exec", ns, *argv], stdout=out,
                                    stderr=subprocess.STDOUT,
                                    env={**subprocess_env(), **(env or {})})

    def _start_proxy(self) -> None:
        if self.proxy is not None and self.proxy.poll() is None:
            return
        self.proxy = self._spawn_in(self.sched.ns, [
            sys.executable, "-m", "tests.faults.proxy", str(self.socket),
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
