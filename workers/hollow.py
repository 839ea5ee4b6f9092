"""Hollow workers (issue #30; after Kubernetes' kubemark): worker daemons whose job
processes are emulated, so that one machine can drive a scheduler with thousands of GPUs.

A hollow worker is the real ``Worker`` (registration, heartbeats, RunJob and KillJob,
tokens, fencing, queued launches, and the leases and exits of ``Launcher``) given a
launcher whose ranks are threads of this process (``HollowRanks``) instead of
subprocesses. Each rank drives the real ``GavelIterator``, so it makes the calls a job's
process makes (InitJob, RenewLease, ReportSteps) and commits its checkpoints
(``gavelsched.checkpoints``) as the ``steps`` workload does: over an endless loader with
no model and no torch, paced to the worker type's emulated rate (docs/runtime.md,
"Emulation"). ``gavelsched worker --hollow N`` runs N of them in one process
(``start_fleet``); ``benchmarks/daemon_scale.py`` measures the scheduler against them.

A rank ends as the ``steps`` workload's process would:

- its lease ends, or the job is done: exit code 0;
- SIGTERM (a KillJob, a lease outlived by more than the grace): it stops before its next
  step or lease decision, without a checkpoint, exit code -15;
- SIGKILL (``launcher.TERM_WAIT_S`` after a SIGTERM it has not obeyed, e.g. while it waits
  on an RPC): it counts as exited at once, exit code -9, and its thread ends at its next
  step;
- ``fail_job`` (a missing or corrupt checkpoint, a fenced-out run): its one-line reason as
  the last line of its ``.err`` log (the round report's reason), exit code 3; any other
  exception likewise, exit code 1.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from gavelsched.iterator import GavelIterator
from gavelsched.jobenv import EMULATE_STEPS_PER_S_VAR, FailedExit

from .daemon.launcher import Launcher, LaunchSpec
from .daemon.worker import Worker, WorkerConfig

log = logging.getLogger(__name__)

# The pace of a job whose rate neither the table nor the scheduler knows: a hollow rank is
# never unpaced (it would spin a core).
DEFAULT_STEPS_PER_S = 1.0


class _Terminated(Exception):
    """The rank was signalled: it stops where a signalled process would have died."""


class HollowRank:
    """One rank of a job as a thread stepping GavelIterator; ``poll()`` as ``Popen``'s."""

    def __init__(self, spec: LaunchSpec, env: dict[str, str], err_path: Path,
                 ended: threading.Event) -> None:
        self.job_id = spec.job_id
        self._env, self._err, self._ended = env, err_path, ended
        self._term = threading.Event()
        self._lock = threading.Lock()
        self._code: int | None = None
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"hollow-{spec.job_id}-{spec.rank}")
        self._thread.start()

    def poll(self) -> int | None:
        """The exit code once the rank has ended, else None."""
        return self._code

    def signal(self, sig: int) -> None:
        """SIGTERM: stop at the next step; SIGKILL: ended now (the thread stops later)."""
        self._term.set()
        if sig == signal.SIGKILL:
            self._end(-signal.SIGKILL)

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    # -- the thread ------------------------------------------------------------------------
    def _elapsed(self) -> float:
        """The lease's clock (seconds since launch); raises once signalled, so a signalled
        rank makes no lease decision and no call after it."""
        if self._term.is_set():
            raise _Terminated
        return time.monotonic() - self._started

    def _loader(self) -> Iterator[None]:
        while not self._term.is_set():
            yield None
        raise _Terminated

    def _run(self) -> None:
        code, reason = 0, ""
        iterator = None
        try:
            iterator = GavelIterator(self._loader(), None, _nothing, _nothing, env=self._env,
                                     clock=self._elapsed, process_group=False)
            while not iterator.done:
                for _ in iterator:
                    pass
        except _Terminated:
            code = -signal.SIGTERM
        except FailedExit as err:
            code, reason = int(err.code), err.reason
        except SystemExit as err:
            code = err.code if isinstance(err.code, int) else 1
        except Exception as err:  # noqa: BLE001 - a process would die of it too
            code, reason = 1, f"{type(err).__name__}: {err}"
            log.exception("hollow job %s failed", self.job_id)
        finally:
            if iterator is not None:
                iterator.close()
        if reason:
            try:
                with open(self._err, "a") as fh:
                    fh.write(f"gavel: {' '.join(reason.split())}\n")
            except OSError:
                pass
        self._end(code)

    def _end(self, code: int) -> None:
        with self._lock:
            if self._code is None:
                self._code = code
        self._ended.set()               # (after the code: the monitor's poll sees it)


def _nothing(_directory: str) -> None:
    """The hollow job's checkpoint load and save: it has no state beyond its step count,
    which the commit holds (``gavelsched.checkpoints``)."""


class HollowRanks:
    """``launcher.Processes`` for hollow workers: each rank is a ``HollowRank``, which tells
    its end (``watch``), so the monitor polls them only for deadlines, once a second: at
    10 polls a second, the monitors of 256 hollow workers took a third of their process's
    CPU (BENCHMARKS.md, "The daemon at scale")."""

    poll_s = 1.0

    def __init__(self, default_steps_per_s: float = DEFAULT_STEPS_PER_S) -> None:
        self.default_steps_per_s = default_steps_per_s
        self._ended = threading.Event()

    def watch(self, ended: threading.Event) -> None:
        self._ended = ended

    def start(self, spec: LaunchSpec, env: dict[str, str], stem: Path,
              cwd: Path) -> HollowRank:
        env.setdefault(EMULATE_STEPS_PER_S_VAR, repr(self.default_steps_per_s))
        return HollowRank(spec, env, stem.with_suffix(".err"), self._ended)

    @staticmethod
    def signal(rank: HollowRank, sig: int) -> None:
        rank.signal(sig)

    @staticmethod
    def record(work_dir: Path, job_id: str, ranks: list[HollowRank]) -> None:
        """Nothing to record: no process outlives this one (``leftovers``)."""

    @staticmethod
    def forget(work_dir: Path, job_id: str) -> None:
        pass


def hollow_launcher(work_dir: Path, grace_s: float) -> Launcher:
    """The real ``Launcher`` (leases, kills, exits), its ranks threads."""
    return Launcher(work_dir, grace_s=grace_s, ranks=HollowRanks())


def hollow_worker(config: WorkerConfig) -> Worker:
    """A worker daemon whose jobs are hollow (``config.emulation`` paces them)."""
    return Worker(config, hollow_launcher(config.work_dir, config.grace_s))


def start_fleet(configs: Sequence[WorkerConfig],
                progress: Callable[[int], None] | None = None) -> list[Worker]:
    """Start a hollow worker per config (each registers with the scheduler and serves on its
    own port), in order; on a failure the ones started are stopped and it is raised."""
    fleet: list[Worker] = []
    try:
        for config in configs:
            worker = hollow_worker(config)
            worker.start()
            fleet.append(worker)
            if progress is not None:
                progress(len(fleet))
    except BaseException:
        stop_fleet(fleet, "a hollow worker failed to start")
        raise
    return fleet


def stop_fleet(fleet: Sequence[Worker], reason: str) -> None:
    """Stop every worker of the fleet at once (each kills and reports its jobs)."""
    threads = [threading.Thread(target=w.stop, args=(reason,), daemon=True) for w in fleet]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def leave_fleet(fleet: Sequence[Worker], timeout_s: float | None) -> None:
    """Drain every worker of the fleet at once (``Worker.leave``: SIGTERM)."""
    threads = [threading.Thread(target=w.leave, args=(timeout_s,), daemon=True)
               for w in fleet]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
