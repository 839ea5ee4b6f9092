"""Accounting (``gavelsched usage``): GPU-hours and cost of the jobs' runs, by user, entity
or worker type, at the price per GPU-hour in force when each run ran (thesis §6: cost is a
property of the records, reported outside the core; docs/style.md §6.6). Pure: runs in, a
report out, no I/O and no clock (``parse_since`` is told ``now``).

A report's totals are the sum over the runs (``math.fsum`` of the same per-run floats that
its lines sum, so they are the same for every ``by``); each run is in exactly one line,
and the lines add up to the totals up to the last bit of rounding. A run with no user,
entity or type counts under ``NONE`` (``-``, as ``status`` shows a missing value).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..rpc import pb

__all__ = ["BY", "NONE", "UsageError", "UsageLine", "UsageReport", "UsageRun", "parse_since",
           "usage_report"]

BY = ("user", "entity", "type")     # what a report's lines are keyed by
NONE = "-"                          # the key of a run without a user, entity or type
HOUR_S = 3600.0


PAIR_SHARE = 0.5     # a co-located pair's job: half of its GPUs' time (``UsageRun.share``)


class UsageError(ValueError):
    """A bad run, ``by`` or ``since``: one line naming it."""


@dataclass(frozen=True)
class UsageRun:
    """One run of a job (from its launch to its end): who and what it ran for, on how many
    GPUs of which type, when (Unix seconds), ``price``: dollars per GPU-hour in force
    when it ran (0: unpriced), and ``share``: the part of its GPUs' time that was its own
    (1; a job of a co-located pair, which shares them with the other job, thesis §5.3.1:
    ``PAIR_SHARE``). An end before the start counts as no time."""

    job_id: str
    user: str
    entity: str
    worker_type: str
    gpus: int
    start_unix: float
    end_unix: float
    price: float = 0.0
    share: float = 1.0

    def __post_init__(self) -> None:
        if type(self.gpus) is not int or self.gpus < 0:
            raise UsageError(f"usage run of job {self.job_id}: gpus must be a whole number "
                             f">= 0, got {self.gpus!r}")
        for name in ("start_unix", "end_unix", "price", "share"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value)):
                raise UsageError(f"usage run of job {self.job_id}: {name} must be a finite "
                                 f"number, got {value!r}")
        if self.price < 0:
            raise UsageError(f"usage run of job {self.job_id}: price must be >= 0, got "
                             f"{self.price!r}")
        if not 0 < self.share <= 1:
            raise UsageError(f"usage run of job {self.job_id}: share must be in (0, 1], got "
                             f"{self.share!r}")

    def counts(self, since_unix: float = 0.0) -> bool:
        """Whether it ran after ``since_unix`` (0: every run counts)."""
        return since_unix <= 0 or self.end_unix > since_unix

    def gpu_seconds(self, since_unix: float = 0.0) -> float:
        """GPUs × seconds it ran after ``since_unix`` (its start clipped to it), times its
        ``share`` of them."""
        return self.gpus * self.share * max(0.0, self.end_unix - max(self.start_unix,
                                                                      since_unix))

    def gpu_hours(self, since_unix: float = 0.0) -> float:
        """GPUs × hours it ran after ``since_unix`` (its start clipped to it)."""
        return self.gpu_seconds(since_unix) / HOUR_S

    def cost(self, since_unix: float = 0.0) -> float:
        """Dollars for ``gpu_hours(since_unix)`` at its price."""
        return self.gpu_hours(since_unix) * self.price

    def key(self, by: str) -> str:
        """Its line's key in a report ``by`` user, entity or (worker) type."""
        value = {"user": self.user, "entity": self.entity, "type": self.worker_type}[by]
        return value or NONE


@dataclass(frozen=True)
class UsageLine:
    """One user's, entity's or worker type's usage: GPU-hours, dollars, runs and distinct
    jobs."""

    key: str
    gpu_hours: float
    cost: float
    runs: int
    jobs: int

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "gpu_hours": self.gpu_hours, "cost": self.cost,
                "runs": self.runs, "jobs": self.jobs}


@dataclass(frozen=True)
class UsageReport:
    """``gavelsched usage``: lines by ``by`` (most GPU-hours first, then by key), and the
    totals over every run after ``since_unix`` (0: since the beginning)."""

    by: str
    since_unix: float
    lines: tuple[UsageLine, ...]
    gpu_hours: float
    cost: float
    runs: int

    def to_dict(self) -> dict[str, Any]:
        """``usage --json``: ``{"by", "since_unix", "lines": [{"key", "gpu_hours", "cost",
        "runs", "jobs"}, ...], "gpu_hours", "cost", "runs"}``."""
        return {"by": self.by, "since_unix": self.since_unix,
                "lines": [line.to_dict() for line in self.lines],
                "gpu_hours": self.gpu_hours, "cost": self.cost, "runs": self.runs}

    def to_pb(self) -> pb.UsageResponse:
        """The ``Usage`` answer (the wire has no ``since_unix``: the request carries it)."""
        return pb.UsageResponse(
            by=self.by, gpu_hours=self.gpu_hours, cost=self.cost, runs=self.runs,
            lines=[pb.UsageLine(key=x.key, gpu_hours=x.gpu_hours, cost=x.cost, runs=x.runs,
                                jobs=x.jobs) for x in self.lines])

    @classmethod
    def from_pb(cls, msg: pb.UsageResponse, since_unix: float = 0.0) -> UsageReport:
        """The report of a ``pb.UsageResponse`` to a request for ``since_unix``."""
        return cls(msg.by, float(since_unix),
                   tuple(UsageLine(x.key, x.gpu_hours, x.cost, x.runs, x.jobs)
                         for x in msg.lines), msg.gpu_hours, msg.cost, msg.runs)


def usage_report(runs: Iterable[UsageRun], by: str = "user",
                 since_unix: float = 0.0) -> UsageReport:
    """The usage of ``runs`` after ``since_unix`` (each run's part after it), by ``by``
    (one of ``BY``)."""
    if by not in BY:
        raise UsageError(f"usage by {by!r}: must be one of {', '.join(BY)}")
    if not (isinstance(since_unix, (int, float)) and math.isfinite(since_unix)):
        raise UsageError(f"usage since {since_unix!r}: must be a finite Unix time")
    counted = [r for r in runs if r.counts(since_unix)]
    hours = [r.gpu_hours(since_unix) for r in counted]
    dollars = [h * r.price for h, r in zip(hours, counted)]
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(counted):
        groups.setdefault(r.key(by), []).append(i)
    lines = [UsageLine(key, math.fsum(hours[i] for i in idx),
                       math.fsum(dollars[i] for i in idx), len(idx),
                       len({counted[i].job_id for i in idx}))
             for key, idx in groups.items()]
    lines.sort(key=lambda x: (-x.gpu_hours, x.key))
    return UsageReport(by, float(since_unix), tuple(lines), math.fsum(hours),
                       math.fsum(dollars), len(counted))


_AGE = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNIX = re.compile(r"\d+(?:\.\d+)?")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": HOUR_S, "d": 86400.0, "w": 604800.0}


def parse_since(text: str, now_unix: float) -> float:
    """``--since``: an ISO date or time (``2026-11-01``, ``2026-11-01T12:00``; without a
    zone: UTC), a Unix time (``1793491200``) or an age before ``now_unix`` (``7d``,
    ``12h``, ``30m``; also ``s`` and ``w``), as a Unix time (never below 0)."""
    s = text.strip()
    if m := _AGE.fullmatch(s):
        return max(0.0, now_unix - float(m[1]) * _UNIT_S[m[2]])
    if _UNIX.fullmatch(s) and math.isfinite(float(s)):
        return float(s)
    try:
        when = datetime.fromisoformat(s)
    except ValueError:
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise UsageError(f"since {shown!r}: not a date (2026-11-01, 2026-11-01T12:00), a Unix "
                         f"time or an age (7d, 12h, 30m)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, when.timestamp())
