"""How tasks run in the simulator: throughput x time arithmetic (thesis §5.6: a micro-task
runs for its lease; a run on new workers first pays its preemption overhead, the
checkpoint saved and restored). No clock and no core: ``engine`` runs a round's tasks
through these and hands the core what they did.

Pure functions of a round's ``TaskBatch``, and ``Ran``, the tasks as run."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set as AbstractSet
from itertools import chain, compress
from operator import itemgetter
from typing import NamedTuple

import numpy as np

from gavelsched.mechanism.loops import compiled_steps
from traces import TraceJob


class Ran(NamedTuple):
    """Tasks of a round as run: ``seconds`` each held its workers from ``start`` seconds
    into the round (its ``pause`` first: the start-up of a fresh run), ``steps`` (k, 2)
    each member made."""

    batch: object
    seconds: np.ndarray
    steps: np.ndarray
    pause: np.ndarray
    start: np.ndarray

    def plus(self, more: Ran) -> Ran:
        cat = np.concatenate
        return Ran(self.batch.plus(more.batch), cat([self.seconds, more.seconds]),
                    cat([self.steps, more.steps]), cat([self.pause, more.pause]),
                    cat([self.start, more.start]))

    def never_started(self, mask: np.ndarray) -> Ran:
        """The tasks of ``mask`` never start: no time held, no start-up, no steps."""
        return self._replace(
            seconds=np.where(mask, 0.0, self.seconds), pause=np.where(mask, 0.0, self.pause),
            steps=np.where(mask[:, None], 0, self.steps).astype(self.steps.dtype))

    def _finishing(self) -> np.ndarray:
        return finishing(self.batch, self.steps).any(axis=1)

    def freed(self, R: float) -> dict[float, list[int]]:
        """Seconds into the round -> the workers freed then by a task whose job finished
        before the round's end (a run ahead of the clock, before its start: at 0)."""
        ends = self.start + self.seconds
        out: dict[float, list[int]] = {}
        for i in np.flatnonzero(self._finishing() & (ends < R)).tolist():
            out.setdefault(max(0.0, float(ends[i])), []).extend(self.batch.workers[i])
        return out

    def exiting(self, exits: Sequence[float]) -> dict[int, float]:
        """Worker -> how long the process of the finished job on it takes to exit after
        its last step (``SimConfig.exit_s``; ``exits`` by job index)."""
        batch = self.batch
        return {w: max(exits[int(m)] for m in batch.members[i])
                for i in np.flatnonzero(self._finishing()).tolist() for w in batch.workers[i]}


# The step counts the compiled ``task_seconds`` and ``finished_members`` read (a round's
# integers, or fractions of a step).
_COMPILED_STEPS = (np.dtype(np.int64), np.dtype(np.float64))


def finishing(batch, steps: np.ndarray) -> np.ndarray:
    """(k, 2): the member's ``steps`` finish its job (``batch.remaining``; 0: none)."""
    remaining = batch.remaining
    return (steps >= remaining) & (remaining > 0)


def finishes(batch, steps: np.ndarray, ends: np.ndarray,
             now: float) -> tuple[list[tuple[int, int]], dict[str, float]]:
    """The (task, member) whose ``steps`` finish their jobs (``finishing``), and each such
    job -> when: ``now`` + its task's end (``ends``)."""
    remaining = batch.remaining
    if (compiled_steps is not None and steps.dtype in _COMPILED_STEPS
            and remaining.dtype == steps.dtype):
        finish = compiled_steps.finished_members(steps, remaining)     # (the same, one loop)
    else:
        done = finishing(batch, steps)
        finish = (list(zip(*(x.tolist() for x in np.nonzero(done))))
                  if np.count_nonzero(done) else [])
    if not finish:
        return [], {}
    members = batch.members
    return finish, {members[i][m]: now + float(ends[i]) for i, m in finish}


def made_steps(members: Sequence[tuple[str, ...]], steps: np.ndarray):
    """The jobs among ``members`` that made steps (``steps[i, m] > 0``), first members
    then second (one pass each, not one per task)."""
    first = map(itemgetter(0), compress(members, (steps[:, 0] > 0).tolist()))
    second = steps[:, 1] > 0
    if not np.count_nonzero(second):
        return first
    return chain(first, (m[1] for m in compress(members, second.tolist()) if len(m) > 1))


def started_among(waiting: AbstractSet[str], members: Sequence[tuple[str, ...]],
                  steps: np.ndarray) -> Iterable[str]:
    """The jobs of ``waiting`` that made steps (of ``made_steps``), found from their side:
    a round's tasks are many, the jobs among them that never ran a few."""
    found = waiting.intersection(chain.from_iterable(members))
    if not found:
        return found
    try:            # each a single job's task, found by one scan of the tuples
        if all(steps[members.index((j,)), 0] > 0 for j in found):
            return found
    except ValueError:      # (a pair's member)
        pass
    return found.intersection(made_steps(members, steps))


def run_leases(batch, R: float, pause: np.ndarray | None, true: np.ndarray | None = None):
    """Run a round: (seconds each task held its workers, (k, 2) steps each member made).
    ``true``: the (k, 2) rates jobs really make (``SimConfig.priors``), when the core
    planned on others; a lease is then cut at its steps or at the round's end, whichever
    comes first."""
    steps = batch.steps
    rates = batch.rates
    # (a rate near the largest float makes a round's steps inf: the lease's steps stand)
    if true is not None:
        with np.errstate(over="ignore"):
            steps = np.minimum(steps, np.floor(true * R)).astype(steps.dtype)
        rates = true
    if pause is not None:
        # A task that starts on new workers first restores its checkpoint.
        with np.errstate(over="ignore"):
            budget = np.floor(rates * np.maximum(R - pause, 0.0)[:, None])
        steps = np.where(pause[:, None] > 0, np.minimum(steps, budget), steps).astype(steps.dtype)
    if (pause is None and compiled_steps is not None and steps.dtype in _COMPILED_STEPS
            and rates.dtype == np.float64):
        return compiled_steps.task_seconds(steps, rates), steps   # (the same arithmetic, one loop)
    # steps / rate, 0 where a member makes no progress (x / inf is 0: faster than
    # ``np.divide(..., where=rates > 0)``); the larger of the two members' times
    took = steps / np.where(rates > 0, rates, np.inf)
    if pause is not None:
        took = took + pause[:, None]
    return np.maximum(took[:, 0], took[:, 1]), steps


def startups_of(jobs: Sequence[TraceJob], overhead: Mapping[str, float]) -> list[float] | None:
    """Each job's preemption overhead: its own ``startup_s``, else its job type's
    (``SimConfig.preemption_overhead_s``); None when no job has any."""
    if not overhead and all(job.startup_s is None for job in jobs):
        return None
    return [job.startup_s if job.startup_s is not None else overhead.get(job.job_type, 0.0)
            for job in jobs]


def pauses(batch, startups: Sequence[float]) -> np.ndarray:
    """Preemption overhead of each task: 0 when its lease was extended, else the largest
    checkpoint save + restore time of its members (``startups_of``)."""
    out = np.zeros(len(batch))
    for i in np.nonzero(~batch.extended)[0].tolist():
        out[i] = max(startups[int(m)] for m in batch.members[i])
    return out
