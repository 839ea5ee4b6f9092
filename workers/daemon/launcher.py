"""Launch a job's ranks as subprocesses under a lease, kill what outlives it, and say how
each job's processes ended (thesis §5.6; docs/runtime.md, protocol).

One process per GPU (rank) the job holds on this server, each in its own session so a kill
takes its whole process tree. A job's environment carries its ``JobContext`` (the GAVEL_*
variables GavelIterator reads, ``gavelsched.jobenv``) plus torchrun-style
LOCAL_RANK/MASTER_ADDR/MASTER_PORT, and CUDA_VISIBLE_DEVICES = the job's GPUs on this server.
"""

from __future__ import annotations

import logging
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gavelsched import checkpoints
from gavelsched.jobenv import EMULATE_STEPS_PER_S_VAR, JobContext, without_worker_token

from . import leftovers
from .logfiles import log_stem

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
TERM_WAIT_S = 3.0      # SIGTERM, then SIGKILL this long after


@dataclass(frozen=True)
class LaunchSpec:
    """Everything needed to start one job's ranks on this server (from a RunJob)."""

    job_id: str
    round: int
    job_type: str
    argv: tuple[str, ...]           # the command, already resolved
    gpus: tuple[int, ...]
    rank: int
    world_size: int
    master_addr: str
    master_port: int
    total_steps: int
    steps_done: int
    max_seconds: float              # the lease's time limit, since the processes started
    checkpoint_dir: str
    scheduler_address: str
    env: Mapping[str, str] = field(default_factory=dict)
    emulate_steps_per_s: float | None = None
    # per local rank, for a job split with virtual nodes (emulation.split_steps_per_s)
    rank_steps_per_s: tuple[float | None, ...] = ()
    generation: int = 0             # the run's generation (gavelsched.checkpoints)
    partner: str = ""               # the job it shares its GPUs with (a co-located pair)

    def job_context(self, local_rank: int) -> JobContext:
        """What this server's ``local_rank`` is told; the server id, token file and TLS CA
        are left to the worker's shared context (``jobenv.worker_env``)."""
        pace = self.rank_steps_per_s[local_rank] if self.rank_steps_per_s else \
            self.emulate_steps_per_s
        return JobContext(
            scheduler=self.scheduler_address, job_id=self.job_id, job_type=self.job_type,
            round=self.round, total_steps=self.total_steps, steps_done=self.steps_done,
            checkpoint_dir=self.checkpoint_dir, server_id=-1, rank=self.rank + local_rank,
            world_size=self.world_size, emulate_steps_per_s=pace or None,
            generation=self.generation)


@dataclass(frozen=True)
class JobExit:
    """How a job's processes on this server ended (becomes a RoundReportRequest)."""

    job_id: str
    round: int
    rank: int
    steps: int                      # absolute steps in the job's progress file; -1: unknown
    seconds: float
    exit_code: int
    failed: bool
    reason: str
    generation: int = 0

    @classmethod
    def unstarted(cls, spec: LaunchSpec, reason: str, *, failed: bool = False,
                  code: int = 0) -> JobExit:
        """The exit of a launch that never started (dropped, superseded, or failed)."""
        return cls(spec.job_id, spec.round, spec.rank, -1, 0.0, code, failed, reason,
                   spec.generation)


@dataclass
class _Running:
    spec: LaunchSpec
    procs: list                     # what ``ranks.start`` returned: one per rank
    stderr_paths: list[Path]
    started: float
    deadline: float
    round: int
    kill_reason: str = ""
    killed_at: float | None = None
    failed: bool = False


def job_env(spec: LaunchSpec, local_rank: int, context: Mapping[str, str]) -> dict[str, str]:
    """The environment of one rank: this machine's, then the worker's ``context`` (shared
    by every job: ``jobenv.worker_env``), the job's own ``env``, then the rank's
    ``JobContext`` and torchrun-style variables over them (docs/runtime.md, protocol)."""
    env = dict(os.environ)
    env.update(context)
    env.update(spec.env)
    path = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = f"{REPO_ROOT}{os.pathsep}{path}" if path else str(REPO_ROOT)
    ctx = spec.job_context(local_rank)
    env.update(ctx.to_env())
    env.update({
        "LOCAL_RANK": str(local_rank),
        "MASTER_ADDR": spec.master_addr or "127.0.0.1",
        "MASTER_PORT": str(spec.master_port or 29500),
        "CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in spec.gpus),
    })
    if ctx.emulate_steps_per_s is None:
        env.pop(EMULATE_STEPS_PER_S_VAR, None)    # no pace here, whatever the machine's says
    return without_worker_token(env)


def command_for(workload: str, command: str) -> tuple[str, ...]:
    """``python -m workers.workloads.<workload>``, or the job's shell command."""
    if command:
        return ("/bin/sh", "-c", command)
    return (sys.executable, "-m", f"workers.workloads.{workload}")


def last_line(path: Path, limit: int = 8192) -> str:
    """The last non-empty line of a file (a failed job's reason), at most 300 characters."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - limit))
            lines = [ln.strip() for ln in fh.read().decode(errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [ln for ln in lines if ln]
    return lines[-1][:300] if lines else ""


class Processes:
    """How the launcher starts a job's ranks: one subprocess each, in its own session so
    that a signal takes its whole process tree, its pids recorded for the next daemon
    (``leftovers``). A hollow worker starts threads instead (``workers.hollow.HollowRanks``): any
    object with these methods and ``poll_s``, whose ranks have ``poll()`` as ``Popen``'s."""

    # A subprocess's end is seen only by polling it: the monitor looks this often.
    poll_s = 0.1

    def watch(self, ended: threading.Event) -> None:
        """Ranks that can tell their end set ``ended`` as they end (``Launcher.wait``);
        these cannot."""

    def start(self, spec: LaunchSpec, env: dict[str, str], stem: Path,
              cwd: Path) -> subprocess.Popen:
        """One rank of ``spec`` with ``env``; stdout and stderr to ``stem``.out/.err."""
        with open(stem.with_suffix(".out"), "ab") as out, \
                open(stem.with_suffix(".err"), "ab") as err:
            return subprocess.Popen(spec.argv, env=env, stdout=out, stderr=err,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    cwd=cwd)

    @staticmethod
    def signal(proc: subprocess.Popen, sig: int) -> None:
        _signal(proc, sig)

    @staticmethod
    def record(work_dir: Path, job_id: str, procs: list[subprocess.Popen]) -> None:
        leftovers.record(work_dir, job_id, procs)

    @staticmethod
    def forget(work_dir: Path, job_id: str) -> None:
        leftovers.forget(work_dir, job_id)


class Launcher:
    """The jobs running on this server; ``poll()`` enforces leases and collects exits.

    ``ranks`` starts and signals each rank (default ``Processes``). ``context`` holds the
    environment shared by every job (``jobenv.worker_env``: server id, token file, TLS CA).
    Thread-safe: RPC handlers call launch/extend/kill, a monitor thread calls ``wait`` and
    ``poll`` in turn.
    """

    def __init__(self, work_dir: Path, grace_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic,
                 ranks: Processes | None = None) -> None:
        self.work_dir = Path(work_dir)
        self.ranks = ranks or Processes()
        self.grace_s = grace_s
        self._clock = clock
        self._lock = threading.Lock()
        self._running: dict[str, _Running] = {}
        self.context: dict[str, str] = {}
        self._look = threading.Event()      # the monitor looks now (``wait``)
        self.ranks.watch(self._look)

    # -- queries ---------------------------------------------------------------------------
    def running_jobs(self) -> list[str]:
        with self._lock:
            return sorted(self._running)

    def unkilled_jobs(self) -> list[str]:
        """The running jobs not yet told to stop."""
        with self._lock:
            return sorted(job for job, run in self._running.items() if run.killed_at is None)

    def runs(self) -> list[tuple[str, int, int]]:
        """(job, generation, round) of each job running here (the heartbeat lists them)."""
        with self._lock:
            return sorted((job, run.spec.generation, run.round)
                          for job, run in self._running.items())

    def running(self) -> list[tuple[str, int, int, tuple[int, ...]]]:
        """``runs`` with each run's GPUs, as the heartbeat and a registration list them (a
        restarted scheduler keeps a run on them: docs/runtime.md)."""
        with self._lock:
            return sorted((job, run.spec.generation, run.round, run.spec.gpus)
                          for job, run in self._running.items())

    def generation_of(self, job_id: str) -> int | None:
        with self._lock:
            run = self._running.get(job_id)
            return run.spec.generation if run else None

    def busy_gpus(self) -> dict[int, set[str]]:
        """The jobs running on each GPU in use (two: a co-located pair)."""
        with self._lock:
            busy: dict[int, set[str]] = {}
            for job, run in self._running.items():
                for g in run.spec.gpus:
                    busy.setdefault(g, set()).add(job)
            return busy

    def gpus_of(self, job_id: str) -> tuple[int, ...] | None:
        with self._lock:
            run = self._running.get(job_id)
            return run.spec.gpus if run else None

    # -- commands --------------------------------------------------------------------------
    def launch(self, spec: LaunchSpec) -> None:
        """Start one rank per GPU of ``spec`` (``ranks.start``); their output goes to files
        in work_dir (``logfiles.log_stem``)."""
        Path(spec.checkpoint_dir).mkdir(parents=True, exist_ok=True)
        procs, errs = [], []
        started = self._clock()
        try:
            for local, _gpu in enumerate(spec.gpus):
                stem = log_stem(self.work_dir, spec.job_id, spec.round, spec.rank + local)
                stem.parent.mkdir(parents=True, exist_ok=True)
                procs.append(self.ranks.start(spec, job_env(spec, local, self.context), stem,
                                              self.work_dir))
                errs.append(stem.with_suffix(".err"))
        except OSError:
            for proc in procs:
                self.ranks.signal(proc, signal.SIGKILL)
            raise
        self.ranks.record(self.work_dir, spec.job_id, procs)
        with self._lock:
            self._running[spec.job_id] = _Running(
                spec, procs, errs, started, started + spec.max_seconds + self.grace_s,
                spec.round)
        log.info("job %s round %d: launched %s on GPUs %s (ranks %d..%d of %d)", spec.job_id,
                 spec.round, shlex.join(spec.argv), list(spec.gpus), spec.rank,
                 spec.rank + len(spec.gpus) - 1, spec.world_size)

    def extend(self, job_id: str, generation: int, round_: int, max_seconds: float,
               round_seconds: float) -> bool:
        """A RunJob for the run of ``generation`` already running here: move its kill
        deadline (no relaunch). ``max_seconds`` counts from the processes' start; a
        per-round value (shorter than the time already held) extends the old deadline by
        ``round_seconds`` instead."""
        with self._lock:
            run = self._running.get(job_id)
            if run is None or run.kill_reason or run.spec.generation != generation:
                return False
            old = run.deadline - self.grace_s
            run.deadline = max(run.started + max_seconds, old + round_seconds) + self.grace_s
            run.round = max(run.round, round_)
        log.info("job %s: lease extended to round %d", job_id, round_)
        return True

    def kill(self, job_id: str, reason: str, generation: int = 0) -> bool:
        """SIGTERM the job's process groups (SIGKILL after TERM_WAIT_S); with a
        ``generation``, only when that run is the one here."""
        with self._lock:
            run = self._running.get(job_id)
            if run is None or (generation and run.spec.generation != generation):
                return False
            self._terminate(run, reason)
        return True

    def kill_all(self, reason: str) -> None:
        with self._lock:
            for run in self._running.values():
                self._terminate(run, reason)

    def _terminate(self, run: _Running, reason: str) -> None:
        if run.killed_at is None:
            run.kill_reason = reason
            run.killed_at = self._clock()
            for proc in run.procs:
                self.ranks.signal(proc, signal.SIGTERM)

    # -- monitoring ------------------------------------------------------------------------
    def wait(self) -> None:
        """The monitor's pause between ``poll`` calls: until a rank tells its end or
        ``wake`` is called, ``ranks.poll_s`` at most. One that comes after it returns
        ends the next."""
        if self._look.wait(self.ranks.poll_s):
            self._look.clear()

    def wake(self) -> None:
        """End the monitor's ``wait`` now (its worker stops)."""
        self._look.set()

    def poll(self) -> list[JobExit]:
        """Kill jobs past their deadline, escalate to SIGKILL, and return the jobs whose
        processes have all exited on this server."""
        now = self._clock()
        exits = []
        with self._lock:
            for job_id, run in list(self._running.items()):
                codes = [proc.poll() for proc in run.procs]
                if run.killed_at is None:
                    if any(c not in (None, 0) for c in codes):
                        run.failed = True   # one rank failed: the others cannot go on
                        self._terminate(run, "")
                    elif now > run.deadline:
                        self._terminate(run, f"killed: outlived its lease by more than "
                                             f"{self.grace_s:g} s")
                elif now - run.killed_at > TERM_WAIT_S:
                    for proc, code in zip(run.procs, codes):
                        if code is None:
                            self.ranks.signal(proc, signal.SIGKILL)
                if all(c is not None for c in codes):
                    del self._running[job_id]
                    self.ranks.forget(self.work_dir, job_id)
                    exits.append(self._exit(run, codes, now))
        return exits

    def _exit(self, run: _Running, codes: list[int | None], now: float) -> JobExit:
        bad = [(c, p) for c, p in zip(codes, run.stderr_paths) if c != 0]
        code, err_path = bad[0] if bad else (0, run.stderr_paths[0])
        failed = run.failed or (bool(bad) and not run.kill_reason)
        if failed:
            reason = last_line(err_path) or f"exit code {code}"
        else:
            reason = run.kill_reason
        try:
            commit = checkpoints.latest(run.spec.checkpoint_dir, run.spec.generation)
        except OSError:
            commit = None
        log.info("job %s round %d: exited %s after %.1f s%s", run.spec.job_id, run.round,
                 code, now - run.started, f" ({reason})" if reason else "")
        return JobExit(run.spec.job_id, run.round, run.spec.rank,
                       -1 if commit is None else commit.steps, now - run.started,
                       int(code or 0), failed, reason, run.spec.generation)


def _signal(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass

