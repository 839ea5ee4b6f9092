"""Submit jobs to a live scheduler on a schedule and watch them to the end, ending in the
simulator's ``SimulationResult``, so that a physical run and a simulated one compare field
by field (thesis §5.7: physical against simulated). ``gavelsched local-cluster`` and
``gavelsched replay`` run it; so may any script.

``client`` is anything with ``submit(pb.JobRequest) -> job id`` and ``status() ->
pb.StatusResponse``: ``gavelsched.daemon.local.LocalCluster``, or ``Remote`` over a
``Client``. A submission the scheduler refuses is handed to ``on_refused`` and the run goes
on: one bad job never stops the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..daemon.jobs import DONE, RUNNING, FINAL as FINAL_STATES
from .errors import ClientError, InputError

__all__ = ["Outcome", "Remote", "capacity", "gpus_held", "refusal_line", "run_schedule"]

POLL_S = 1.0
REFUSALS = ("INVALID_ARGUMENT", "FAILED_PRECONDITION")   # the scheduler said no to a job


@dataclass(frozen=True)
class Outcome:
    """What ``run_schedule`` saw: the result, the last status, the refused jobs, and how
    far the submissions fell behind the schedule (``late_s``: the most a submission was
    answered after its time, seconds; a user's budget of calls, or a busy scheduler, makes
    it grow, and each job's times then count from its actual arrival)."""

    result: Any                  # simulator.result.SimulationResult
    status: Any                  # the last pb.StatusResponse
    refused: tuple[tuple[int, str], ...]   # (index in the schedule, one-line reason)
    late_s: float = 0.0


class Remote:
    """A scheduler reached through a ``Client`` (``api.connect``)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def submit(self, request: Any) -> str:
        from .request import JobRequest
        return self._client.submit(JobRequest.from_pb(request))

    def status(self) -> Any:
        return self._client.status_reply()


def run_schedule(client: Any, schedule: Sequence[tuple[float, Any]], *,
                 prices: Mapping[str, float], refused: Callable[[Exception], str | None],
                 solves: Callable[[], tuple[int, float]] | None = None,
                 show: Callable[[Any, int, int, int], None] | None = None,
                 on_refused: Callable[[int, str], None] | None = None,
                 wait_for_others: bool = False) -> Outcome:
    """Submit each ``(at_s, JobRequest)`` of ``schedule`` ``at_s`` seconds after the start,
    poll ``client.status()`` every POLL_S until every submitted job has ended, and return
    the SimulationResult of what happened. ``refused(err)`` turns a refused submission into
    a one-line reason (None: not a refusal, re-raised), which ``on_refused(index, reason)``
    is told. Utilization and cost are sampled: the GPUs that running jobs hold between
    polls (``Metrics.on_sample``). ``wait_for_others``: also wait for the jobs others
    submitted meanwhile (the caller is about to stop the cluster they run on:
    ``local-cluster``); the result covers the schedule's jobs only."""
    from simulator.metrics import Metrics

    wall = time.perf_counter()
    pending = sorted(enumerate(schedule), key=lambda item: item[1][0])
    ids: list[str] = []
    bad: list[tuple[int, str]] = []
    metrics = None
    gpus: dict[str, int] = {}
    start = last = time.monotonic()
    seen: set[str] = set()
    status = None
    late = 0.0
    while True:
        now = time.monotonic()
        while pending and pending[0][1][0] <= now - start:
            index, (at, request) = pending.pop(0)
            try:
                ids.append(client.submit(request))
            except Exception as err:  # noqa: BLE001 - ``refused`` decides
                reason = refused(err)
                if reason is None:
                    raise
                bad.append((index, reason))
                if on_refused is not None:
                    on_refused(index, reason)
            late = max(late, time.monotonic() - start - at)
        status = client.status()
        if metrics is None:
            gpus = capacity(status)
            metrics = Metrics(status.policy, tuple(gpus))
        now = time.monotonic()
        for job in status.jobs:
            if job.id in set(ids) - seen:
                metrics.on_arrival(job.id, job.job_type, job.scale_factor, job.arrival_s,
                                   None)
                seen.add(job.id)
        held = [h for j in status.jobs if j.id in seen and j.state == RUNNING
                and j.worker_type for h in gpus_held(j.worker_type, j.scale_factor)]
        metrics.on_sample(now - last, held, prices, sum(gpus.values()))
        last = now
        mine = [j for j in status.jobs if j.id in seen]
        if show is not None:
            show(status, len(ids), len(bad), len(schedule))
        waited = status.jobs if wait_for_others else mine
        if not pending and len(seen) == len(ids) and all(j.state in FINAL_STATES
                                                         for j in waited):
            break
        time.sleep(POLL_S)
    for job in status.jobs:
        if job.id in seen and job.state == DONE:
            metrics.on_complete(job.id, job.completion_s)
    resolves, solve_s = solves() if solves is not None else (None, None)
    metrics.on_totals(rounds=int(status.round) + 1, resolves=resolves, solve_s=solve_s)
    end = max((j.completion_s for j in status.jobs if j.id in seen), default=0.0)
    result = metrics.result(end_s=end, capacity=gpus, wall_s=time.perf_counter() - wall,
                            window=None, order=ids)
    span = last - start
    result = replace(result, utilization=(metrics.busy_gpu_s / (sum(gpus.values()) * span)
                                          if gpus and span > 0 else 0.0))
    return Outcome(result, status, tuple(bad), late)


def refusal_line(err: Exception) -> str | None:
    """A submission refused, in one line (None: not a refusal): by the API's door
    (``InputError``), or by the scheduler, a ``ClientError`` (a ``Client``) or a
    ``grpc.RpcError`` (a bare stub) whose code says the job was refused."""
    if isinstance(err, InputError):
        return str(err).splitlines()[0]
    if isinstance(err, ClientError):
        code, details = err.code, err.details
    else:
        import grpc
        if not isinstance(err, grpc.RpcError):
            return None
        code, details = err.code().name, err.details()
    if code in REFUSALS:
        return (details or code).splitlines()[0]
    return None


def capacity(status: Any) -> dict[str, int]:
    """GPUs per worker type of the alive workers in service the scheduler lists."""
    out: dict[str, int] = {}
    for worker in status.workers:
        if worker.alive and not worker.drained:
            out[worker.type] = out.get(worker.type, 0) + worker.gpus
    return out


def gpus_held(worker_type: str, scale_factor: int) -> list[tuple[str, int]]:
    """(type, GPUs) a running job holds: its scale factor on one type, or each type's count
    of its configuration (a mixed job, e.g. ``k80:1+v100:1``; an elastic one, ``v100:2``)."""
    from policies.jobs import COUNT_SEPARATOR, parse_configuration_name

    if COUNT_SEPARATOR not in worker_type:
        return [(worker_type, scale_factor)]
    return list(parse_configuration_name(worker_type).items())
