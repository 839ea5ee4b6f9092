"""GavelIterator: the job side of Gavel's round-based leases (thesis §5.6).

A training script wraps its data loader::

    loader = GavelIterator(loader, None, load_checkpoint, save_checkpoint)
    for epoch in range(epochs):
        for batch in loader:
            ...
        if loader.done:
            break

Without ``GAVEL_SCHEDULER`` in the environment it is a no-op: iterating it iterates the
loader unchanged. Under a gavelsched worker it reads its context from the environment the
worker sets (``JobContext``), and:

- refuses to start a multi-rank job whose default process group is not initialized yet
  (``init_process_group`` comes first: the ranks' agreement below needs it);
- at start asks the scheduler for its lease (``InitJob``) and loads, through the user's
  ``load_checkpoint(directory)``, exactly the commit the scheduler counted as durable
  (``gavelsched.checkpoints``: a commit of a fenced-out run is never loaded); when it is
  missing or cannot be loaded, the job fails with a one-line reason (the last line of
  stderr) and a nonzero exit;
- counts the job's *absolute* steps (one step = one batch yielded on every rank);
- at ``renew_at`` of its lease (a fraction of the lease's time, or of its steps, whichever
  comes first) rank 0 asks for a renewal (``RenewLease``, as a future: training goes on
  while the scheduler finishes planning the next round);
- at the end of the lease all ranks agree on the same stop step (an all-reduce over the
  default process group); then the saving ranks write through
  ``save_checkpoint(directory)`` into one staging directory, rank 0 commits it (the step
  count beside it, fsync, an atomic rename: ``gavelsched.checkpoints``) and reports it as
  durable (``ReportSteps(checkpointed=true)`` with its run generation). A run the scheduler
  has fenced out (a newer generation of the job was launched) stops at once with a
  one-line reason; once the scheduler took a commit, the older ones are deleted. An
  extended lease continues in the same process after that save (at most one round of
  progress can ever be lost). A renewal still unanswered at the lease's end is waited for
  after that save (a slow scheduler, ``lease_calls.RENEW_TIMEOUT_S``), and one that did
  not reach the scheduler is asked again then (a restarting one,
  ``lease_calls.RENEW_AGAIN_S``): extended, the run goes on in the same process;
  otherwise iteration stops and ``done`` is True. Reaching ``total_steps`` ends the job the
  same way. A lease that ends before any step was made since the last checkpoint (a run
  whose start-up took its whole round) saves nothing: the checkpoint already holds it.
- with ``GAVEL_EMULATE_STEPS_PER_S`` set, paces steps to that rate (GPU-type emulation on
  CPU-only machines, docs/runtime.md "Emulation").

The job contract it reads (``GAVEL_*`` environment, progress file, failure exit) is
``gavelsched.jobenv``'s; its calls to the scheduler, with their timeouts and retries, are
``gavelsched.lease_calls``'s. The lease state machine and the ranks' agreement change
together, so they stay in one file.
"""

from __future__ import annotations

import logging
import math
import os
import random
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

# The job contract (environment, progress file, failure exit, lease clock) is jobenv's;
# its names stay importable from here.
from gavelsched import checkpoints
from gavelsched.jobenv import (CHECKPOINT_DIR_VAR, EXIT_JOB_FAILED, PROGRESS_FILE, RENEW_AT_VAR,
                               WORLD_SIZE_VAR, JobContext, JobFailed, fail_job,
                               process_elapsed_s, read_progress, write_progress)
from gavelsched.lease_calls import BUSY_REPLY, NOT_REACHED, SchedulerCalls

__all__ = ["DEFAULT_RENEW_AT", "EXIT_JOB_FAILED", "PROGRESS_FILE", "GavelIterator",
           "JobContext", "JobFailed", "LeaseTerms", "Pacer", "process_elapsed_s",
           "read_progress", "write_progress"]

log = logging.getLogger(__name__)

DEFAULT_RENEW_AT = 0.95   # BENCHMARKS.md, "Preemption overhead": the renewal point
# A RenewLease that the scheduler was too busy to take (UNAVAILABLE, ``BUSY``: every seat
# for fleet calls taken) is asked again while the lease lasts, after a pause that doubles
# from the first to the last, each drawn at 50-150% (as ``lease_calls.INIT_PAUSES_S``: a
# burst of refused renewals must not come back as a burst). Read as "not renewed", it ended
# a run the plan kept, which then paid a restart (issue #30: at 2,048 GPUs a round's
# renewals were refused by the hundred). One that did not reach the scheduler (down,
# restarting) is not asked again while the lease lasts: with every run asking each few
# tenths of a second, a restart at 50,000 jobs failed 41 live servers in one run (0 in the
# runs without it), their heartbeats likely behind them. It is asked again after the
# lease's checkpoint, for a while (``lease_calls.RENEW_AGAIN_S``).
RENEW_PAUSES_S = (0.25, 1.0)
SYNC_INTERVAL_S = 0.25   # target seconds between the ranks' agreement all-reduces
CHECK_INTERVAL_S = 0.02  # the same for one process: how late a time limit may be noticed


# ---- the lease --------------------------------------------------------------------------

@dataclass(frozen=True)
class LeaseTerms:
    """A lease in the iterator's terms: absolute step limit, seconds since process start."""

    max_steps: int
    max_seconds: float
    round: int
    extended: bool = False

    @classmethod
    def from_pb(cls, lease: Any, total_steps: int) -> LeaseTerms:
        max_steps = int(lease.max_steps) if lease.max_steps > 0 else total_steps
        max_seconds = float(lease.max_seconds) if lease.max_seconds > 0 else math.inf
        return cls(min(max_steps, total_steps), max_seconds, int(lease.round),
                   bool(lease.extended))


class Pacer:
    """Hands out steps at an emulated GPU type's pace (docs/runtime.md, "Emulation").

    Step k after the origin is due at t0 + k / pace: it stands for a GPU step that takes
    1 / pace, so t seconds hold floor(pace x t) steps (no free first step: a short lease
    would look fast). A step asked for after its due time (a slow step, a checkpoint save,
    a busy machine) is handed out at once and becomes the new origin: later steps are not
    handed out in a burst to catch up, as a GPU that was held up does not catch up either
    (a burst made short measurement windows up to 8% faster than the pace).
    """

    def __init__(self, pace: float, now: float, steps: int) -> None:
        self.pace = pace
        self._origin = (now, steps)     # step ``steps + k`` is due at now + k / pace

    def delay(self, steps: int, now: float) -> float:
        """Seconds to wait before handing out step ``steps + 1`` (0: now)."""
        t0, s0 = self._origin
        due = t0 + (steps - s0 + 1) / self.pace
        if due >= now:
            return due - now
        self._origin = (now - 1.0 / self.pace, steps)   # late: this step is due now
        return 0.0


def _terms(ext: LeaseTerms | None) -> list[float]:
    """An extension as the ranks agree on it: (has one, max steps, max seconds or 0 for
    none, round)."""
    if ext is None:
        return [0.0, 0.0, 0.0, 0.0]
    return [1.0, float(ext.max_steps),
            float(ext.max_seconds) if math.isfinite(ext.max_seconds) else 0.0,
            float(ext.round)]


class _Ranks:
    """Agreement among the ranks of a data-parallel job: an elementwise MAX all-reduce over
    the default torch.distributed process group, or the identity for one process."""

    def __init__(self, process_group: bool = True) -> None:
        self._dist = None
        if process_group and "torch" in sys.modules:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
                self._dist = dist

    @property
    def distributed(self) -> bool:
        return self._dist is not None

    def max(self, values: list[float]) -> list[float]:
        if self._dist is None:
            return values
        import torch

        backend = self._dist.get_backend()
        device = "cuda" if backend == "nccl" else "cpu"
        tensor = torch.tensor(values, dtype=torch.float64, device=device)
        self._dist.all_reduce(tensor, op=self._dist.ReduceOp.MAX)
        return tensor.cpu().tolist()


class GavelIterator:
    """Wrap ``data_loader`` so that the job runs under gavelsched's leases (thesis §5.6).

    ``checkpoint_dir`` defaults to ``GAVEL_CHECKPOINT_DIR``; ``load_checkpoint(dir)`` and
    ``save_checkpoint(dir)`` are the user's (a few lines of ``torch.load``/``torch.save``).
    ``renew_at`` is the fraction of the lease at which rank 0 asks for a renewal (default
    ``GAVEL_RENEW_AT`` or DEFAULT_RENEW_AT; BENCHMARKS.md, "Preemption overhead").
    ``save_on_all_ranks`` makes every rank save
    (default: rank 0 only, the usual data-parallel practice; all ranks load).
    ``env`` (default ``os.environ``) holds the job's context, ``clock`` gives the seconds
    since its start (the lease's clock). ``process_group=False``: the ranks do not agree
    through torch.distributed even where torch is loaded; each follows its lease alone, as
    the ``steps`` workload's do (a hollow worker's threads, ``workers/hollow.py``).
    """

    def __init__(self, data_loader: Iterable, checkpoint_dir: str | os.PathLike | None = None,
                 load_checkpoint: Callable[[str], Any] | None = None,
                 save_checkpoint: Callable[[str], Any] | None = None, *,
                 renew_at: float | None = None, save_on_all_ranks: bool = False,
                 env: Mapping[str, str] | None = None,
                 clock: Callable[[], float] = process_elapsed_s,
                 process_group: bool = True) -> None:
        if renew_at is None:
            raw = (os.environ if env is None else env).get(RENEW_AT_VAR, "")
            try:
                renew_at = float(raw) if raw else DEFAULT_RENEW_AT
            except ValueError:
                renew_at = -1.0
        if not 0.0 < renew_at <= 1.0:
            raise ValueError(f"renew_at (or {RENEW_AT_VAR}) must be in (0, 1], got "
                             f"{renew_at!r}")
        self._loader = data_loader
        self._load = load_checkpoint
        self._save = save_checkpoint
        self._renew_at = renew_at
        self._save_all = save_on_all_ranks
        self._clock = clock
        self.done = False
        self.finished = False
        self.steps = 0
        self.checkpoints = 0
        try:
            self._ctx = JobContext.from_env(env)
        except JobFailed as err:
            fail_job(str(err))
        if self._ctx is None:
            self.checkpoint_dir = str(checkpoint_dir) if checkpoint_dir else None
            return
        directory = checkpoint_dir or self._ctx.checkpoint_dir
        if not directory:
            fail_job(f"no checkpoint directory: pass checkpoint_dir or set {CHECKPOINT_DIR_VAR}")
        self.checkpoint_dir = str(directory)
        self._ranks = _Ranks(process_group)
        if (self._ctx.world_size > 1 and process_group and "torch" in sys.modules
                and not self._ranks.distributed):
            fail_job(f"{WORLD_SIZE_VAR}={self._ctx.world_size} but the default process "
                     "group is not initialized: call torch.distributed.init_process_group "
                     "before building GavelIterator (docs/iterator.md)")
        try:
            self._client = SchedulerCalls(self._ctx)
            reply = self._client.init()
            self.total_steps = int(reply.total_steps) or self._ctx.total_steps
            self.steps = self._restore(int(reply.steps_done), int(reply.checkpoint_generation))
        except JobFailed as err:
            fail_job(str(err), err.exit_code)
        self._lease = LeaseTerms.from_pb(reply.lease, self.total_steps)
        self._lease_start = (self._clock(), self.steps)
        self._began = 0.0       # the clock at the end of the run's first step (0: none yet)
        self._durable = self.steps      # the count the checkpoint on disk holds
        self._pending: LeaseTerms | None = None
        self._renewal: Any = None       # rank 0's RenewLease in flight
        self._asked = False
        self._ask_after_save = False    # ... not reached, or refused as busy at the end
        self._asked_at = 0.0            # (monotonic) when the renewal in flight was sent
        self._ask_again_at = 0.0        # a renewal refused as busy is asked again from then
        self._renew_pause = RENEW_PAUSES_S[0]   # ... after this pause (doubling)
        self._save_s = 0.0
        self._next_sync = self.steps
        self._sync_k = 1
        self._last_sync = (self._clock(), self.steps)
        self._yielded = False
        self._it: Iterator | None = None
        self._pace = self._ctx.emulate_steps_per_s
        self._pacer = Pacer(self._pace, time.monotonic(), self.steps) if self._pace else None
        if self.steps >= self.total_steps:
            self.done = self.finished = True
        log.info("job %s rank %d: starts at step %d of %d, lease %s", self._ctx.job_id,
                 self._ctx.rank, self.steps, self.total_steps, self._lease)

    # -- start -------------------------------------------------------------------------------
    def _restore(self, durable: int, generation: int) -> int:
        """Load the commit the scheduler counted (``durable`` steps by ``generation``);
        the step count to resume from."""
        path = checkpoints.resolve(self.checkpoint_dir, durable, generation)
        if path is not None and self._load is not None:
            try:
                self._load(str(path))
            except Exception as err:  # noqa: BLE001 - any failure of the user's loader
                first = str(err).splitlines()[0] if str(err) else type(err).__name__
                raise JobFailed(f"corrupt checkpoint {path}: {first}") from None
        return max(0, durable)

    # -- iteration ---------------------------------------------------------------------------
    @property
    def standalone(self) -> bool:
        """True without a scheduler (no ``GAVEL_SCHEDULER``): iterating is the loader's."""
        return self._ctx is None

    def __len__(self) -> int:
        return len(self._loader)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator:
        if self._ctx is None:
            return iter(self._loader)
        self._it = iter(self._loader)
        self._yielded = False
        return self

    def __next__(self) -> Any:
        if self._yielded:
            self.steps += 1
            self._yielded = False
            if not self._began:     # throughput samples count from here: the restore and
                self._began = self._clock()   # the first, slower step are not steps/s
        if self.done:
            raise StopIteration
        if self.steps >= self._next_sync:
            self._sync_point()
            if self.done:
                raise StopIteration
        if self._pacer is not None:
            self._wait_for_pace()
        batch = next(self._it)  # type: ignore[arg-type]  # StopIteration ends the epoch
        self._yielded = True
        return batch

    def _wait_for_pace(self) -> None:
        assert self._pacer is not None
        delay = self._pacer.delay(self.steps, time.monotonic())
        if delay > 0:
            time.sleep(delay)

    # -- leases ------------------------------------------------------------------------------
    def _lease_fraction(self, now: float) -> float:
        t0, s0 = self._lease_start
        lease = self._lease
        by_time = (now - t0) / (lease.max_seconds - t0) if lease.max_seconds > t0 else 1.0
        span = lease.max_steps - s0
        by_steps = (self.steps - s0) / span if span > 0 else 1.0
        return max(by_time, by_steps)

    def _renewal_reply(self, at_end: bool, now: float) -> Any | None:
        """What the renewal in flight brought (it is done): ``SchedulerCalls.renewed``'s
        reply. One the scheduler was too busy to take (``BUSY_REPLY``) before the lease's
        end is asked again after a pause (``RENEW_PAUSES_S``), and reads None till then."""
        reply = self._client.renewed(self._renewal)
        self._renewal = None
        if reply is not BUSY_REPLY or at_end:
            return reply
        self._asked = False
        self._ask_again_at = now + self._renew_pause * random.uniform(0.5, 1.5)
        self._renew_pause = min(2.0 * self._renew_pause, RENEW_PAUSES_S[1])
        return None

    def _sync_point(self) -> None:
        """Decide, identically on every rank, whether the lease ends at this step."""
        now = self._clock()
        lease = self._lease
        ctx = self._ctx
        # Stop early enough that the final save ends by the lease's end (the last save's
        # duration is the estimate), unless the lease is known to be extended.
        margin = 0.0 if self._pending is not None else self._save_s
        time_up = now + margin >= lease.max_seconds
        at_end = time_up or self.steps >= lease.max_steps or self.steps >= self.total_steps
        if ctx.rank == 0 and self.steps < self.total_steps:
            if self._renewal is None and not self._asked and (at_end or (
                    now >= self._ask_again_at and self._lease_fraction(now) >= self._renew_at)):
                self._asked, self._asked_at = True, time.monotonic()
                self._renewal = self._client.renew(lease.round, self.steps, now)
            if self._renewal is not None and self._renewal.done():
                reply = self._renewal_reply(at_end, now)
                if reply is NOT_REACHED or reply is BUSY_REPLY:
                    self._ask_after_save = True
                else:
                    self._pending = self._extension(reply, lease.round, now)
        # Steps to the next agreement: about SYNC_INTERVAL_S of work, the same on every rank.
        # The rate is measured over the steps since the last check, at most the emulated
        # pace, and k at most doubles per check: the first steps (before pacing or warm-up
        # shows) can look arbitrarily fast, and one bad estimate must not skip the lease.
        t_last, s_last = self._last_sync
        rate = (self.steps - s_last) / (now - t_last) if now > t_last else 0.0
        if self._pace:
            rate = min(rate, self._pace)
        interval = SYNC_INTERVAL_S if self._ranks.distributed else CHECK_INTERVAL_S
        want_k = max(1, min(10_000, 2 * self._sync_k, int(rate * interval)))
        # rank 0's renewal is still open (in flight, or to be asked again): should the lease
        # end now, it is finished after the checkpoint (``_renewal_after_save``)
        still_open = self._pending is None and (self._renewal is not None
                                                or self._ask_after_save)
        agreed = self._ranks.max([float(time_up), float(-want_k), float(-lease.max_steps),
                                  *_terms(self._pending), float(still_open)])
        self._last_sync = (now, self.steps)
        max_steps = int(-agreed[2])
        if agreed[0] or self.steps >= max_steps or self.steps >= self.total_steps:
            extended = agreed[3] > 0 and self.steps < self.total_steps
            if self.steps > self._durable:      # else the checkpoint on disk holds it all
                self._checkpoint(lease.round, now)
            if not extended and agreed[7] and self.steps < self.total_steps:
                agreed[3:7] = self._ranks.max(_terms(self._renewal_after_save(lease.round)))
                extended, now = agreed[3] > 0, self._clock()
            if not extended:
                self.done = True
                self.finished = self.steps >= self.total_steps
                log.info("job %s rank %d: lease of round %d ends at step %d%s", ctx.job_id,
                         ctx.rank, lease.round, self.steps,
                         " (finished)" if self.finished else "")
                return
            self._lease = LeaseTerms(int(agreed[4]), agreed[5] or math.inf, int(agreed[6]),
                                     True)
            self._lease_start = (now, self.steps)
            self._pending, self._asked, self._ask_after_save = None, False, False
            self._renew_pause = RENEW_PAUSES_S[0]
            max_steps = self._lease.max_steps
            log.info("job %s rank %d: lease extended to round %d at step %d", ctx.job_id,
                     ctx.rank, self._lease.round, self.steps)
        self._sync_k = int(-agreed[1])
        self._next_sync = min(self.steps + self._sync_k, max_steps, self.total_steps)

    def _extension(self, reply: Any | None, round_: int, now: float) -> LeaseTerms | None:
        """The lease a renewal's ``reply`` extends this run to, or None. An extension must
        be for a later round than ``round_`` and reach past this point; the lease this
        process already holds, sent again, is not one."""
        if reply is None or not reply.extended or reply.round <= round_:
            return None
        ext = LeaseTerms.from_pb(reply, self.total_steps)
        return ext if ext.max_steps > self.steps and ext.max_seconds > now else None

    def _renewal_after_save(self, round_: int) -> LeaseTerms | None:
        """On rank 0, the renewal still open at the lease's end, finished once the lease's
        checkpoint is safe: the one in flight waited for (up to its deadline,
        ``lease_calls.RENEW_TIMEOUT_S``), or one not reached or refused as busy asked again
        (``SchedulerCalls.renew_waited``). Its extension, or None; the other ranks: None."""
        if self._ctx.rank != 0:
            return None
        reply = None if self._renewal is None else self._client.renewed(self._renewal)
        self._renewal = None
        waited = time.monotonic() - self._asked_at
        again = self._ask_after_save or reply is NOT_REACHED or reply is BUSY_REPLY
        if again:
            reply = self._client.renew_waited(round_, self.steps, self._clock())
        ext = self._extension(reply, round_, self._clock())
        log.warning("job %s: renewal answered after its checkpoint at step %d, %.1f s after it "
                    "was sent%s: %s", self._ctx.job_id, self.steps, waited,
                    " (asked again)" if again else "", f"extended to round {ext.round}" if ext
                    else "no answer" if reply is None else "not extended")
        return ext

    def _checkpoint(self, round_: int, now: float) -> None:
        """Save through the user's function into a staging directory, commit it, report it
        durable, and delete what it supersedes (``gavelsched.checkpoints``). A run the
        scheduler refuses (fenced out by a newer generation) ends the job's process."""
        ctx = self._ctx
        rank0 = ctx.rank == 0
        started = time.monotonic()
        root, gen = self.checkpoint_dir, ctx.generation
        if rank0:
            staging = checkpoints.begin(root, self.steps, gen)
        if self._save_all:
            self._ranks.max([0.0])              # the staging directory exists
            staging = checkpoints.staging_path(root, self.steps, gen)
        if (rank0 or self._save_all) and self._save is not None:
            self._save(str(staging))
        if self._save_all:
            self._ranks.max([0.0])              # every rank's files are written
        if rank0:
            checkpoints.commit(root, self.steps, gen, job_id=ctx.job_id, round=round_)
            taken = self._client.report(round_, self.steps, now, self._began)
            if taken is False:
                fail_job(f"fenced: run generation {gen} of job {ctx.job_id} is no longer "
                         f"the job's newest; its checkpoint at step {self.steps} is not used")
            if taken:
                checkpoints.prune(root, self.steps, gen)
        self._save_s = time.monotonic() - started
        self._durable = self.steps
        self.checkpoints += 1

    def close(self) -> None:
        """Close the connection to the scheduler (the process is about to exit)."""
        if self._ctx is not None:
            if self._renewal is not None:
                self._renewal.cancel()
            self._client.close()

