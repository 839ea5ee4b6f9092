"""A frozen view of the daemon's state, for the rooms that only read it (``snapshot`` for
``Status``, ``metrics`` for Prometheus): built by the executor thread after a change, so
readers never touch live state (STYLE.md §5, Kueue's snapshot).

It also keeps the allocation against the received share (thesis §5.5) that both show:
``Shares`` remembers the last closed allocation period, because a period younger than a
round says little.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from policies import is_pair_key

from ..core import Period, SchedulerCore
from .store import JobRow, ServerRow

ShareRow = tuple[Mapping[str, float], Mapping[str, float]]   # (X, received fraction)


@dataclass(frozen=True)
class RunView:
    worker_type: str      # the type it runs on, or its configuration's name
    gpus: int
    orphan: bool


@dataclass(frozen=True)
class ServerView:
    row: ServerRow
    alive: bool


@dataclass(frozen=True)
class DaemonView:
    round: int
    policy: str
    round_seconds: float
    now_s: float
    jobs: tuple[JobRow, ...]
    runs: Mapping[str, RunView]
    servers: tuple[ServerView, ...]
    shares: Mapping[str, ShareRow]

    @classmethod
    def of(cls, round_index: int, policy: str, round_seconds: float, now: float,
           jobs: Mapping[str, JobRow], runs: Iterable, servers: Iterable,
           shares: Mapping[str, ShareRow]) -> DaemonView:
        """A picture of live state: the job rows, the run table's ``Run``s and the servers'
        health (``ServerState``), copied into frozen values."""
        return cls(round_index, policy, round_seconds, now, tuple(jobs.values()),
                   {r.job_id: RunView(r.worker_type, len(r.workers), r.orphan) for r in runs},
                   tuple(ServerView(s.row, s.alive) for s in servers), shares)


class Shares:
    """Each active job's X and the fraction of time it received per type (thesis §5.5):
    over the current allocation period, or the last closed one while the current one is
    younger than a round."""

    def __init__(self, core: SchedulerCore, round_seconds: float) -> None:
        self._core, self._round_seconds = core, round_seconds
        self._last: dict[str, dict[str, float]] = {}

    def closed(self, periods: list[Period]) -> None:
        """The periods a re-solve just closed (``SchedulerCore.take_closed_periods``)."""
        for period in periods:
            span = period.end_s - period.start_s
            if span > 0:
                self._last = {
                    key: dict(zip(period.types, (period.received[i] / span).tolist()))
                    for i, key in enumerate(period.keys) if not is_pair_key(key)}

    def at(self, now: float) -> dict[str, ShareRow]:
        shares = self._core.shares(now)
        if now - self._core.last_resolve_s >= self._round_seconds:
            return shares
        return {job: (x, self._last.get(job, got)) for job, (x, got) in shares.items()}
