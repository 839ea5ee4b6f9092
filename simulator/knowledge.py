"""What the simulator's core knows of each job's rates, against what the jobs really make
(thesis §5.3.3: priors first, then throughputs measured online), as a daemon's does:
``SimConfig.priors`` plans on a prior table and learns from each run; a replay of a daemon
plans each job on its planned row (``Knowledge.planned_apart``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from gavelsched.core import SchedulerCore
from gavelsched.core.online import OnlineThroughputs
from policies import key_members, pair_key
from traces import ThroughputTable, TraceJob


class Knowledge:
    """What the daemon knows of each job's rates (``SimConfig.priors``): the core plans on
    the priors, then on what each job's runs measured (``OnlineThroughputs``, as the
    daemon's ``progress`` feeds it); what jobs really make is their own ``throughputs``,
    else ``table``'s."""

    def __init__(self, online: OnlineThroughputs, table: ThroughputTable,
                 jobs: Sequence[TraceJob], restart_costs: Mapping[str, float],
                 plans_own: bool = False,
                 pairs: Mapping[str, Mapping[str, tuple[float, float]]] | None = None) -> None:
        self.online, self.table, self.jobs = online, table, jobs
        self.restart_costs = dict(restart_costs)   # job type -> its cost, until learned
        self.plans_own = plans_own    # the core plans each job on its own planned row
        self.pairs = dict(pairs or {})   # pair key -> type -> what its members make there

    @classmethod
    def planned_apart(cls, table: ThroughputTable, jobs: Sequence[TraceJob],
                      pairs: Mapping[str, Mapping[str, tuple[float, float]]] | None = None
                      ) -> Knowledge:
        """Jobs that the core plans on ``TraceJob.planned`` while they make their
        ``throughputs`` (a daemon's jobs, replayed): the online throughputs start where the
        daemon's are, each job measured at its rates and planned on its planned row, and
        each co-located pair of ``pairs`` (its key, ``"i+j"``, in job order) measured at
        what its members make there (the core plans it on them once both are admitted:
        ``admitted``)."""
        online = OnlineThroughputs(table)
        for i, job in enumerate(jobs):
            online.restore_job(str(i), job.throughputs or {}, job.planned or job.throughputs)
        online.restore({}, {key: {t: dict(zip(key_members(key), rates))
                                  for t, rates in by_type.items()}
                            for key, by_type in (pairs or {}).items()})
        return cls(online, table, jobs, {}, plans_own=True, pairs=pairs)

    def admitted(self, core: SchedulerCore, job_ids: Sequence[str], now: float) -> None:
        """Jobs just admitted: the core plans their measured pairs on what was measured
        (``OnlineThroughputs.publish_restored_pairs``, as the daemon's
        ``Progress.admitted``)."""
        for job_id in job_ids:
            self.online.publish_restored_pairs(core, job_id, core.view.worker_types, now)

    def started(self, core: SchedulerCore, batch, specs, up: np.ndarray) -> None:
        """The job types of the round's runs that got past their start-up (``up``): the
        daemon measures a type's start-up at its first run's first InitJob, and charges
        its restarts from the next plan on (``Startups``, ``set_restart_costs``); until
        then a restart of that type costs nothing in the core's eyes."""
        if not self.restart_costs:
            return
        learned = {}
        for i in np.nonzero(up)[0].tolist():
            for job_id in batch.members[i]:
                job_type = specs[int(job_id)].job_type
                if job_type in self.restart_costs:
                    learned[job_type] = self.restart_costs.pop(job_type)
        if learned:
            core.set_restart_costs(learned)

    def rates(self, batch) -> np.ndarray:
        """(k, 2) steps/s each member of the round's tasks really makes on its type; a
        co-located pair's members, what was measured of the pair there (``pairs``), else
        each ``shared``."""
        out = np.zeros_like(batch.rates)
        for i, members in enumerate(batch.members):
            worker_type = batch.types[int(batch.type_index[i])]
            measured = (self.pairs.get(pair_key(*members), {}).get(worker_type)
                        if self.pairs and len(members) == 2 else None)
            if measured is not None:      # (a pair the daemon measured: what it makes)
                out[i, :2] = measured
                continue
            jobs = [self.jobs[int(job_id)] for job_id in members]
            pair = (self.table.pair(worker_type, *((j.job_type, j.scale_factor) for j in jobs))
                    if len(jobs) == 2 else None)
            for m, job in enumerate(jobs):
                out[i, m] = (job.rate_on(worker_type, self.table) if pair is None
                             else self.shared(job, worker_type, pair[m]))
        return out

    def shared(self, job: TraceJob, worker_type: str, pair_rate: float) -> float:
        """What ``job`` really makes sharing ``worker_type`` (thesis §5.3.1): the table's
        co-located rate, scaled by its own rate over the table's alone when it has its own
        (as ``core.jobs.pair_rates`` scales the pair's planned rates). Before, a pair's
        members made their rates alone."""
        solo = self.table.get(worker_type, job.job_type, job.scale_factor)
        if job.throughputs is None or solo <= 0:
            return pair_rate
        return pair_rate * job.throughputs.get(worker_type, 0.0) / solo

    def learn(self, core: SchedulerCore, batch, specs, steps, seconds, completed, now) -> None:
        """Each run's steps over its seconds, measured (a sample per round, as the daemon's
        durable reports give); the core gets a job's row when it moved enough to matter.
        What was measured of the jobs that ``completed`` is forgotten, as the daemon does."""
        types = core.view.worker_types
        for i, members in enumerate(batch.members):
            worker_type = batch.types[int(batch.type_index[i])]
            pair = batch.keys[i] if len(members) > 1 else None
            for m, job_id in enumerate(members):
                if job_id not in completed:
                    spec = specs[int(job_id)]
                    self.online.learn(core, job_id, worker_type, float(steps[i, m]),
                                      float(seconds[i]), spec.job_type, spec.scale_factor,
                                      types, now, pair=pair)
        for job_id in completed:
            self.online.forget(job_id)
