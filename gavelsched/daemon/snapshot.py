"""What ``Status`` answers, and where ``Logs`` finds a job's output: an immutable picture of
the scheduler, built from the daemon's frozen view (``view.DaemonView``) after each change,
so that gRPC handlers never read live state (the core's threading contract, ``executor``).
A job that is not final, has no run and no reason of its own shows why it waits
(``pending``); a preempted one also shows what it received against its allocation."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from traces.throughputs import table_text

from ..rpc import pb
from .logs import LogSources, Source
from .forecast import Forecast
from .holding import counted_for_entity
from .pending import pending_reason
from .jobs import FINAL, PREEMPTED, STATES, JobRow
from .view import DaemonView


# Jobs copied per call into a Status answer: protobuf's copy holds the GIL for the whole
# call, and one call for 50,000 jobs stopped the scheduler's other threads (heartbeats,
# renewals) for a tenth of a second, longer on a busy machine (issue #30;
# ``benchmarks/gil_holds.py``).
COPY_CHUNK = 1000


@dataclass(frozen=True)
class Snapshot:
    round: int
    policy: str
    round_seconds: float
    now_s: float
    response: pb.StatusResponse      # built once per change; never changed after
    ended: Mapping[str, bool] = field(default_factory=dict)   # job -> final, with no run
    hosts: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    servers: Mapping[int, Source] = field(default_factory=dict)

    def status(self, request: pb.StatusRequest | None = None,
               caller: str = "") -> pb.StatusResponse:
        """The picture, or only its jobs in ``request.states`` (and not final, with
        ``active``) of its ``job_type``, ``entity`` and ``user`` (each unset: any; ``mine``:
        the ``caller``'s). A job type matches itself and the types it names with a batch
        size (``ResNet-50``: also ``ResNet-50 (batch size 16)``)."""
        user = caller if request is not None and request.mine else (
            request.user if request is not None else "")
        if request is None or not (request.states or request.job_type or request.entity
                                   or request.active or user):
            return self._for(caller, self.response.jobs)
        states = set(request.states or STATES) - (FINAL if request.active else set())
        kind, entity = request.job_type, request.entity
        sized = kind + " ("
        jobs = self.response.jobs
        return self._for(caller, [
            j for j in map(jobs.__getitem__, self._in_states(states))
            if (not kind or j.job_type == kind or j.job_type.startswith(sized))
            and (not entity or j.entity == entity) and (not user or j.user == user)])

    def _in_states(self, states: set[str]) -> list[int]:
        """The positions of the jobs in ``states``, in the picture's order: a poll for a few
        states (``gavelsched status --state running``) reads those jobs only, not all of
        50,000."""
        at = self._positions
        return sorted(i for state in states for i in at.get(state, ()))

    @cached_property
    def _positions(self) -> dict[str, list[int]]:
        """Each state's jobs' positions in ``response.jobs`` (made at the first query of
        some states: the picture never changes)."""
        out: dict[str, list[int]] = {}
        for i, job in enumerate(self.response.jobs):
            out.setdefault(job.state, []).append(i)
        return out

    def _for(self, caller: str, jobs) -> pb.StatusResponse:
        """The picture with these ``jobs``, answered to ``caller``; the jobs are copied
        ``COPY_CHUNK`` at a time (module constant)."""
        r = self.response
        if caller == r.caller and jobs is r.jobs:
            return r
        out = pb.StatusResponse(
            round=r.round, policy=r.policy, round_seconds=r.round_seconds, now_s=r.now_s,
            epoch_unix=r.epoch_unix, workers=r.workers, resolve=r.resolve,
            min_resolve_interval_s=r.min_resolve_interval_s, round_ends_s=r.round_ends_s,
            refill_until=r.refill_until, plan_lead_s=r.plan_lead_s, entities=r.entities,
            restart_rule=r.restart_rule, policy_options=r.policy_options, caller=caller,
            eta_computed_s=r.eta_computed_s, eta_error=r.eta_error,
            startup_wave_slope=r.startup_wave_slope, pair_table=r.pair_table,
            type_order=r.type_order, measured_pairs=r.measured_pairs,
            pair_partners=r.pair_partners, solving_since_s=r.solving_since_s,
            solving_jobs=r.solving_jobs, allocation_solve_s=r.allocation_solve_s,
            prices=r.prices, price_changes=r.price_changes, notices=r.notices)
        for i in range(0, len(jobs), COPY_CHUNK):
            out.jobs.extend(jobs[i:i + COPY_CHUNK])
        return out

    def log_sources(self, job_id: str,
                    retired: tuple[int, ...] | None = None) -> LogSources | None:
        """The servers that ran the job (``retired``: those of a job that left memory, from
        the store), and whether it has ended (final, its processes gone); None for a job
        this picture does not show."""
        ended = True if retired is not None else self.ended.get(job_id)
        if ended is None:
            return None
        return LogSources(tuple(self.servers[s] for s in (
            retired if retired is not None else self.hosts.get(job_id, ()))
            if s in self.servers), ended)


def _measured_pairs(view: DaemonView) -> list[pb.PairRates]:
    """The co-located pairs the scheduler measured (``DaemonView.measured_pairs``)."""
    return [pb.PairRates(a=a, b=b, a_steps_per_s={t: r[0] for t, r in rates.items()},
                         b_steps_per_s={t: r[1] for t, r in rates.items()})
            for (a, b), rates in view.measured_pairs.items()]


def build_snapshot(view: DaemonView) -> Snapshot:
    """Jobs (with their times, and allocation vs received share, thesis §5.5) and workers,
    as a Status; and the servers each job ran on."""
    jobs = []
    reasons = _Reasons(view)
    eta = view.forecast or _NO_FORECAST
    for job in view.jobs:
        spec, run = job.spec, view.runs.get(job.id)
        x, got = view.shares.get(job.id, ({}, {}))
        jobs.append(pb.JobStatus(
            id=job.id, state=job.state, steps_done=job.steps_done,
            total_steps=spec.total_steps, job_type=spec.job_type,
            scale_factor=spec.scale_factor, worker_type=run.worker_type if run else "",
            reason=job.reason or ("" if run or job.final     # (an ended job waits for nothing)
                                  else view.waiting.get(job.id) or reasons.of(job)),
            allocation=x,
            received=got, arrival_s=job.arrival_s, completion_s=_or_never(job.completion_s),
            mixed=spec.mixed, min_scale_factor=spec.min_scale_factor,
            gpus=run.gpus if run else 0, shared_with=run.shared_with if run else "",
            entity=spec.entity or "",
            started_s=_or_never(job.started_s), ended_s=_or_never(job.ended_s),
            steps_per_s=view.rates.get(job.id, {}),
            plan_steps_per_s=view.plan_rates.get(job.id, {}),
            priority_weight=spec.priority_weight, slo_s=spec.slo_s or 0.0,
            startup_s=view.startup_s.get(spec.job_type, 0.0),
            restart_s=view.restart_s.get(spec.job_type, 0.0),
            exit_s=view.exit_s.get(spec.job_type, 0.0),
            startup_alone_s=view.startup_alone_s.get(spec.job_type, 0.0), user=job.user,
            array_id=job.array_id, array_index=job.array_index,
            max_runtime_s=job.max_runtime_s or 0.0, after=job.after,
            run_s=view.run_s.get(job.id, 0.0),
            eta_start_s=-1.0 if job.final or job.started_s is not None else
            eta.start_s.get(job.id, -1.0),
            eta_finish_s=-1.0 if job.final else eta.finish_s.get(job.id, -1.0),
            run_began_s=run.began_s if run else -1.0, run_up_s=run.up_s if run else -1.0,
            run_refill=run.refill if run else False, run_ending=run.ending if run else False,
            run_reported_s=run.reported_s if run else -1.0,
            run_lease_steps=run.lease_steps if run else 0,
            run_next_type=view.deferred.get(job.id, "")))
    workers = [pb.WorkerStatus(id=str(s.row.id), type=s.row.worker_type,
                               gpus=len(s.row.workers), alive=s.alive, address=s.row.address,
                               drained=s.drained, runs=s.runs)
               for s in view.servers]
    response = pb.StatusResponse(round=view.round, jobs=jobs, workers=workers,
                                 policy=view.policy, round_seconds=view.round_seconds,
                                 now_s=view.now_s, epoch_unix=view.epoch_unix,
                                 resolve=view.resolve,
                                 min_resolve_interval_s=view.min_resolve_interval_s,
                                 round_ends_s=view.round_ends_s,
                                 refill_until=view.refill_until,
                                 plan_lead_s=view.plan_lead_s,
                                 restart_rule=view.restart_rule,
                                 startup_wave_slope=view.startup_wave_slope,
                                 policy_options=json.dumps(dict(view.policy_options),
                                                           sort_keys=True),
                                 entities=_entities(view),
                                 pair_table=("" if view.pair_table is None
                                             else table_text(view.pair_table)),
                                 type_order=view.type_order,
                                 measured_pairs=_measured_pairs(view),
                                 pair_partners=view.pair_partners,
                                 solving_since_s=view.solving_since_s,
                                 solving_jobs=view.solving_jobs,
                                 allocation_solve_s=view.allocation_solve_s,
                                 prices=view.prices,
                                 price_changes={
                                     t: pb.PriceChanges(at_s=[a for a, _ in points],
                                                        price=[p for _, p in points])
                                     for t, points in view.price_changes.items()},
                                 eta_computed_s=eta.computed_s, eta_error=eta.error,
                                 notices=view.notices)
    return Snapshot(view.round, view.policy, view.round_seconds, view.now_s, response,
                    {j.id: j.final and j.id not in view.runs for j in view.jobs}, view.hosts,
                    {s.row.id: Source(s.row.id, s.row.address, s.row.hostname or s.row.address)
                     for s in view.servers})


_NO_FORECAST = Forecast(-1.0)


def _entities(view: DaemonView) -> list[pb.EntityStatus]:
    """Each configured entity with the GPUs its jobs hold and its jobs not ended."""
    gpus: dict[str, int] = {}
    jobs: dict[str, int] = {}
    entity_of = {job.id: job.spec.entity or "" for job in view.jobs}
    for job in view.jobs:
        name = entity_of[job.id]
        if not job.final:
            jobs[name] = jobs.get(name, 0) + 1
        run = view.runs.get(job.id)
        if run is not None:
            gpus[name] = gpus.get(name, 0) + counted_for_entity(
                job.id, run.gpus, run.shared_with, name, entity_of.get(run.shared_with, ""))
    return [pb.EntityStatus(name=e.name, weight=e.weight, policy=e.policy,
                            max_gpus=e.max_gpus or 0, gpus=gpus.get(e.name, 0),
                            jobs=jobs.get(e.name, 0)) for e in view.entities]


def _or_never(seconds: float | None) -> float:
    """A time for the wire: < 0 for none (not yet)."""
    return -1.0 if seconds is None else seconds


class _Reasons:
    """``pending_reason`` for the jobs of one view: the GPUs per type counted once, the
    table asked once per (job type, scale factor)."""

    def __init__(self, view: DaemonView) -> None:
        self._view, self._gpus = view, view.gpus()
        self._runs_on: dict[tuple[str, int], tuple[str, ...] | None] = {}

    def of(self, job: JobRow) -> str:
        if job.final:
            return ""
        key = (job.spec.job_type, job.spec.scale_factor)
        if key not in self._runs_on:
            self._runs_on[key] = self._view.runs_on(*key)
        x, got = self._view.shares.get(job.id, (None, None))
        return pending_reason(*key, self._gpus, self._runs_on[key], x,
                              got if job.state == PREEMPTED else None)
