"""Typed failures of policies (STYLE.md §3: status codes, never an empty allocation)."""

from __future__ import annotations


class PolicyError(Exception):
    """Base class of every error a policy raises on purpose."""


class ProblemError(PolicyError, ValueError):
    """The problem itself is malformed: a missing field, a negative count, a bad value.

    The message names the offending field, e.g. ``jobs[3].scale_factor: must be >= 1, got 0``.
    """


class UnknownPolicy(PolicyError, KeyError):
    """No policy is registered under the requested name."""

    def __str__(self) -> str:  # KeyError quotes its argument; we want a plain sentence
        return str(self.args[0])


class Infeasible(PolicyError):
    """The policy's constraints cannot all hold (e.g. SLOs that no allocation can meet).

    ``jobs`` names the jobs whose constraints conflict, when the policy can tell.
    """

    def __init__(self, reason: str, jobs: tuple[str, ...] = ()) -> None:
        super().__init__(reason)
        self.reason = reason
        self.jobs = tuple(jobs)


class SolverFailed(PolicyError):
    """The solver gave up or returned an unusable status; carries the solver's own words."""
