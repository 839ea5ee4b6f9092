"""Per-type prices that change over time (thesis chapter 6: spot prices).

A price trace file is JSON or YAML: ``{worker_type: [[time_s, dollars_per_hour], ...]}``.
Before a type's first change its price is the static price given beside the trace (or the
first entry's). The simulator applies changes at round boundaries, and so may the scheduler
daemon (its ``cluster.yaml`` key ``prices``, ``gavelsched/daemon/settings.py``): a change is
a reset event, so it re-solves the policy (subject to the core's minimum interval), as
Gavel's ``_update_per_worker_type_prices`` does.

It sits in ``traces/``, the bottom room, so that both executors may read it
(docs/architecture.md, rooms table). ``load`` is a door (docs/design.md, Safety rules): a
file that is not UTF-8, not JSON/YAML, or holds a time or price that is not a finite number
>= 0 is refused with one ``PriceTraceError`` line naming the file and the entry.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import checks
from .checks import BadValue, shown
from .errors import TraceError
from .throughputs import read_document


class PriceTraceError(ValueError):
    """A malformed price trace; the message names the file and the entry."""


@dataclass(frozen=True)
class PriceTrace:
    """Each worker type's price changes, ``(time_s, dollars_per_hour)`` sorted by time."""

    changes: Mapping[str, tuple[tuple[float, float], ...]]

    @classmethod
    def from_mapping(cls, data: Mapping[str, Sequence], where: str = "prices") -> PriceTrace:
        """Check ``data`` (the file's content) into a trace; ``where`` starts every error."""
        if not isinstance(data, Mapping):
            raise PriceTraceError(f"{where}: must map worker type to [[time_s, price], ...], "
                                  f"got {type(data).__name__}")
        out = {}
        for worker_type, points in data.items():
            if not isinstance(worker_type, str) or not worker_type:
                raise PriceTraceError(f"{where}: worker type {shown(worker_type)}: must be a "
                                      "non-empty string")
            if not isinstance(points, (list, tuple)) or not points:
                raise PriceTraceError(f"{where}: {worker_type}: needs a non-empty list of "
                                      "[time_s, price]")
            parsed = []
            for i, point in enumerate(points):
                at = f"{worker_type}[{i}]"
                if not isinstance(point, (list, tuple)) or len(point) != 2:
                    raise PriceTraceError(f"{where}: {at}: must be [time_s, price], got "
                                          f"{shown(point)}")
                try:
                    t = checks.number(point[0], "time_s", low=0)
                    p = checks.price(point[1], "price")
                except BadValue as err:
                    raise PriceTraceError(f"{where}: {at}: {err}") from None
                parsed.append((t, p))
            parsed.sort()
            times = [t for t, _ in parsed]
            twice = next((a for a, b in zip(times, times[1:]) if a == b), None)
            if twice is not None:
                raise PriceTraceError(f"{where}: {worker_type}: two prices at time_s {twice:g}")
            out[worker_type] = tuple(parsed)
        return cls(out)

    @classmethod
    def load(cls, path: str | Path) -> PriceTrace:
        """Read a price trace file (``.json``, ``.yaml``/``.yml``; other names: JSON, then
        YAML); raise ``PriceTraceError`` naming the file and what is wrong."""
        path = Path(path)
        try:
            data = read_document(path)
        except OSError as err:
            raise PriceTraceError(f"{path}: cannot read: {err.strerror or err}") from None
        except TraceError as err:
            raise PriceTraceError(str(err)) from None
        return cls.from_mapping(data, str(path))

    def at(self, t: float, base: Mapping[str, float] | None = None) -> dict[str, float]:
        """Prices in force at time ``t``: ``base`` overlaid by each type's last change at
        or before ``t`` (a type not yet changed keeps its ``base`` price, or else its first
        entry's)."""
        out = dict(base or {})
        for worker_type, points in self.changes.items():
            times = [p[0] for p in points]
            k = bisect.bisect_right(times, t) - 1
            if k >= 0:
                out[worker_type] = points[k][1]
            elif worker_type not in out:
                out[worker_type] = points[0][1]
        return out

    def changes_after(self, t: float, limit: int) -> dict[str, tuple[tuple[float, float], ...]]:
        """Each type's first ``limit`` changes after ``t``, for the types with one."""
        out = {}
        for worker_type, points in self.changes.items():
            k = bisect.bisect_right(points, (t, math.inf))
            if k < len(points):
                out[worker_type] = points[k:k + limit]
        return out

    def next_change_after(self, t: float) -> float | None:
        """The time of the first change after ``t``; None when there is none."""
        nxt = [p[0] for points in self.changes.values() for p in points if p[0] > t]
        return min(nxt) if nxt else None
