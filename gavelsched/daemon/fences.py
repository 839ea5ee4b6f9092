"""Run generations: the fencing tokens the scheduler issues (docs/runtime.md, "Fencing").

Every launch of a job gets a new generation from one counter that only grows, persisted
with the rest of the state, so it grows across restarts too. A job's newest generation is
the only one whose messages count: a report, a lease request or a heartbeat entry of an
older one is ignored (and logged) and never changes state (a heartbeat's entry for a
process whose exit its server has reported is ignored too: ``gone``), and its checkpoint
commits are never loaded, because a run resumes from exactly the commit the scheduler
counted: its steps and the generation that wrote it (``checkpoint``), saved together with
the step count. Runs on the executor thread; the store writes are the caller's
transaction.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable

from .meta import CHECKPOINT_GENERATION, GENERATION, NEXT_GENERATION
from .store import Store

log = logging.getLogger(__name__)

class StaleRun(RuntimeError):
    """A message from a run of an older generation than the job's newest."""

    def __init__(self, job_id: str, generation: int, newest: int) -> None:
        super().__init__(f"run generation {generation} of job {job_id} is stale (newest: "
                         f"{newest})" if newest else f"job {job_id} has no run")


class Fences:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._next = int(store.get_meta(NEXT_GENERATION.key(), "1"))
        self._issued: dict[str, int] = {}
        self._checkpoint: dict[str, int] = {}
        # job -> (its run generation, the servers that reported its processes exited):
        # the jobs waiting for their next run (``exited``, ``issue``)
        self._exited: dict[str, tuple[int, set[int]]] = {}

    def issue(self, job_id: str) -> int:
        """A new generation for a launch of ``job_id``: from now on only its messages
        count."""
        generation, self._next = self._next, self._next + 1
        self._issued[job_id] = generation
        self._exited.pop(job_id, None)      # (the older run's listings are stale)
        self._store.set_meta({NEXT_GENERATION.key(): self._next, GENERATION.key(job_id): generation})
        return generation

    def forget(self, job_ids: Iterable[str]) -> None:
        """Jobs that left memory (their meta keys went with them: ``retention``)."""
        for job_id in job_ids:
            self._issued.pop(job_id, None)
            self._checkpoint.pop(job_id, None)
            self._exited.pop(job_id, None)

    def current(self, job_id: str) -> int:
        """The job's newest generation (0: never launched, or no such job; not remembered,
        so that reports naming made-up jobs cannot grow the cache)."""
        generation = self._issued.get(job_id)
        if generation is None:
            generation = int(self._store.get_meta(GENERATION.key(job_id), "0"))
            if generation:
                self._issued[job_id] = generation
        return generation

    def exited(self, job_id: str, generation: int, server_id: int) -> None:
        """``server_id`` reported that its processes of run ``generation`` of the job (its
        newest, ``admits``; a job that goes on) exited: they are gone for good (``gone``),
        until the job's next launch."""
        seen = self._exited.get(job_id)
        if seen is None or seen[0] != generation:
            self._exited[job_id] = (generation, {server_id})
        else:
            seen[1].add(server_id)

    def gone(self, job_id: str, generation: int, server_id: int) -> bool:
        """Whether ``server_id`` reported the exit of its processes of run ``generation``
        of the job: a heartbeat that lists them was sent before that report (a worker lists
        its runs and reports their exits from two threads), and says nothing new."""
        seen = self._exited.get(job_id)
        return seen is not None and seen[0] == generation and server_id in seen[1]

    def admits(self, job_id: str, generation: int, what: str) -> bool:
        """Whether a message of run ``generation`` is about the job's newest run; logs the
        ones that are not (they are ignored)."""
        current = self.current(job_id)
        if generation == current and generation > 0:
            return True
        if current:
            log.warning("%s of job %s ignored: run generation %d is stale (newest: %d)",
                        what, job_id, generation, current)
        else:
            log.warning("%s of job %s ignored: the job has no run", what, job_id)
        return False

    def checkpoint(self, job_id: str) -> int:
        """The generation that wrote the commit the job's durable count refers to."""
        if job_id not in self._checkpoint:
            self._checkpoint[job_id] = int(self._store.get_meta(CHECKPOINT_GENERATION.key(job_id),
                                                                   "0"))
        return self._checkpoint[job_id]

    def took(self, job_id: str, generation: int, db: sqlite3.Connection) -> None:
        """The job's durable count now refers to a commit by ``generation`` (written in the
        caller's transaction ``db``, with the count)."""
        self._checkpoint[job_id] = generation
        self._store.set_meta({CHECKPOINT_GENERATION.key(job_id): generation}, db)
