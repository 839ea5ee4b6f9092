"""Submit jobs to a live scheduler on a schedule and watch them to the end: the loop behind
``gavelsched local-cluster`` (its demo mix, or a trace) and ``gavelsched replay`` (a trace
against any scheduler), ending in the simulator's ``SimulationResult`` so that a physical
run and a simulated one compare field by field (thesis §5.7: physical against simulated).

``client`` is anything with ``submit(JobRequest) -> job id`` and ``status() ->
StatusResponse``: ``gavelsched.daemon.local.LocalCluster``, or ``Remote`` over the client
flags' channel. A submission the scheduler refuses is reported on stderr in one line and
the replay goes on: one bad job never stops the others.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..daemon.local import FINAL_STATES

POLL_S = 1.0


@dataclass(frozen=True)
class Outcome:
    """What ``run_schedule`` saw: the result, the last status, and the refused jobs."""

    result: Any                  # simulator.metrics.SimulationResult
    status: Any                  # the last pb.StatusResponse
    refused: tuple[tuple[int, str], ...]   # (index in the schedule, one-line reason)


class Remote:
    """A scheduler reached over the client flags' channel (``client.stub``)."""

    def __init__(self, stub: Any, timeout_s: float = 30.0) -> None:
        self._stub, self._timeout = stub, timeout_s

    def submit(self, request: Any) -> str:
        return self._stub.Submit(request, timeout=self._timeout).job_id

    def status(self) -> Any:
        from ..rpc import pb

        return self._stub.Status(pb.StatusRequest(), timeout=self._timeout)


def run_schedule(client: Any, schedule: Sequence[tuple[float, Any]], *,
                 prices: Mapping[str, float], refused: Callable[[Exception], str | None],
                 solves: Callable[[], tuple[int, float]] | None = None,
                 show: Callable[[Any, int, int], None] | None = None) -> Outcome:
    """Submit each ``(at_s, JobRequest)`` of ``schedule`` ``at_s`` seconds after the start,
    poll ``client.status()`` every POLL_S until every submitted job has ended, and return
    the SimulationResult of what happened. ``refused(err)`` turns a refused submission into
    a one-line reason (None: not a refusal, re-raised). Utilization and cost are sampled:
    the GPUs that running jobs hold between polls."""
    from simulator.metrics import Metrics

    wall = time.perf_counter()
    pending = sorted(enumerate(schedule), key=lambda item: item[1][0])
    ids: list[str] = []
    bad: list[tuple[int, str]] = []
    metrics = None
    capacity: dict[str, int] = {}
    start = last = time.monotonic()
    seen: set[str] = set()
    status = None
    while True:
        now = time.monotonic()
        while pending and pending[0][1][0] <= now - start:
            index, (_, request) = pending.pop(0)
            try:
                ids.append(client.submit(request))
            except Exception as err:  # noqa: BLE001 - ``refused`` decides
                reason = refused(err)
                if reason is None:
                    raise
                bad.append((index, reason))
                sys.stderr.write(f"job {index} of the schedule refused: {reason}\n")
        status = client.status()
        if metrics is None:
            capacity = _capacity(status)
            metrics = Metrics(status.policy, tuple(capacity))
        now = time.monotonic()
        for job in status.jobs:
            if job.id in set(ids) - seen:
                metrics.on_arrival(job.id, job.job_type, job.scale_factor, job.arrival_s,
                                   None)
                seen.add(job.id)
        held = [h for j in status.jobs if j.id in seen and j.state == "running"
                and j.worker_type for h in gpus_held(j.worker_type, j.scale_factor)]
        metrics.busy_gpu_s += (now - last) * min(sum(capacity.values()),
                                                 sum(n for _, n in held))
        metrics.cost_usd += (now - last) / 3600 * sum(prices.get(t, 0.0) * n
                                                      for t, n in held)
        last = now
        mine = [j for j in status.jobs if j.id in seen]
        if show is not None:
            show(status, len(ids) + len(bad), len(schedule))
        if not pending and len(seen) == len(ids) and all(j.state in FINAL_STATES
                                                         for j in mine):
            break
        time.sleep(POLL_S)
    for job in status.jobs:
        if job.id in seen and job.state == "done":
            metrics.on_complete(job.id, job.completion_s)
    metrics.rounds = int(status.round) + 1
    if solves is not None:
        metrics.resolves, metrics.solve_s = solves()
    end = max((j.completion_s for j in status.jobs if j.id in seen), default=0.0)
    result = metrics.result(end_s=end, capacity=capacity, wall_s=time.perf_counter() - wall,
                            window=None, order=ids)
    span = last - start
    result = replace(result, utilization=(metrics.busy_gpu_s / (sum(capacity.values()) * span)
                                          if capacity and span > 0 else 0.0))
    return Outcome(result, status, tuple(bad))


def refusal_line(err: Exception) -> str | None:
    """A submission the scheduler refused, in one line (None: not a refusal)."""
    import grpc

    if isinstance(err, grpc.RpcError) and err.code() in (grpc.StatusCode.INVALID_ARGUMENT,
                                                          grpc.StatusCode.FAILED_PRECONDITION):
        return (err.details() or err.code().name).splitlines()[0]
    return None


def report(outcome, json_out: str | None) -> int:
    """Print the summary and each job that did not finish; write ``--json``; exit code 1
    when a job failed or was refused."""
    print(outcome.result.summary())
    failed = [j for j in outcome.status.jobs
              if j.id in {r.id for r in outcome.result.jobs} and j.state != "done"]
    for job in failed:
        print(f"job {job.id} ({job.job_type}) {job.state}: {job.reason}")
    if json_out:
        Path(json_out).write_text(json.dumps(outcome.result.to_dict(), indent=1) + "\n")
    return 1 if failed or outcome.refused else 0


def _capacity(status: Any) -> dict[str, int]:
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


def show_progress(status: Any, submitted: int, total: int, _last: list = [""]) -> None:  # noqa: B006
    """Live progress on stderr: round, jobs submitted and done, each job's progress and
    worker type (one line redrawn on a terminal, a new line per change otherwise)."""
    done = sum(1 for j in status.jobs if j.state == "done")
    parts = [f"{j.id}:{j.steps_done * 100 // max(j.total_steps, 1):3d}%"
             f"{'@' + j.worker_type if j.worker_type else ''}" for j in status.jobs
             if j.state not in FINAL_STATES][:40]
    line = (f"round {status.round:3d}  submitted {submitted}/{total}  done {done}  "
            + " ".join(parts))
    if sys.stderr.isatty():
        sys.stderr.write("\r" + line[:200].ljust(120))
    elif line != _last[0]:
        sys.stderr.write(line + "\n")
    _last[0] = line
    sys.stderr.flush()
