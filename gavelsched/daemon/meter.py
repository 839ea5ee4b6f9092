"""The meter (issue #28): every run that ends becomes one usage row in the store (who,
which entity, how many GPUs of which type, from when to when, at what price;
``accounting`` reports them), and each job's time run so far, which its time limit
(``max_runtime_s``) counts.

A run's time is its processes' wall time on their GPUs, from its start (its process's, or
its dispatch before that) to the report of its end. A job's time limit bounds every lease
it gets (``limit_lease``), so its process stops at its next checkpoint once it has run
that long; the run that ends there ends the job (``out_of_time``). The price of a run is
the price per GPU-hour of its type averaged over the run (a price trace may change it
while it runs; chapter 6 of the thesis, spot prices).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from ..rpc import pb
from .accounting import UsageRun
from .jobs import JobRow
from .retired import of_jobs
from .store import EVERY, Store, Where

# A job within this of its time limit (at most this fraction of the limit) is out of time:
# a run could make hardly a step in what is left.
TIME_LIMIT_SLACK_S = 1.0
SLACK_FRACTION = 0.05


class UsageSink(Protocol):
    """Where metered runs, and jobs that ended, are counted too (``metrics.DaemonMetrics``:
    Prometheus)."""

    def on_usage(self, run: UsageRun) -> None: ...

    def on_job_ended(self, state: str) -> None: ...

    def restore_usage(self, runs: Iterable[UsageRun]) -> None: ...


def usage_run(row: tuple) -> UsageRun:
    """A ``usage`` row of the store (``Store.usage``) as a ``UsageRun``."""
    job_id, _generation, *rest = row
    return UsageRun(job_id, *rest)


class Meter:
    """Usage rows and run seconds per job. ``prices(t)``: the price per GPU-hour of each
    type at time ``t`` of the daemon's clock; ``changes_after(t)``: when they next
    change (None: never); ``sink``: counts every run too, from the store's at start."""

    def __init__(self, store: Store, prices: Callable[[float], Mapping[str, float]],
                 changes_after: Callable[[float], float | None] = lambda t: None,
                 epoch_unix: float = 0.0, sink: UsageSink | None = None,
                 jobs: Where = EVERY) -> None:
        """``jobs``: the store's jobs whose run seconds are read (those in memory:
        ``retired.live``); the sink's totals are every run's (``Store.usage_sums``)."""
        self.store, self._prices, self._changes_after = store, prices, changes_after
        self._epoch, self._sink = epoch_unix, sink
        self._used: dict[str, float] = defaultdict(float)
        for row in store.usage(where=of_jobs(jobs)):
            self._used[row[0]] += row[7] - row[6]
        if sink is not None:
            sink.restore_usage(usage_run(row) for row in store.usage_sums())

    def reprice(self, prices: Callable[[float], Mapping[str, float]],
                changes_after: Callable[[float], float | None]) -> None:
        """New prices (a reload): runs that end from now on are priced by them."""
        self._prices, self._changes_after = prices, changes_after

    def ended(self, job: JobRow, generation: int, worker_type: str, gpus: int,
              start_s: float, end_s: float, share: float = 1.0) -> str | None:
        """A run of ``job`` on ``gpus`` GPUs of ``worker_type`` ran from ``start_s`` to
        ``end_s`` (the daemon's clock), ``share`` of their time its own (``UsageRun``): one
        usage row, written; the job's time grows. Returns why the job ends now
        (``out_of_time``), or None."""
        end_s = max(end_s, start_s)
        run = UsageRun(job.id, job.user, job.spec.entity or "", worker_type, max(1, gpus),
                       self._epoch + start_s, self._epoch + end_s,
                       self.mean_price(worker_type, start_s, end_s), share)
        self.store.add_usage((run.job_id, generation, run.user, run.entity, run.worker_type,
                              run.gpus, run.start_unix, run.end_unix, run.price, run.share))
        self._used[job.id] += end_s - start_s
        if self._sink is not None:
            self._sink.on_usage(run)
        return None if job.final else self.out_of_time(job)

    def mean_price(self, worker_type: str, start_s: float, end_s: float) -> float:
        """The price of ``worker_type`` averaged over ``[start_s, end_s]``."""
        if end_s <= start_s:
            return float(self._prices(start_s).get(worker_type, 0.0))
        total, t = 0.0, start_s
        while t < end_s:
            nxt = self._changes_after(t)
            stop = end_s if nxt is None else min(end_s, max(nxt, math.nextafter(t, end_s)))
            total += self._prices(t).get(worker_type, 0.0) * (stop - t)
            t = stop
        return total / (end_s - start_s)

    def run_s(self) -> Mapping[str, float]:
        """Seconds the ended runs of each job that ran ran."""
        return self._used

    def forget(self, job_ids: Iterable[str]) -> None:
        """Jobs that left memory: their run seconds (the store keeps their usage rows)."""
        for job_id in job_ids:
            self._used.pop(job_id, None)

    def used_s(self, job_id: str) -> float:
        """Seconds the job's ended runs ran."""
        return self._used.get(job_id, 0.0)

    def allowed_s(self, job: JobRow) -> float | None:
        """Seconds the job may still run (None: no limit)."""
        if job.max_runtime_s is None:
            return None
        return max(0.0, job.max_runtime_s - self.used_s(job.id))

    def out_of_time(self, job: JobRow) -> str | None:
        """The reason a job that has run to its limit fails with, or None."""
        left = self.allowed_s(job)
        if left is None or left > min(TIME_LIMIT_SLACK_S, SLACK_FRACTION * job.max_runtime_s):
            return None
        return f"time limit ({self.used_s(job.id):.0f}s run of max_runtime_s " \
               f"{job.max_runtime_s:g})"


def limit_lease(lease: pb.Lease, allowed_s: float | None) -> pb.Lease:
    """``lease`` with its time bound no later than ``allowed_s`` after its process started
    (the run's share of the job's time limit; None: unchanged)."""
    if allowed_s is None or lease.max_seconds <= allowed_s:
        return lease
    out = pb.Lease()
    out.CopyFrom(lease)
    out.max_seconds = allowed_s
    return out
