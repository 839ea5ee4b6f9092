"""Per-type prices that change over time (thesis chapter 6: spot prices).

A price trace file is JSON or YAML: ``{worker_type: [[time_s, dollars_per_hour], ...]}``.
Before a type's first change its price is the static price given to the simulator (or the
first entry's). The simulator applies changes at round boundaries; a change is a reset
event, so it re-solves the policy (subject to the core's minimum interval), as Gavel's
``_update_per_worker_type_prices`` does.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


class PriceTraceError(ValueError):
    """A malformed price trace; the message names the file and the entry."""


@dataclass(frozen=True)
class PriceTrace:
    changes: Mapping[str, tuple[tuple[float, float], ...]]

    @classmethod
    def from_mapping(cls, data: Mapping[str, Sequence], where: str = "prices") -> PriceTrace:
        if not isinstance(data, Mapping):
            raise PriceTraceError(f"{where}: must map worker type to [[time_s, price], ...]")
        out = {}
        for worker_type, points in data.items():
            if not isinstance(points, (list, tuple)) or not points:
                raise PriceTraceError(f"{where}: {worker_type}: needs a non-empty list")
            parsed = []
            for i, point in enumerate(points):
                try:
                    t, p = float(point[0]), float(point[1])
                except (TypeError, ValueError, IndexError):
                    raise PriceTraceError(
                        f"{where}: {worker_type}[{i}]: must be [time_s, price], got {point!r}"
                    ) from None
                if p < 0 or t < 0:
                    raise PriceTraceError(f"{where}: {worker_type}[{i}]: negative value")
                parsed.append((t, p))
            parsed.sort()
            out[str(worker_type)] = tuple(parsed)
        return cls(out)

    @classmethod
    def load(cls, path: str | Path) -> PriceTrace:
        path = Path(path)
        text = path.read_text()
        if path.suffix in (".yaml", ".yml"):
            import yaml
            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as err:
                raise PriceTraceError(f"{path}: not valid YAML ({err})") from None
        else:
            try:
                data = json.loads(text)
            except json.JSONDecodeError as err:
                raise PriceTraceError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
        return cls.from_mapping(data, str(path))

    def at(self, t: float, base: Mapping[str, float] | None = None) -> dict[str, float]:
        """Prices in force at time ``t``."""
        out = dict(base or {})
        for worker_type, points in self.changes.items():
            times = [p[0] for p in points]
            k = bisect.bisect_right(times, t) - 1
            if k >= 0:
                out[worker_type] = points[k][1]
            elif worker_type not in out:
                out[worker_type] = points[0][1]
        return out

    def next_change_after(self, t: float) -> float | None:
        nxt = [p[0] for points in self.changes.values() for p in points if p[0] > t]
        return min(nxt) if nxt else None
