"""The cluster's utilisation per round, as the dashboard draws it (issue #18): GPUs held
over GPUs alive, and the GPUs each entity's jobs hold (its share over time; jobs of no
entity are the rest of ``busy``), one point per round, kept in a bounded ring and, when the
scheduler has a state directory, in ``utilisation.jsonl`` there, so that a restarted
scheduler shows the history it had. A point of an older file has no ``entities``.

The file is appended to once per round (the point of the round that just ended) and read
once, at start. It is outside input: a line that is not a valid point (not UTF-8, not JSON,
a number out of range) is skipped and counted in one log line; a file grown past twice the
ring is rewritten atomically with the ring's points.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
from collections import deque
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)

HISTORY = 720          # rounds of utilisation kept
KEYS = {"round", "now_s", "busy", "total"}      # of every point; "entities" may be there


class Utilisation:
    """One point per round: ``{"round", "now_s", "busy", "total"}`` and, when ``record`` is
    given them, ``"entities"``: ``{name: GPUs held}``, the entities holding some; the latest
    point of a round replaces the one before it (``record``)."""

    def __init__(self, path: Path | None = None, size: int = HISTORY) -> None:
        self._path, self._size = path, size
        self._points: deque[dict] = deque(maxlen=size)
        self._lock = threading.Lock()
        if path is not None:
            self._points.extend(_load(path, size))

    def record(self, round_index: int, now_s: float, busy: int, total: int,
               entities: Mapping[str, int] | None = None) -> None:
        point = {"round": int(round_index), "now_s": float(now_s), "busy": int(busy),
                 "total": int(total)}
        if entities is not None:
            point["entities"] = {str(k): int(v) for k, v in sorted(entities.items()) if v > 0}
        with self._lock:
            last = self._points[-1] if self._points else None
            if last is not None and last["round"] == point["round"]:
                self._points[-1] = point
                return
            if last is not None and last["round"] > point["round"]:
                return                  # (a round number from before a restore)
            self._points.append(point)
            if last is not None:
                self._save(last)

    def points(self) -> list[dict]:
        with self._lock:
            return list(self._points)

    def flush(self) -> None:
        """Write the current round's point too (at shutdown)."""
        with self._lock:
            if self._points:
                self._save(self._points[-1])

    def _save(self, point: dict) -> None:
        if self._path is None:
            return
        try:
            with open(self._path, "a", encoding="utf-8") as out:
                out.write(json.dumps(point) + "\n")
        except OSError as err:
            log.warning("utilisation history not saved to %s: %s", self._path, err.strerror)


def _valid(point) -> bool:
    if not isinstance(point, dict) or set(point) - {"entities"} != KEYS:
        return False
    whole = [point[k] for k in ("round", "busy", "total")]
    entities = point.get("entities", {})
    return (all(type(v) is int and 0 <= v < 2**63 for v in whole)
            and point["busy"] <= point["total"]
            and type(point["now_s"]) in (int, float) and math.isfinite(point["now_s"])
            and point["now_s"] >= 0
            and isinstance(entities, dict)
            and all(type(v) is int and v > 0 for v in entities.values())
            and sum(entities.values()) <= point["busy"])


def _load(path: Path, size: int) -> list[dict]:
    """The last ``size`` valid points of ``path`` (one per round, the latest kept)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as err:
        log.warning("utilisation history %s not read: %s", path, err.strerror)
        return []
    by_round: dict[int, dict] = {}
    lines = data.splitlines()
    bad = 0
    for line in lines:
        try:
            point = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            point = None
        if not _valid(point):
            bad += 1
            continue
        by_round[point["round"]] = point
    if bad:
        log.warning("utilisation history %s: %d bad line%s skipped", path, bad,
                    "s" if bad != 1 else "")
    points = [by_round[r] for r in sorted(by_round)][-size:]
    if len(lines) > 2 * size or bad:
        _rewrite(path, points)
    return points


def _rewrite(path: Path, points: list[dict]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text("".join(json.dumps(p) + "\n" for p in points), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as err:
        log.warning("utilisation history %s not compacted: %s", path, err.strerror)
