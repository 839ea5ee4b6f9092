"""Durable progress and online throughputs (thesis §5.3.3, §5.6).

Progress reaches the core only as durable step counts (``ReportSteps(checkpointed)`` and
``RoundReport``), credited through the round driver: a job's count is the max of what was
reported, so a report sent twice counts once and a crash loses at most the steps since the
last checkpoint. The count and the generation of the commit that holds it (``fences``) are
written together: a relaunch loads exactly that commit. Each checkpointed report of a run
also samples the job's steps/s on its worker type; a sample that moves the job's row enough
replaces its priors in the core. The samples are estimates, kept in the store written
behind (``Store.put_throughput_later``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from policies import is_pair_key, key_members

from ..core import SchedulerCore
from ..core.driver import RoundDriver
from .fences import Fences
from .jobs import JobRow, Jobs
from .run import Run
from .runs import RunTable
from .store import Store
from ..core.online import OnlineThroughputs, one_type_count
from ..core.records import ThroughputSource

if TYPE_CHECKING:
    from ..core.configurations import Configurations


class Progress:
    def __init__(self, jobs: Jobs, runs: RunTable, driver: RoundDriver,
                 core: SchedulerCore, online: OnlineThroughputs, store: Store,
                 fences: Fences, *, clock: Callable[[], float]) -> None:
        self.jobs, self.runs, self.driver, self.core = jobs, runs, driver, core
        self.online, self.store, self.fences, self._clock = online, store, fences, clock

    def durable(self, job_id: str, steps: int, generation: int, seconds: float | None,
                now: float, lease_start_s: float = 0.0) -> bool:
        """A commit by run ``generation`` (the job's newest: the caller checked) holds
        ``steps`` (absolute): count what is new, once. ``seconds``: the run's own clock at
        that checkpoint (None: no sample); ``lease_start_s``: that clock when the run's
        first step was done (0: not sent). Returns whether the job has now finished."""
        job = self.jobs.get(job_id)
        if job is None or job.final:
            return False
        run = self.runs.get(job_id)
        if run is not None:      # the durable count is fresh as of now (ETAs: ``view``)
            run.reported_at = self._clock()
            if steps > run.last[0]:     # (its exit's report repeats its last commit)
                run.committed_at = run.reported_at
        if (run is not None and not run.orphan and not run.rebase and seconds is not None
                and steps > run.last[0]):
            base, then = run.last
            if then is None and 0.0 < lease_start_s <= seconds:
                base, then = base + 1, lease_start_s   # from the end of its first step
            took = self._clock() - run.init_at if then is None else seconds - then
            if steps > base:
                self._measure(job, run, steps - base, took, now)
            run.last = (steps, seconds)
        delta = self.jobs.credit(job_id, steps,
                                 lambda db: self.fences.took(job_id, generation, db))
        if delta > 0 and job_id not in self.core.active_ids \
                and job_id not in self.core.pending_jobs:   # held: its run made the rest
            return self.jobs[job_id].steps_done >= job.spec.total_steps
        return delta > 0 and self.driver.credit((job_id,), ((delta,),), now)

    def _measure(self, job: JobRow, run: Run, steps: int, seconds: float, now: float) -> None:
        """Online throughputs (thesis §5.3.3) from a run's checkpointed reports: on one type
        it is the job's throughput there (kept in the store); on an elastic count
        (``"t:n"``) it refines the job type's scaling model (Sia §3; ``OnlineThroughputs``).
        A run that shared its GPUs with another job measures the pair (§5.3.1: the core
        plans the pair on it; kept as the pair's); one on a mix of several types (VirtualFlow
        §6.5.2) is not recorded: the core prices mixes from the throughput table with the
        split solver (``core/configurations.py``), so a daemon whose workers run at X
        times the table should get a table scaled by X (``local-cluster`` writes one)."""
        pair = run.task_key if is_pair_key(run.task_key) else None
        average = self.online.learn(self.core, job.id, run.worker_type, steps, seconds,
                                    job.spec.job_type, job.spec.scale_factor,
                                    self.core.worker_types, now, pair=pair)
        if average is None:
            return
        if pair is not None:
            self.store.put_pair_throughput_later(pair, job.id, run.worker_type, average)
        elif run.worker_type in self.core.worker_types:
            self.store.put_throughput_later(job.id, run.worker_type, average)
        else:           # an elastic count: ``learn`` records no other name
            t, n = one_type_count(run.worker_type, self.core.worker_types)
            self.store.put_scaling(job.spec.job_type, t, n, average)

    def ended(self, job_id: str) -> None:
        """A job that ended (done, failed or cancelled): what was measured of it and of its
        pairs is forgotten (no plan reads it again); the store keeps it until the job is
        retired (``retention``)."""
        self.online.forget(job_id)

    def admitted(self, job_ids: Sequence[str], now: float,
                 planned: Mapping[str, Mapping[str, float]] | None = None) -> None:
        """Jobs just admitted (after a restart) plan on what was measured of them and of
        their pairs, by the rule a new measurement follows (``OnlineThroughputs``'s
        ``changed_row`` and ``changed_pair``: past noise of what they are planned on).
        ``planned``: the steps/s the allocation period a job was taken on with planned it
        on (``period.resume_period``); it plans on them again while what was measured is
        within noise of them (``OnlineThroughputs.taken_on``; the core judges whether the
        period moved, ``SchedulerCore.resume``)."""
        online, types = self.online, self.core.worker_types
        for job_id in job_ids:
            spec, was = self.jobs[job_id].spec, (planned or {}).get(job_id)
            if job_id in online.measured and job_id in self.core.active_ids:
                row = (online.taken_on(job_id, spec.job_type, spec.scale_factor, types, was)
                       if was is not None else
                       online.changed_row(job_id, spec.job_type, spec.scale_factor, types))
                if row is not None:
                    self.core.set_job_throughputs(job_id, row, now)
            online.publish_restored_pairs(self.core, job_id, types, now)


def restored_online(priors: ThroughputSource, scaling: Configurations | None, store: Store,
                    jobs: Jobs) -> OnlineThroughputs:
    """The online throughputs a (re)started scheduler begins with: what the store kept of
    its jobs that have not ended, and of their pairs, and the elastic counts' scaling."""
    online = OnlineThroughputs(priors, scaling=scaling)
    measured, pairs = store.throughputs(), store.pair_throughputs()
    online.restore({job_id: row for job_id, row in measured.items() if jobs.live((job_id,))},
                   {pair: rows for pair, rows in pairs.items() if jobs.live(key_members(pair))})
    online.restore_counts(store.scaling())
    return online
