"""Why a job with no run waits, never started (queued) or between its runs (preempted):
the one-line reason ``Status`` shows for it (issues #17, #18;
docs/style.md §5: typed reasons). A job runs when some worker type that runs it has
room for its scale factor on one type (the submission door's rule,
``submissions.check_submission``), and then when the policy's allocation and the round's
priorities give it a turn (thesis §5.5).

``pending_reason`` is pure: it tells a job that no registered worker can ever hold from one
that waits for its workers to come back, and from one that waits its turn.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

NO_WORKERS = "pending: no workers registered yet"


def pending_reason(job_type: str, scale_factor: int, gpus: Mapping[str, tuple[int, int]],
                   runs_on: Iterable[str] | None, allocation: Mapping[str, float] | None,
                   received: Mapping[str, float] | None = None) -> str:
    """The reason a job of ``job_type`` on ``scale_factor`` GPUs of one type waits.

    ``gpus``: worker type -> (GPUs registered, GPUs alive). ``runs_on``: the types whose
    throughput for the job is > 0 (None: not known, any type may), in the scheduler's
    table: the configured one and the types learned from workers' profiles
    (``priors``). ``allocation``: the job's
    X per type (thesis §5.3.1), or None before it is admitted. ``received``: for a job that
    ran, the fraction of time it received per type this allocation period (§5.5), shown
    beside X: a preempted job waits while others are further below their share."""
    if not gpus:
        return NO_WORKERS
    runs = set(gpus) if runs_on is None else set(runs_on)
    mine = {t: n for t, n in gpus.items() if t in runs}
    need = f"needs {scale_factor} GPU{'s' if scale_factor != 1 else ''} of " + (
        "one worker type" if runs_on is None else f"a type that runs {job_type}")
    if not mine:
        where = (f"it runs on {', '.join(sorted(runs))}" if runs
                 else "in neither the throughput table nor a worker's profile")
        return (f"pending: no registered worker type runs {job_type} at scale factor "
                f"{scale_factor} ({where}; registered: {_sizes(gpus)})")
    if max(total for total, _ in mine.values()) < scale_factor:
        return f"pending: no worker of this size ({need}; registered: {_sizes(mine)})"
    if max(alive for _, alive in mine.values()) < scale_factor:
        alive = ", ".join(f"{t}: {a} of {n}" for t, (n, a) in sorted(mine.items()))
        return f"pending: waiting for workers to come back ({need}; alive: {alive})"
    if allocation is None:
        return "pending: waiting to be admitted at the next round"
    share = ", ".join(f"{t} {x:.2f}" for t, x in sorted(allocation.items()) if x > 0)
    if not share:
        return "pending: waiting its turn (the current allocation gives it no time)"
    got = ", ".join(f"{t} {x:.2f}" for t, x in sorted((received or {}).items())
                    if x > 0 or (allocation.get(t) or 0) > 0)
    return f"pending: waiting its turn (allocation: {share}" + (
        f"; received: {got})" if got else ")")


def _sizes(gpus: Mapping[str, tuple[int, int]]) -> str:
    return ", ".join(f"{t}: {total}" for t, (total, _) in sorted(gpus.items()))
