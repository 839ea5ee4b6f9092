"""Typed failures of policies (docs/style.md §3: typed outcomes, never an empty allocation)."""

from __future__ import annotations

from enum import Enum

# A one-line message names at most this many jobs: at production size a conflict can
# involve thousands (``named``).
NAMED = 10


def named(job_ids, limit: int = NAMED) -> str:
    """``job_ids`` for a one-line message: the first ``limit``, then how many more."""
    ids = list(job_ids)
    shown = ", ".join(ids[:limit])
    return shown + (f" and {len(ids) - limit:,} more" if len(ids) > limit else "")


class PolicyError(Exception):
    """Base class of every error a policy raises on purpose. ``solve_s``: the seconds the
    solve took before it failed (set by ``Policy.solve``; a scheduler spaces its retries of
    an expensive failure as it spaces expensive solves)."""

    solve_s: float | None = None

    def refused(self) -> tuple[str, ...]:
        """The jobs to drop so that the others can be planned (a scheduler core that keeps
        going drops them and solves again: one bad job never stops the others); none: the
        refusal is the whole problem's."""
        return ()


class ProblemError(PolicyError, ValueError):
    """The problem itself is malformed: a missing field, a negative count, a bad value.

    The message names the offending field, e.g. ``jobs[3].scale_factor: must be >= 1, got 0``.
    ``job_id`` names the job whose value it is, when one job is to blame (the scheduler
    core then drops that job and solves again without it: one bad job never stops the
    others).
    """

    def __init__(self, message: str, *, job_id: str | None = None) -> None:
        super().__init__(message)
        self.job_id = job_id

    def refused(self) -> tuple[str, ...]:
        return () if self.job_id is None else (self.job_id,)


class UnknownPolicy(PolicyError, KeyError):
    """No policy is registered under the requested name."""

    def __str__(self) -> str:  # KeyError quotes its argument; we want a plain sentence
        return str(self.args[0])


class Infeasible(PolicyError):
    """The policy's constraints cannot all hold (e.g. SLOs that no allocation can meet).

    ``jobs`` names the jobs whose constraints conflict, when the policy can tell;
    ``certificate``, where the solver gave one, is a proof of it: one multiplier >= 0 per
    row of ``A @ x <= b`` with ``A.T @ y >= 0`` on the variables >= 0, ``0`` on the free
    ones and ``b @ y < 0`` (Farkas; policies/water_filling_jump.py reads it). ``refuse``,
    when the policy names them, are the jobs to refuse so that the others can be planned
    (``policies/admission.py``: a scheduler core that keeps going drops them and solves
    again, as it drops a ``ProblemError``'s ``job_id``).
    """

    def __init__(self, reason: str, jobs: tuple[str, ...] = (), *,
                 refuse: tuple[str, ...] = ()) -> None:
        super().__init__(reason)
        self.reason = reason
        self.certificate = None
        self.jobs = tuple(jobs)
        self.refuse = tuple(refuse)

    def refused(self) -> tuple[str, ...]:
        return self.refuse


class SolverFailed(PolicyError):
    """The solver gave up or returned an unusable status; carries the solver's own words."""


class Outcome(Enum):
    """What a solve ended with, in words every solver's own status is translated into
    (cvxpy's, Clarabel's, scipy's HiGHS, highspy's; each next to its solver call)."""

    OPTIMAL = "optimal"
    INACCURATE = "inaccurate"  # an optimum the solver itself doubts
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    FAILED = "failed"  # anything else: the solver's status or message says what


def check_outcome(outcome: Outcome, what: str, solver: str, *, precise: bool = False,
                  status: str = "", message: str | None = None) -> bool:
    """The one door from a solve's outcome to the typed errors: raise ``Infeasible`` or
    ``SolverFailed`` naming ``what`` (the policy) and ``solver``, or return whether the
    optimum is an inaccurate one used as is (``precise`` refuses it; the caller logs it).

    A failure quotes the solver's own words: its ``message`` if it gave one (not None),
    else its ``status``. Raised while a solver's exception is handled, the error replaces it
    (``from None``): the message already says what the solver said."""
    error: PolicyError | None = None
    if outcome is Outcome.INFEASIBLE:
        error = Infeasible(f"{what}: the constraints cannot all hold")
    elif outcome is Outcome.UNBOUNDED:
        error = SolverFailed(f"{what}: the program is unbounded")
    elif outcome is Outcome.FAILED:
        error = SolverFailed(f"{what}: solver {solver} failed: {message}" if message is not None
                             else f"{what}: solver {solver} ended with status {status}")
    elif outcome is Outcome.INACCURATE and precise:
        error = SolverFailed(f"{what}: solver {solver} reports an inaccurate optimum")
    if error is not None:
        raise error from None
    return outcome is Outcome.INACCURATE
