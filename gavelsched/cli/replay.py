"""``gavelsched replay``: submit every job of a trace to a live scheduler at its arrival
time, watch them to the end and write the Simulation result JSON (docs/architecture.md),
as Gavel's ``run_scheduler_with_trace.py`` checks its simulator against its cluster
(thesis §5.7). ``local-cluster --trace`` does the same on loopback.

Times and steps scale (``--time-scale S``: arrivals x S; ``--steps-scale K``: steps x K,
at least 1), so a long trace fits a short run. Each job runs its type's reference workload
(``traces.workloads``), or ``--workload``; a trace's own ``command`` (Gavel's jobs name
scripts and data sets of its authors' machines) is not run.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from . import InputError


def register(subparsers) -> None:
    from .connection import connection_flags

    p = subparsers.add_parser(
        "replay", parents=[connection_flags()],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        help="submit a trace's jobs to a live scheduler at their arrival times",
        description="Replay a trace (.jsonl, or Gavel's .trace) against a running scheduler: "
                    "each job is submitted at its arrival time (x --time-scale) with its "
                    "steps (x --steps-scale), running its job type's reference workload or "
                    "--workload. Shows progress, prints the simulator's summary when the last "
                    "job ends and writes its JSON with --json, so the run compares with "
                    "`gavelsched simulate` on the same trace. A job the scheduler refuses is "
                    "reported in one line and the others go on (exit code 1 at the end).")
    p.add_argument("trace", metavar="TRACE")
    scale_flags(p)
    p.add_argument("--workload", default=None,
                   help="run every job with this reference workload (e.g. steps) instead of "
                        "its job type's")
    p.add_argument("--json", metavar="OUT", help="write the Simulation result JSON here")
    p.set_defaults(func=run)


def scale_flags(p, when: str = "") -> None:
    """``--time-scale`` and ``--steps-scale`` (``when``: what they need, e.g. "with
    --trace: "), as ``replay`` and ``local-cluster --trace`` share them."""
    p.add_argument("--time-scale", type=float, default=1.0, metavar="S",
                   help=f"{when}arrival times x S (0.01: an hour of trace in 36 s)")
    p.add_argument("--steps-scale", type=float, default=1.0, metavar="K",
                   help=f"{when}every job's steps x K (at least 1 step)")


def check_scales(time_scale: float, steps_scale: float) -> None:
    for flag, value in (("--time-scale", time_scale), ("--steps-scale", steps_scale)):
        if not (math.isfinite(value) and value > 0):
            raise InputError(f"{flag} must be a positive number, got {value}")


def trace_schedule(path: str, time_scale: float, steps_scale: float,
                   workload: str | None) -> list:
    """``(submit at s, JobRequest)`` for every job of the trace at ``path``, in arrival
    order, scaled (TraceError, one line, for a malformed trace)."""
    from traces.formats import load_trace, sort_by_arrival
    from traces.workloads import UnknownWorkload, check_workload

    from ..rpc import pb

    if workload is not None:
        try:
            check_workload(workload)
        except UnknownWorkload as err:
            raise InputError(f"--workload: {err}") from None
    jobs = sort_by_arrival(load_trace(path))
    if not jobs:
        raise InputError(f"{path}: the trace has no jobs")
    first = jobs[0].arrival_s
    return [((job.arrival_s - first) * time_scale, pb.JobRequest(
        job_type=job.job_type, scale_factor=job.scale_factor,
        total_steps=max(1, round(job.total_steps * steps_scale)),
        priority_weight=job.priority_weight, slo_s=(job.slo_s or 0.0) * time_scale,
        entity=job.entity or "", workload=workload or "", mixed=job.mixed,
        min_scale_factor=job.min_scale_factor or 0)) for job in jobs]


def run(args: argparse.Namespace) -> int:
    from traces.catalog import default_prices

    from ..client.schedule import Remote, refusal_line, run_schedule
    from .connection import api
    from .drive import report, say_refused, show_progress

    check_scales(args.time_scale, args.steps_scale)
    schedule = trace_schedule(str(Path(args.trace)), args.time_scale, args.steps_scale,
                              args.workload)
    outcome = run_schedule(Remote(api(args)), schedule, prices=default_prices(),
                           refused=refusal_line, show=show_progress, on_refused=say_refused)
    return report(outcome, args.json)
