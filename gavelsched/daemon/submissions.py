"""Checking a submitted job before it reaches the core (issue #8: malformed submissions
are refused with a message naming the field, and the daemon stays up; issue #17: NaN,
infinite and out-of-range values are refused here, at the door, so that one bad job never
stops the policy's re-solves for the others)."""

from __future__ import annotations

from collections.abc import Mapping

from traces import checks
from traces.checks import BadValue, shown
from traces.workloads import VIRTUAL_NODE_WORKLOADS, UnknownWorkload, check_workload, workload_for

from ..core import JobSpec, ThroughputSource
from ..rpc import pb
from .store import JobRow


class SubmissionError(ValueError):
    """A field of a submission that cannot be used; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def check_submission(request: pb.JobRequest, table: ThroughputSource,
                     worker_types: tuple[str, ...], gpus_by_type: Mapping[str, int], *,
                     single_gpu_policy: str | None = None,
                     slo_policy: str | None = None) -> JobRow:
    """A ``JobRow`` (its id and arrival still to be set) for a valid request, or
    ``SubmissionError``.

    ``worker_types`` are the types the throughput table knows; ``gpus_by_type`` the GPUs
    of each registered type (empty before any worker registered: the size check waits);
    ``single_gpu_policy`` names the policy when it schedules single-GPU jobs only
    (``Traits.single_gpu``), ``slo_policy`` when it refuses a job whose SLO is beyond
    reach (``Traits.refuses_slos_beyond_reach``: ``slo_within_reach``)."""
    try:
        job_type, sf, weight, slo = _fields(request)
    except BadValue as err:
        raise SubmissionError(err.field, err.reason) from None
    if single_gpu_policy and sf > 1:
        raise SubmissionError("scale_factor", f"policy {single_gpu_policy} schedules "
                                              f"single-GPU jobs only, got {sf}")
    types = tuple(dict.fromkeys((*worker_types, *gpus_by_type)))
    rates = {t: table.get(t, job_type, sf) for t in types}
    if not any(table.get(t, job_type, s) > 0 for t in types for s in (1, 2, 4, 8, sf)):
        raise SubmissionError("job_type", f"unknown job type {shown(job_type)} (not in "
                                          "the throughput table)")
    if not any(r > 0 for r in rates.values()):
        raise SubmissionError("scale_factor", f"job type {job_type!r} has no throughput at "
                                              f"scale factor {sf} on any worker type")
    if gpus_by_type and not any(rates.get(t, 0) > 0 and n >= sf
                                for t, n in gpus_by_type.items()):
        sizes = ", ".join(f"{t}: {n}" for t, n in gpus_by_type.items())
        raise SubmissionError("scale_factor", f"{sf} is larger than the GPUs of any worker "
                                              f"type that runs {job_type!r} ({sizes})")
    if slo_policy and slo is not None and not request.mixed:
        slo_within_reach(slo_policy, job_type, sf, int(request.total_steps), slo, rates,
                         gpus_by_type)
    workload, command = request.workload, request.command
    if workload and command:
        raise SubmissionError("workload", "give workload or command, not both")
    try:
        if workload:
            check_workload(workload)
        elif not command:
            workload = workload_for(job_type)
    except UnknownWorkload as err:
        raise SubmissionError("workload", str(err)) from None
    if request.mixed and workload not in VIRTUAL_NODE_WORKLOADS:
        what = f"workload {workload!r}" if workload else "a command job"
        raise SubmissionError("mixed", f"{what} cannot run split across worker types (virtual "
                                       f"nodes need one of {', '.join(VIRTUAL_NODE_WORKLOADS)})")
    low = int(request.min_scale_factor) or None     # proto3: 0 = not elastic
    if low is not None and not 1 <= low <= sf:
        raise SubmissionError("min_scale_factor", f"must be between 1 and scale_factor "
                                                  f"({sf}), got {low}")
    spec = JobSpec(id="", job_type=job_type, scale_factor=sf,
                   total_steps=int(request.total_steps),
                   priority_weight=weight, slo_s=slo,
                   entity=request.entity or None, mixed=bool(request.mixed),
                   min_scale_factor=low)
    return JobRow(spec, workload=workload, command=command)


def slo_within_reach(policy: str, job_type: str, sf: int, steps: int, slo_s: float,
                     rates: Mapping[str, float], gpus_by_type: Mapping[str, int]) -> None:
    """``SubmissionError`` when the job alone on its fastest type (of those registered with
    ``sf`` GPUs or more; before any registered, of every type the table knows) could not
    make its ``steps`` within ``slo_s``: a policy that refuses an SLO beyond reach would
    refuse it at its first re-solve (``policies.throughput.slo_needs``, which asks more
    of it by then: its SLO counts from its arrival), so it is refused now."""
    usable = {t: r for t, r in rates.items()
              if not gpus_by_type or gpus_by_type.get(t, 0) >= sf}
    fastest = max(usable, key=usable.__getitem__, default=None)
    need = steps / slo_s
    if fastest is None or need > usable[fastest]:
        alone = ("it runs on no registered type" if fastest is None else
                 f"{job_type} x{sf} makes {usable[fastest]:.4g} steps/s alone on its fastest "
                 f"type here, {fastest}")
        raise SubmissionError("slo_s", f"policy {policy} refuses an SLO beyond reach: "
                                       f"{steps} steps in {slo_s:g} s need {need:.4g} "
                                       f"steps/s, and {alone}")


def _fields(request: pb.JobRequest) -> tuple[str, int, float, float | None]:
    """(job type, scale factor, priority weight, SLO or None) of a request, and its text
    fields checked (docs/design.md, Safety rules: finite numbers in range, names without control
    characters); raises ``BadValue`` naming the field. As proto3 has it, a numeric field
    left at 0 is unset: scale factor 1, weight 1, no SLO (a negative one is refused, as at
    every door: ``checks.slo``)."""
    job_type = checks.text(request.job_type, "job_type", empty=False)
    for name in ("entity", "workload"):
        checks.text(getattr(request, name), name)
    checks.text(request.command, "command", one_line=False)
    sf = int(request.scale_factor) or 1
    if sf < 1:
        raise BadValue("scale_factor", "must be >= 1", sf)
    if not 0 < request.total_steps <= checks.MAX_STEPS:
        raise BadValue("total_steps", f"must be > 0 and <= {checks.MAX_STEPS}",
                       request.total_steps)
    weight = float(request.priority_weight) or 1.0
    checks.number(weight, "priority_weight", low=checks.PRIORITY_WEIGHT_MIN,
                  high=checks.PRIORITY_WEIGHT_MAX)
    return job_type, sf, weight, checks.slo(request.slo_s, none=0.0)
