"""Jobs that ended long ago leave the store too (``ended_jobs_stored_s``, the cluster YAML;
default 0: never), as slurmdbd's ``PurgeJobAfter`` bounds its accounting database: at
50,000 jobs a day, their rows, histories, usage and hosts grow the store by tens of
gigabytes a year, until its disk's reserve refuses every submission (``room``). A job is
deleted last: after it left memory (``ended_jobs_kept_s``) and its checkpoints went
(``checkpoint_retention_s``; the config refuses a shorter time), with every row of it:
``jobs``, ``events``, ``hosts``, ``usage``, measured rates. ``gavelsched usage`` then no
longer counts its runs, nor do the usage counters after a restart.

Deleted ``AT_ONCE`` jobs to a transaction, on the executor's thread, at each of the
retention's sweeps (once a minute: ``retention.Retention`` asks) while jobs are left to
delete, and every ``EVERY_S`` once none is."""

from __future__ import annotations

import logging

from .jobs import FINAL
from .store import Store

log = logging.getLogger(__name__)

AT_ONCE = 2000          # jobs deleted in one transaction (a few tens of milliseconds)
EVERY_S = 3600.0        # between purges that found nothing more to delete
# each table's column that names the job
JOB_COLUMN = {"events": "job_id", "hosts": "job_id", "usage": "job_id",
              "throughputs": "job_id", "pair_throughputs": "job_id", "jobs": "id"}


def purge(store: Store, before: float, at_once: int = AT_ONCE) -> int:
    """Delete at most ``at_once`` jobs that ended before ``before`` (the daemon's clock),
    oldest first, with every row of theirs, in one transaction; returns how many."""
    marks = ", ".join("?" * len(FINAL))
    with store.transaction() as db:
        ids = [(job_id,) for (job_id,) in db.execute(
            f"SELECT id FROM jobs WHERE state IN ({marks}) AND ended_s < ? ORDER BY seq "
            f"LIMIT ?", (*sorted(FINAL), before, at_once))]
        for table, column in JOB_COLUMN.items():
            db.executemany(f"DELETE FROM {table} WHERE {column} = ?", ids)
    return len(ids)


class Purge:
    """When ``purge`` runs: ``tick(now)`` on the executor's thread."""

    def __init__(self, store: Store, stored_s: float) -> None:
        self._store, self.stored_s = store, stored_s
        self._next = float("-inf")

    def tick(self, now: float) -> int:
        """Purge if due: at the next call again while a purge deleted all it may at once,
        else after ``EVERY_S``. Returns the jobs deleted."""
        if self.stored_s <= 0 or now < self._next:
            return 0
        deleted = purge(self._store, now - self.stored_s)
        self._next = now if deleted == AT_ONCE else now + EVERY_S
        if deleted:
            log.info("%d jobs that ended over %.0f s ago deleted from the store, with their "
                     "history, usage and hosts (ended_jobs_stored_s)", deleted, self.stored_s)
        return deleted
