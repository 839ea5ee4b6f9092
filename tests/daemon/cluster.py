"""A loopback cluster for the daemon tests: the real scheduler (``gavelsched scheduler``) and
real worker daemons (``gavelsched worker``) as subprocesses, jobs of the light ``steps``
workload (real processes stepping GavelIterator), and a client over real gRPC."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

import gavelsched
from gavelsched.rpc import pb, pb_grpc
from gavelsched.rpc.security import channel

ROOT = Path(gavelsched.__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
JOB_TYPE = "A3C"           # 11 / 13 / 24 steps/s on k80 / p100 / v100 (catalog table)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(predicate: Callable[[], object], timeout: float = 90.0, what: str = "") -> object:
    """Poll ``predicate`` until it returns something true (a guard, not a timed check)."""
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        time.sleep(0.2)


def _kill_tree(pid: int) -> None:
    """SIGKILL a process and every process below it (it and its jobs were started here)."""
    children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True,
                              check=False)
    for child in children.stdout.split():
        _kill_tree(int(child))
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class Cluster:
    """One scheduler and its workers in ``root``; ``stop()`` ends every process it started."""

    def __init__(self, root: Path, *, token: str | None = None, round_seconds: float = 2.0,
                 heartbeat_seconds: float = 0.3, policy: str = "max_min_fairness_perf",
                 extra: dict | None = None) -> None:
        self.root = root
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.token = token
        self.token_file = None
        config = {"listen": self.address, "policy": policy, "round_seconds": round_seconds,
                  "state_dir": str(root / "state"), "heartbeat_seconds": heartbeat_seconds,
                  "min_resolve_interval_s": 0.0, **(extra or {})}
        if token:
            self.token_file = root / "token"
            self.token_file.write_text(token + "\n")
            config["auth_token_file"] = str(self.token_file)
        self.config_path = root / "cluster.yaml"
        self.config_path.write_text(yaml.safe_dump(config))
        self.scheduler: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        self._chan = None

    # ---- processes ------------------------------------------------------------------------
    def start_scheduler(self) -> Cluster:
        with open(self.root / "scheduler.log", "ab") as log:
            self.scheduler = subprocess.Popen(
                [sys.executable, "-m", "gavelsched", "-v", "scheduler", "--config",
                 str(self.config_path)], stdout=log, stderr=subprocess.STDOUT, env=ENV)
        wait_until(self.healthy, 60, "the scheduler to serve")
        return self

    def start_worker(self, worker_type: str, gpus: int = 1) -> subprocess.Popen:
        n = len(self.workers)
        cmd = [sys.executable, "-m", "gavelsched", "-v", "worker", "--scheduler",
               self.address, "--type", worker_type, "--gpus", str(gpus), "--listen",
               "127.0.0.1:0", "--work-dir", str(self.root / f"worker{n}"), "--grace", "3"]
        if self.token_file:
            cmd += ["--token-file", str(self.token_file)]
        with open(self.root / f"worker{n}.log", "ab") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=ENV)
        self.workers.append(proc)
        return proc

    def kill9_scheduler(self) -> None:
        assert self.scheduler is not None
        self.scheduler.send_signal(signal.SIGKILL)
        self.scheduler.wait()

    def kill9_worker(self, proc: subprocess.Popen) -> None:
        """The machine dies: the worker and the jobs it launched."""
        _kill_tree(proc.pid)
        proc.wait()

    def stop(self) -> None:
        for proc in [*self.workers, self.scheduler]:
            if proc is not None and proc.poll() is None:
                _kill_tree(proc.pid)
                proc.wait()
        if self._chan is not None:
            self._chan.close()

    # ---- client ---------------------------------------------------------------------------
    @property
    def chan(self):
        if self._chan is None:
            self._chan = channel(self.address, token=self.token)
        return self._chan

    def healthy(self) -> bool:
        try:
            reply = health_pb2_grpc.HealthStub(self.chan).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=2)
        except grpc.RpcError:
            return False
        return reply.status == health_pb2.HealthCheckResponse.SERVING

    def submit(self, total_steps: int, job_type: str = JOB_TYPE, **kw) -> str:
        request = pb.JobRequest(job_type=job_type, scale_factor=kw.pop("scale_factor", 1),
                                total_steps=total_steps, workload=kw.pop("workload", "steps"),
                                **kw)
        return pb_grpc.ClientToSchedulerStub(self.chan).Submit(request, timeout=10).job_id

    def status(self) -> pb.StatusResponse:
        return pb_grpc.ClientToSchedulerStub(self.chan).Status(pb.StatusRequest(), timeout=10)

    def jobs(self) -> dict[str, pb.JobStatus]:
        return {j.id: j for j in self.status().jobs}

    def alive_workers(self) -> int:
        return sum(1 for w in self.status().workers if w.alive)

    def wait_done(self, job_ids, timeout: float = 120.0) -> dict[str, pb.JobStatus]:
        def finished():
            jobs = self.jobs()
            return jobs if all(jobs[j].state in ("done", "failed", "cancelled")
                               for j in job_ids) else None
        return wait_until(finished, timeout, f"jobs {list(job_ids)} to finish")
