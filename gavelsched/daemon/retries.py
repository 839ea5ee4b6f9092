"""Bounded retries (issue #17): which dead runs a job survives, and for how long.

- A run whose process died by a signal (the OOM killer's ``kill -9``, a node's SIGTERM) did
  not fail on its own: the job is tried again from its last checkpoint, after a backoff
  that doubles with each attempt (one round, two, four, ...), up to ``budget`` restarts.
  Then it fails, with the history of its attempts as its reason. A process that exits
  nonzero on its own (a bug, a corrupt checkpoint: ``gavelsched.jobenv.EXIT_JOB_FAILED``)
  fails the job at once, as before: running it again would fail again.
- A job whose runs make no progress (no new durable step) in ``no_progress_runs`` runs in a
  row fails, with that reason, instead of being relaunched every round for ever; a run
  whose process exits without ever reaching the scheduler counts as one (issue #29: a
  ``command: true`` job held a V100 for 40 rounds).
- A run whose process gave up on a scheduler that did not answer, or found its rendezvous
  port taken (``jobenv.EXIT_RUN_LOST``), or failed on a full disk (``room.says_disk_full``), is
  the cluster's trouble as often as the job's:
  an overloaded scheduler at 2,048 GPUs left hundreds to thousands of InitJobs a round
  unanswered for 30 s (BENCHMARKS.md, "Runs that gave up on InitJob"), which at five in a
  row would fail a job in thirteen at a 60% loss. Such runs count apart, and the job
  fails only after ``lost_runs`` of them in a row (a job whose processes can never reach
  the scheduler still ends); a run that reaches it starts that count again.

The attempts are kept in the store (``attempts/<job>``), so a restarted scheduler keeps
counting. Pure bookkeeping on a monotonic clock the caller passes in.
"""

from __future__ import annotations

import json
import logging
import signal
from dataclasses import asdict, dataclass

from .budgets import Tally
from .meta import ATTEMPTS
from .store import Store

log = logging.getLogger(__name__)

RESTART_BUDGET = 3          # restarts after a run killed by a signal
NO_PROGRESS_RUNS = 5        # runs in a row without a new durable step
LOST_RUNS = 20              # runs in a row that gave up on the scheduler (module docstring)
LOST_LOG_EVERY_S = 10.0     # the lost runs' log line, at most this often
SHELL_SIGNAL_BASE = 128     # /bin/sh reports a child killed by signal N as 128 + N


@dataclass(frozen=True)
class Attempt:
    round: int
    exit_code: int
    reason: str

    def line(self) -> str:
        return f"round {self.round}: {signal_name(self.exit_code) or self.reason}"


def signal_of(exit_code: int) -> int | None:
    """The signal that killed a process, from its exit code (a negative returncode, or a
    shell's 128 + N); None when it exited on its own."""
    if exit_code < 0:
        return -exit_code
    if SHELL_SIGNAL_BASE < exit_code <= SHELL_SIGNAL_BASE + 64:
        return exit_code - SHELL_SIGNAL_BASE
    return None


def signal_name(exit_code: int) -> str | None:
    sig = signal_of(exit_code)
    if sig is None:
        return None
    try:
        return f"killed by {signal.Signals(sig).name}"
    except ValueError:
        return f"killed by signal {sig}"


class Retries:
    def __init__(self, store: Store, round_seconds: float, *, budget: int = RESTART_BUDGET,
                 no_progress_runs: int = NO_PROGRESS_RUNS, lost_runs: int = LOST_RUNS) -> None:
        self._store, self._round_seconds = store, round_seconds
        self.budget, self.no_progress_runs, self.lost_runs = budget, no_progress_runs, lost_runs
        self._not_before: dict[str, float] = {}   # job -> monotonic end of its backoff
        self._idle_runs: dict[str, int] = {}      # job -> runs in a row without progress
        self._unreached: dict[str, int] = {}      # of them, the last runs with no InitJob
        self._lost: dict[str, tuple[int, str]] = {}   # job -> runs lost in a row, the last why
        self._lost_told = Tally(LOST_LOG_EVERY_S)     # (one log line a while, however many)

    def died(self, job_id: str, round_index: int, exit_code: int, reason: str,
             mono: float) -> str | None:
        """A run of the job died (its process on its one server failed, or a suspected
        rank's deadline passed with no server of the run found dead: ``health``). None: it
        is retried from its last checkpoint after a backoff; else the reason the job fails
        with."""
        if signal_of(exit_code) is None:
            return reason
        attempts = [*self._attempts(job_id), Attempt(round_index, exit_code, reason)]
        self._store.set_meta({ATTEMPTS.key(job_id): json.dumps([asdict(a) for a in attempts])})
        if len(attempts) > self.budget:
            return (f"failed after {len(attempts)} attempts: "
                    + "; ".join(a.line() for a in attempts))
        self._not_before[job_id] = mono + self._round_seconds * 2 ** (len(attempts) - 1)
        log.warning("job %s: %s; tried again from its last checkpoint (attempt %d of %d)",
                    job_id, reason, len(attempts) + 1, self.budget + 1)
        return None

    def backing_off(self, job_id: str, mono: float) -> bool:
        """The job waits out a backoff: it is not launched now."""
        until = self._not_before.get(job_id)
        if until is None or mono >= until:
            self._not_before.pop(job_id, None)
            return False
        return True

    def waiting(self, mono: float) -> dict[str, str]:
        """Why each job that waits out a backoff waits: the kill and the attempt to come
        (``status`` showed "waiting its turn")."""
        out = {}
        for job_id, until in self._not_before.items():
            if until > mono:
                attempts = self._attempts(job_id)
                last = attempts[-1] if attempts else None
                why = (signal_name(last.exit_code) or last.reason) if last else "its run died"
                out[job_id] = (f"retrying after its run was {why} (attempt "
                               f"{len(attempts) + 1} of {self.budget + 1}, in "
                               f"{until - mono:.0f} s)")
        for job_id, (lost, why) in self._lost.items():
            out.setdefault(job_id, f"launched again after its run was lost, {lost} in a row "
                                   f"of the {self.lost_runs} it may lose: {why}")
        return out

    def ran(self, job_id: str, progressed: bool, reached: bool = True,
            why: str = "") -> str | None:
        """A run of the job ended on its own; None, or the reason it fails with after
        ``no_progress_runs`` runs in a row without a new durable step. A run whose process
        never reached the scheduler (``reached`` False: it exited before its first
        ``InitJob``, e.g. a command with no ``GavelIterator``) counts as one too. A run
        whose process gave up on the scheduler (``why``: its reason) counts apart, up to
        ``lost_runs`` in a row (module docstring)."""
        if progressed:
            self._idle_runs.pop(job_id, None)
            self._unreached.pop(job_id, None)
            self._lost.pop(job_id, None)
            return None
        if why:
            lost = self._lost.get(job_id, (0, ""))[0] + 1
            self._lost[job_id] = (lost, why)
            self._say_lost(job_id, why)
            if lost < self.lost_runs:
                return None
            return (f"no progress in {lost} runs in a row, each lost through no fault of "
                    f"its own (the last: {why})")
        self._lost.pop(job_id, None)
        idle = self._idle_runs[job_id] = self._idle_runs.get(job_id, 0) + 1
        unreached = self._unreached[job_id] = \
            (self._unreached.get(job_id, 0) + 1) if not reached else 0
        if idle < self.no_progress_runs:
            return None
        if unreached >= idle:
            return (f"no progress in {idle} runs in a row: its process exited each time "
                    f"without reaching the scheduler (does it build a GavelIterator?)")
        return f"no progress in {idle} runs in a row (its process steps nothing)"

    def ended(self, job_id: str) -> None:
        """The job ended: nothing of it is kept (its backoff, its runs without progress or
        lost: what ``waiting`` reads for every picture)."""
        for counts in (self._not_before, self._idle_runs, self._unreached, self._lost):
            counts.pop(job_id, None)

    def _say_lost(self, job_id: str, why: str) -> None:
        """A warning for the runs lost (a full disk, a scheduler that did not answer), at
        most one every ``LOST_LOG_EVERY_S``: at 2,048 GPUs a full checkpoint disk loses
        every run that saves in the same round."""
        due = self._lost_told.add(job_id)
        if due is not None:
            runs, jobs = sum(due[0].values()), len(due[0])
            log.warning("%d run%s of %d job%s lost through no fault of their own, launched "
                        "again (the last: job %s, %s)", runs, "" if runs == 1 else "s", jobs,
                        "" if jobs == 1 else "s", job_id, why)

    def history(self, job_id: str) -> tuple[Attempt, ...]:
        return tuple(self._attempts(job_id))

    def _attempts(self, job_id: str) -> list[Attempt]:
        raw = self._store.get_meta(ATTEMPTS.key(job_id))
        return [Attempt(**a) for a in json.loads(raw)] if raw else []
