"""Progress into the core's rows (thesis §5.5: Gavel keeps the time t_mj each combination
spent on each type, from which priorities follow; §5.6: jobs report the steps they made,
at a round's end or at a durable checkpoint).

``credit_round`` applies a round's reports to the round in flight; ``credit_keys`` applies
steps by combination key whenever an executor learns them. Both return the jobs that
finished, in row order; the core removes them."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat

import numpy as np

from ..mechanism.loops import compiled_steps
from .errors import CoreError
from .records import Report, RoundReport, TaskBatch
from .rows import Rows


@dataclass
class RoundInFlight:
    """The round between ``start_round`` and ``end_round``."""

    index: int
    start_s: float
    batch: TaskBatch
    rows: np.ndarray       # the row of each task's combination, valid while version holds
    version: int


def align(reports: Sequence[Report], batch: TaskBatch, index: int) -> RoundReport:
    """One ``Report`` per task that ran, as a ``RoundReport`` aligned with ``batch``."""
    position = {k: i for i, k in enumerate(batch.keys)}
    steps = np.zeros((len(batch), 2))
    seconds = np.zeros(len(batch))
    for report in reports:
        i = position.get(report.key)
        if i is None:
            raise CoreError(f"report for {report.key!r}, which did not run in round {index}")
        steps[i, :len(report.steps)] = report.steps
        seconds[i] = report.seconds
    return RoundReport(steps=steps, seconds=seconds)


def credit_round(rows: Rows, flight: RoundInFlight,
                 reports: RoundReport | Sequence[Report]) -> tuple[str, ...]:
    """The round's seconds into received time, its steps (if any) into steps left."""
    batch = flight.batch
    if not isinstance(reports, RoundReport):
        reports = align(reports, batch, flight.index)
    if len(batch) == 0:
        return ()
    seconds = np.asarray(reports.seconds, dtype=float)
    type_index = batch.type_index
    ok = None                 # every task's combination still has its row
    if flight.version == rows.version:
        where = flight.rows
    else:  # a cancel moved rows mid-round
        where = np.fromiter(map(rows.index.get, batch.keys, repeat(-1)), dtype=int,
                            count=len(batch.keys))
        ok = where >= 0
        where, type_index, seconds = where[ok], type_index[ok], seconds[ok]
    _add_seconds(rows, where, type_index, seconds)
    if reports.steps is None:
        return ()
    steps = np.asarray(reports.steps, dtype=float)
    if ok is not None:
        steps = steps[ok]
    return _take_steps(rows, where, steps)


def credit_keys(rows: Rows, keys: Sequence[str], steps) -> tuple[str, ...]:
    """``steps[i][m]`` steps by member m of the combination ``keys[i]`` (non-empty) into
    steps left."""
    try:
        where = np.array(operator.itemgetter(*keys)(rows.index) if len(keys) != 1
                         else (rows.index[keys[0]],), dtype=int).reshape(-1)
    except KeyError as err:
        raise CoreError(f"unknown job or pair {err.args[0]!r}") from None
    return credit_rows(rows, where, steps)


def credit_rows(rows: Rows, where: np.ndarray, steps) -> tuple[str, ...]:
    """``credit_keys`` with the combinations' rows known (``where``)."""
    return _take_steps(rows, where, _as_steps(steps, len(where)))


def _as_steps(steps, k: int) -> np.ndarray:
    """``steps`` as a (k, m) array; a (k, m) array of numbers as it is (a round's integers:
    taken off the float rows, each is cast exactly as ``astype(float)`` casts it)."""
    if (isinstance(steps, np.ndarray) and steps.ndim == 2 and len(steps) == k
            and steps.dtype.kind in "iuf"):
        return steps
    return np.asarray(steps, dtype=float).reshape(k, -1)


def _add_seconds(rows: Rows, where: np.ndarray, type_index: np.ndarray,
                 seconds: np.ndarray) -> None:
    """Task i's ``seconds`` into the received time of the combination at row ``where[i]``
    on column ``type_index[i]``, which it has now run on (by the compiled loop when built,
    ``mechanism/loops.py``). Each combination runs at most once a round: no repeated
    indices (both paths would keep a repeated one's last sum, as numpy does)."""
    if compiled_steps is not None:
        compiled_steps.add_seconds(rows.received, rows.ran, where, type_index, seconds)
        return
    rows.received[where, type_index] += seconds
    rows.ran[where, type_index] = True


def _take_steps(rows: Rows, where: np.ndarray, steps: np.ndarray) -> tuple[str, ...]:
    """``steps[i, m]`` off the steps left of member m of the combination at row
    ``where[i]``; the jobs with none left, in row order (by the compiled loop when built,
    ``mechanism/loops.py``)."""
    if compiled_steps is not None:
        done = compiled_steps.take_steps(rows.left, rows.member_rows, where, steps)
        return tuple(rows.keys[i] for i in done) if done else ()
    members = rows.members_of(where)[:, :steps.shape[1]]
    has = members >= 0
    touched = members[has]
    rows.left[touched] -= steps[has]
    finished = touched[rows.left[touched] <= 1e-9]
    if not len(finished):       # (most calls: ``np.sort`` costs more than the rest)
        return ()
    return tuple(rows.keys[i] for i in np.sort(finished).tolist())
