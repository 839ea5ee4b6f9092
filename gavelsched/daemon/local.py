"""``LocalCluster``: a scheduler and typed worker daemons on loopback, as subprocesses
(``gavelsched scheduler`` / ``gavelsched worker``), and a client over real gRPC. Used by
``gavelsched local-cluster`` (the physical demo) and by the daemon tests.

Workers emulate their GPU type on a CPU-only machine (docs/runtime.md, Emulation); nothing
here imports ``workers``: they are separate processes.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from urllib.parse import quote

import grpc
import psutil
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ..rpc import pb, pb_grpc
from ..rpc.security import IN_USE, channel, write_token
from .jobs import FINAL as FINAL_STATES    # (re-exported: its older name)
from .leases import free_port

log = logging.getLogger(__name__)

__all__ = ["FINAL_STATES", "LocalCluster", "free_port", "kill_tree", "subprocess_env",
           "wait_until"]

# The project root: worker subprocesses import ``workers`` from it.
ROOT = Path(__file__).resolve().parent.parent.parent
PORT_KEYS = ("listen", "metrics_listen", "dashboard_listen")
LOOPBACK_ANY = "127.0.0.1:0"     # a ``*_listen`` whose port ``LocalCluster`` picks
PORT_TRIES = 3
LISTENING = b"scheduler listening on port"     # what ``gavelsched scheduler`` prints once up


def subprocess_env() -> dict[str, str]:
    """This environment, with the project root on PYTHONPATH."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


def wait_until(predicate: Callable[[], object], timeout: float, what: str, *,
               every: float = 0.2) -> object:
    """Poll ``predicate`` every ``every`` seconds until it returns something true."""
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


def _last_line(path: Path) -> str:
    """The last line of a log (empty if none)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return lines[-1] if lines else ""


def kill_tree(pid: int, sig: int = signal.SIGKILL) -> list[psutil.Process]:
    """Signal a process and every process below it (a worker and the jobs it launched),
    the children first (psutil: no ``pgrep`` needed, which slim images lack); the
    processes signalled."""
    try:
        parent = psutil.Process(pid)
        family = [*parent.children(recursive=True), parent]
    except psutil.NoSuchProcess:
        return []
    for proc in family:
        try:
            proc.send_signal(sig)
        except psutil.NoSuchProcess:
            pass
    return family


class LocalCluster:
    """A scheduler (its state in ``root/state``) and workers, all started from here;
    ``stop()`` ends every process this object started. With ``token`` (``gavelsched
    local-cluster`` passes a fresh random one), it is written to ``root/token`` (mode 0600)
    and every daemon and client here uses it; without, the daemons serve loopback
    unauthenticated (each logs a notice). ``verbosity``: each daemon logs one level more
    (DEBUG at 1) or, below 0, less per step (``gavelsched -v``/``-q``)."""

    def __init__(self, root: Path, *, policy: str = "max_min_fairness_perf",
                 round_seconds: float = 6.0, heartbeat_seconds: float = 1.0,
                 token: str | None = None, config: Mapping | None = None,
                 verbosity: int = 0) -> None:
        self.root = Path(root).resolve()   # what goes in its config and flags is absolute
        self.root.mkdir(parents=True, exist_ok=True)
        self.token = token
        self.token_file: Path | None = None
        data = {"policy": policy, "round_seconds": round_seconds,
                "state_dir": str(self.root / "state"), "heartbeat_seconds": heartbeat_seconds,
                **(config or {})}
        # The loopback ports picked here (``listen`` unless given; a ``*_listen`` given as
        # port 0): known before the start, kept across restarts, and picked again if
        # another process takes one before the scheduler binds it (``start_scheduler``).
        self._picked = [key for key in PORT_KEYS
                        if data.get(key, LOOPBACK_ANY if key == "listen" else None)
                        == LOOPBACK_ANY]
        if token:
            self.token_file = self.root / "token"
            write_token(self.token_file, token)          # mode 0600: this user only
            data["auth_token_file"] = str(self.token_file)
        self.config_path = self.root / "cluster.yaml"
        self.log_flags = ["-v"] * verbosity if verbosity > 0 else ["-q"] * -verbosity
        self.scheduler: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        self._chan: grpc.Channel | None = None
        self._log_size_at_spawn = 0
        self._data = data
        self._pick_ports()

    # ---- processes ------------------------------------------------------------------------
    def _spawn(self, args: list[str], log_name: str, cwd: Path | None = None) -> subprocess.Popen:
        """``gavelsched ARGS`` (the daemons log INFO by default, ``verbosity`` moves it) in
        ``cwd``, its output appended to ``root/log_name``."""
        with open(self.root / log_name, "ab") as out:
            if log_name == "scheduler.log":
                self._log_size_at_spawn = out.tell()
            return subprocess.Popen([sys.executable, "-m", "gavelsched", *self.log_flags, *args],
                                    stdout=out, stderr=subprocess.STDOUT,
                                    env=subprocess_env(), cwd=cwd)

    def _pick_ports(self) -> None:
        """Free ports for the keys picked here, written into ``config_path``."""
        for key in self._picked:
            self._data[key] = f"127.0.0.1:{free_port()}"
        self.address = self._data["listen"]
        self.port = int(self.address.rpartition(":")[2])
        self.dashboard_address: str | None = self._data.get("dashboard_listen")
        metrics = self._data.get("metrics_listen")
        self.metrics_port = int(metrics.rpartition(":")[2]) if metrics else None
        self.config_path.write_text(yaml.safe_dump(self._data))
        if self._chan is not None:     # (one to the port given up)
            self._chan.close()
            self._chan = None

    def start_scheduler(self, timeout: float = 60.0, *, cwd: Path | None = None,
                        config: str | None = None) -> LocalCluster:
        """The scheduler, run in ``cwd`` with ``--config config`` (default: the absolute
        ``config_path``; a relative one is taken from ``cwd``). A port picked here that
        another process took meanwhile is picked again (at most ``PORT_TRIES`` times)."""
        tries = PORT_TRIES if config is None and self._picked else 1
        while True:
            tries -= 1
            self.scheduler = self._spawn(
                ["scheduler", "--config", config or str(self.config_path)],
                "scheduler.log", cwd)
            try:
                return self.wait_serving(timeout)
            except RuntimeError:
                if not tries or IN_USE not in _last_line(self.root / "scheduler.log"):
                    raise
            self._pick_ports()

    def wait_serving(self, timeout: float = 60.0) -> LocalCluster:
        """Wait until the scheduler just started says it listens (in ``scheduler.log``,
        past what earlier starts wrote: another process on its port must not pass for it)
        and serves; RuntimeError if it exited."""
        log_path = self.root / "scheduler.log"
        since = self._log_size_at_spawn

        def listening() -> bool:
            with open(log_path, "rb") as log_file:
                log_file.seek(since)
                return LISTENING in log_file.read()
        wait_until(lambda: self.scheduler.poll() is not None or
                   (listening() and self.healthy()), timeout, "the scheduler to serve")
        if self.scheduler.poll() is not None:
            raise RuntimeError(f"the scheduler exited ({self.scheduler.returncode}: "
                               f"{_last_line(log_path)}); see {log_path}")
        return self

    def start_worker(self, worker_type: str, gpus: int = 1, *, emulation_speed: float = 1.0,
                     grace_s: float = 3.0, cwd: Path | None = None, work_dir: str | None = None,
                     token_file: str | None = None, extra_args: Sequence[str] = ()
                     ) -> subprocess.Popen:
        """A worker, run in ``cwd`` with ``--work-dir work_dir`` (default ``root/workerN``)
        and ``--token-file token_file`` (default the cluster's); relative ones are taken
        from ``cwd``. ``extra_args`` go on its command line (e.g. ``--emulate off``)."""
        n = len(self.workers)
        args = ["worker", "--scheduler", self.address, "--type", worker_type, "--gpus",
                str(gpus), "--listen", "127.0.0.1:0",
                "--work-dir", work_dir or str(self.root / f"worker{n}"),
                "--grace", str(grace_s), "--emulation-speed", str(emulation_speed)]
        token_file = token_file or (str(self.token_file) if self.token_file else None)
        if token_file:
            args += ["--token-file", token_file]
        args += list(extra_args)
        proc = self._spawn(args, f"worker{n}.log", cwd)
        self.workers.append(proc)
        return proc

    def kill9_scheduler(self) -> None:
        assert self.scheduler is not None
        self.scheduler.send_signal(signal.SIGKILL)
        self.scheduler.wait()

    def kill9_worker(self, proc: subprocess.Popen) -> None:
        """The machine dies: the worker and the jobs it launched."""
        kill_tree(proc.pid)
        proc.wait()

    def stop(self, grace_s: float = 5.0) -> None:
        """Ask every process to stop (SIGTERM), then kill what is left."""
        procs = [p for p in (*self.workers, self.scheduler) if p is not None and p.poll() is None]
        family = [p for proc in procs for p in kill_tree(proc.pid, signal.SIGTERM)]
        deadline = time.monotonic() + grace_s
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                kill_tree(proc.pid)
                proc.wait()
        # and the jobs below the workers (a job saving on SIGTERM wrote into a temp dir
        # being removed): nothing this cluster started runs once ``stop`` returns
        ours = {proc.pid for proc in procs}
        _, alive = psutil.wait_procs([p for p in family if p.pid not in ours],
                                     timeout=max(0.1, deadline - time.monotonic()))
        for job in alive:
            try:
                job.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(alive, timeout=grace_s)
        if self._chan is not None:
            self._chan.close()
            self._chan = None

    @property
    def dashboard_url(self) -> str | None:
        """The dashboard's address (with ``?token=`` when the cluster has one), or None."""
        if not self.dashboard_address:
            return None
        query = f"?token={quote(self.token, safe='')}" if self.token else ""
        return f"http://{self.dashboard_address}/{query}"

    # ---- client ---------------------------------------------------------------------------
    @property
    def chan(self) -> grpc.Channel:
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

    def submit(self, request: pb.JobRequest) -> str:
        return pb_grpc.ClientToSchedulerStub(self.chan).Submit(request, timeout=30).job_id

    def status(self) -> pb.StatusResponse:
        return pb_grpc.ClientToSchedulerStub(self.chan).Status(pb.StatusRequest(), timeout=30)

    def jobs(self) -> dict[str, pb.JobStatus]:
        return {j.id: j for j in self.status().jobs}

    def alive_workers(self) -> int:
        return sum(1 for w in self.status().workers if w.alive)

    def wait_done(self, job_ids, timeout: float = 120.0) -> dict[str, pb.JobStatus]:
        def finished():
            jobs = self.jobs()
            return jobs if all(jobs[j].state in FINAL_STATES for j in job_ids) else None
        return wait_until(finished, timeout, f"jobs {list(job_ids)} to finish")
