"""Checkpoint retention (issue #18): the checkpoints of a job that ended (done, failed or
cancelled), ``config.checkpoints / <job id>/``, are removed ``checkpoint_retention_s``
after it ended; 0 keeps them forever. A job that has not ended (queued, running,
preempted) is never touched, nor a folder that names no job of the store.

When a job ended: its ``ended_s`` (any final state; ``completion_s`` for a done job of an
older store), else when a sweep first saw it ended (a job that ended before ``ended_s``
was kept; after a restart it is timed again from then, which only keeps it longer).
``expired`` decides (pure); ``Retention`` sweeps at most once every ``SWEEP_EVERY_S`` and
deletes in a thread of its own, so that a slow shared file system never holds up the
executor. With the store, a retired job's meta rows go too (``meta.PER_JOB``: its
attempts and run generations), at once, on the executor's thread, and its measured
steps/s, alone and in pairs, at the store's next write (``Store.forget_throughputs_later``).
A job that ended without a checkpoint folder (it never saved one, or a hollow worker ran
it) is retired from the store the same way, once per process: before, only a folder's
job was, so such jobs' rows stayed forever and were read at every start.

The same sweep times a job's place in memory (issue #30, ``retired.py``): a job that ended
``ended_jobs_kept_s`` ago, with no run left, leaves it, its meta rows and measured rates
with it; the checkpoints of one that left are timed from its row (kept here, or read from
the store once after a restart).
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections import ChainMap
from collections.abc import Container, Iterable, Mapping
from pathlib import Path

from .config import DaemonConfig
from .jobs import Jobs
from .meta import job_keys
from .purge import Purge
from .rows import JobRow
from .store import Store

log = logging.getLogger(__name__)

SWEEP_EVERY_S = 60.0
READ_AT_ONCE = 500          # folders whose jobs are read from the store in one query


def expired(names: Iterable[str], jobs: Mapping[str, JobRow], seen: Mapping[str, float],
            now: float, retention_s: float) -> list[str]:
    """The ``names`` (job ids: checkpoint folders, or jobs) to retire at ``now``: those of
    jobs that ended ``retention_s`` or more ago, by ``completion_s`` or else by ``seen``
    (when a sweep first saw the job ended). Sorted; none when ``retention_s`` is 0."""
    if retention_s <= 0:
        return []
    due = []
    for name in sorted(names):
        job = jobs.get(name)
        if job is None or not job.final:
            continue
        ended = _ended(job)
        ended = ended if ended is not None else seen.get(name)
        if ended is not None and now - ended >= retention_s:
            due.append(name)
    return due


def _ended(job: JobRow, default: float | None = None) -> float | None:
    if job.ended_s is not None:
        return job.ended_s
    return job.completion_s if job.completion_s is not None else default


class Retention:
    """Removes expired checkpoints under ``root``, and the retired jobs' meta rows from
    ``store`` when given; ``tick`` is called by the executor's thread with its jobs and its
    clock (``DaemonExecutor.now``). With ``kept_s`` (``ended_jobs_kept_s``), a job that
    ended that long ago and has no run (``running``) leaves memory too (``Jobs.retire``),
    its checkpoints still timed from the store's row."""

    def __init__(self, root: Path, retention_s: float, store: Store | None = None, *,
                 kept_s: float = 0.0, stored_s: float = 0.0,
                 every_s: float = SWEEP_EVERY_S) -> None:
        """``stored_s``: jobs that ended that long ago leave the store too (``purge``)."""
        self.root, self.retention_s, self.every_s = Path(root), retention_s, every_s
        self.kept_s = kept_s
        self._purge = Purge(store, stored_s) if store is not None and stored_s > 0 else None
        self._store = store
        self._seen: dict[str, float] = {}
        self._retired: set[str] = set()     # jobs retired by this process (folder or not)
        self._gone: dict[str, JobRow] = {}  # folder -> its job, no longer in memory
        self._strays: set[str] = set()      # folders that name no job of the store
        self._next = float("-inf")
        self._remover: threading.Thread | None = None

    @classmethod
    def configured(cls, config: DaemonConfig, store: Store) -> Retention:
        """The daemon's: its checkpoints and their retention, how long an ended job stays in
        memory and in the store."""
        return cls(config.checkpoints, config.checkpoint_retention_s, store,
                   kept_s=config.ended_jobs_kept_s, stored_s=config.ended_jobs_stored_s)

    def tick(self, jobs: Mapping[str, JobRow], now: float,
             running: Container[str] = ()) -> list[str]:
        """At most once every ``every_s``, and not while a removal still runs: jobs ended
        ``kept_s`` ago leave memory, and the jobs that expired are retired, starting the
        removal of their checkpoints; returns the latter's ids."""
        busy = self._remover is not None and self._remover.is_alive()
        if now < self._next or busy or (self.retention_s <= 0 and self.kept_s <= 0):
            return []
        self._next = now + self.every_s
        if self._purge is not None:     # (jobs that left memory and their checkpoints long ago)
            self._purge.tick(now)
        folders = set(self._folders())
        for job_id, job in jobs.items():
            if job.final and _ended(job) is None:
                self._seen.setdefault(job_id, now)
        if self.kept_s > 0:             # (``jobs``: the daemon's ``Jobs``, which retire)
            self._forget(jobs, folders, now, running)  # type: ignore[arg-type]
        if self.retention_s <= 0:
            return []
        if self._store is not None:        # (its rows: of a job with no folder too)
            names = folders | {job_id for job_id, job in jobs.items()
                               if job.final and job_id not in self._retired}
        else:
            names = folders
        known = ChainMap(jobs, self._gone_rows(folders - jobs.keys()))
        due = expired(names, known, self._seen, now, self.retention_s)
        if due:
            for name in due:
                self._seen.pop(name, None)
                self._gone.pop(name, None)
            self._retired.update(due)
            if self._store is not None:
                self._store.delete_meta(key for name in due for key in job_keys(name))
                self._store.forget_throughputs_later(due)
            self._remover = threading.Thread(
                target=self._remove, args=([name for name in due if name in folders],),
                name="gavelsched-retention", daemon=True)
            self._remover.start()
        return due

    def _forget(self, jobs: Jobs, folders: set[str], now: float,
                running: Container[str]) -> None:
        """The jobs that ended ``kept_s`` ago and have no run leave memory: their meta rows
        and measured rates go from the store (what only a live job needs), the rows of those
        with checkpoints are kept here to time them."""
        old = [job_id for job_id, job in jobs.items() if job.final
               and now - _ended(job, self._seen.get(job_id, now)) >= self.kept_s
               and job_id not in running]
        if not old:
            return
        if self.retention_s > 0:
            self._gone.update((job_id, jobs[job_id]) for job_id in old if job_id in folders)
        for job_id in jobs.retire(old, now):
            self._seen.pop(job_id, None)
        self._retired.difference_update(old)     # (no longer among the jobs a sweep reads)
        if self._store is not None:
            self._store.delete_meta(key for name in old for key in job_keys(name))
            self._store.forget_throughputs_later(old)
        log.info("%d jobs that ended over %.0f s ago left the scheduler's memory "
                 "(ended_jobs_kept_s); the store keeps them", len(old), self.kept_s)

    def _gone_rows(self, names: set[str]) -> Mapping[str, JobRow]:
        """The rows of folders whose jobs are not in memory: kept as they left it, or read
        from the store once (after a restart); a folder of no job is a stray."""
        for gone in self._gone.keys() - names:      # (its folder was removed by hand)
            del self._gone[gone]
        unread = sorted(names - self._gone.keys() - self._strays)
        if unread and self._store is not None:
            for at in range(0, len(unread), READ_AT_ONCE):
                chunk = unread[at:at + READ_AT_ONCE]
                rows = self._store.jobs(where=(f"id IN ({', '.join('?' * len(chunk))})",
                                               tuple(chunk)))
                self._gone.update((row.id, row) for row in rows if row.final)
        self._strays.update(name for name in unread if name not in self._gone)
        return self._gone

    def join(self) -> None:
        """Wait for the removal in progress, if any."""
        if self._remover is not None:
            self._remover.join()

    def _folders(self) -> list[str]:
        try:
            return [e.name for e in os.scandir(self.root) if e.is_dir(follow_symlinks=False)]
        except OSError:
            return []

    def _remove(self, names: list[str]) -> None:
        for name in names:
            shutil.rmtree(self.root / name, ignore_errors=True)
            log.info("job %s: checkpoints removed (ended over %.0f s ago)", name,
                     self.retention_s)
