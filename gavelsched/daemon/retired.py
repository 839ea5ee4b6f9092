"""Jobs that ended long ago leave the daemon's memory (issue #30: a cluster of production
size ends tens of thousands of jobs a day). A job that ended ``ended_jobs_kept_s`` ago
(the cluster YAML; Slurm's ``MinJobAge``, Kubernetes' TTL after a job finished) leaves the
live table (``Jobs.retire``, timed by ``retention.Retention``), and a restart reads only
the jobs not ended and those that ended since (``live``). The store keeps its row, its
history, its usage and the servers that ran it: a call that names it (``history JOB``,
``logs``, ``after``, ``cancel``) finds it there (``Retired``), as ``sacct`` reads what
``squeue`` no longer shows.

Before, every job ever submitted stayed in memory: a restart read and checked them all
(500,000 ended jobs: 51 s and 1.6 GiB; BENCHMARKS.md, "A restart with a long history"), and
every picture of the daemon (``status``, the dashboard) copied them all.
"""

from __future__ import annotations

import re

from .jobs import FINAL, JobRow
from .store import EVERY, Store, Where

# A name that may be a job's or an array's id (``control.array_ids``): digits, and a copy's
# index; anything else names no job (and nothing of it reaches a GLOB pattern).
_JOB_NAME = re.compile(r"[0-9]{1,18}(_[0-9]{1,9})?")


def live(now: float, kept_s: float) -> Where:
    """The store's jobs a restart at ``now`` (the daemon's clock) reads: not ended, or ended
    ``kept_s`` ago or since (0: every job; a row with no end time, or one the door would
    refuse, is read too)."""
    if kept_s <= 0:
        return EVERY
    marks = ", ".join("?" * len(FINAL))
    return (f"state NOT IN ({marks}) OR ended_s IS NULL OR ended_s >= ?",
            (*sorted(FINAL), now - kept_s))


def of_jobs(where: Where) -> Where:
    """The rows of another table (``hosts``, ``usage``: by ``job_id``) of the jobs ``where``
    picks."""
    return where if where is EVERY else (f"job_id IN (SELECT id FROM jobs WHERE {where[0]})",
                                         where[1])


class Retired:
    """The store's rows of jobs no longer in memory, read when a call names one (executor
    thread: the store is its)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def rows(self, name: str) -> list[JobRow]:
        """The ended jobs ``name`` names in the store: the job, or an array's copies (in
        submission order); none for a name that is no job's."""
        if not _JOB_NAME.fullmatch(name):
            return []
        array = "" if "_" in name else " OR id GLOB ?"
        rows = self._store.jobs(where=(f"id = ?{array}",
                                       (name,) if "_" in name else (name, f"{name}_[0-9]*")))
        return [row for row in rows if row.final]

    def hosts(self, job_id: str) -> tuple[int, ...]:
        """The servers that ran a retired job (where its logs are)."""
        return self._store.hosts(where=("job_id = ?", (job_id,))).get(job_id, ())
