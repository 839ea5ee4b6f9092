"""Jobs submitted and not admitted yet: the core admits them at the next round boundary
(thesis §5.5: arrivals are reset events, taken in at a round's start), with what came with
each (its own steps/s, the steps a restored job had made). Every id ever submitted is
remembered, so that a second submission is refused."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import NamedTuple

from .errors import CoreError
from .records import JobSpec


class Arrival(NamedTuple):
    spec: JobSpec
    arrival_s: float
    own: dict[str, float] | None   # its own steps/s by type (a trace's), or the source's
    steps_done: int                # durable steps it already made (a daemon's restore)


class Arrivals:
    """The waiting jobs, in submission order (which breaks ties in every queue)."""

    def __init__(self) -> None:
        self._waiting: dict[str, Arrival] = {}    # (insertion ordered)
        self._known: set[str] = set()

    def __bool__(self) -> bool:
        return bool(self._waiting)

    def ids(self) -> tuple[str, ...]:
        return tuple(self._waiting)

    def get(self, job_id: str) -> Arrival | None:
        return self._waiting.get(job_id)

    def submit(self, job: JobSpec, now: float, steps_done: int = 0,
               throughputs: Mapping[str, float] | None = None) -> None:
        """``SchedulerCore.submit``; ``CoreError`` for an id seen before or steps outside
        the job."""
        if job.id in self._known:
            raise CoreError(f"job {job.id!r} submitted twice")
        if not 0 <= steps_done < job.total_steps:
            raise CoreError(f"job {job.id!r}: steps_done {steps_done} outside "
                            f"[0, {job.total_steps})")
        self._known.add(job.id)
        own = None if throughputs is None else {t: float(v) for t, v in throughputs.items()}
        self._waiting[job.id] = Arrival(job, float(now), own, int(steps_done))

    def cancel(self, job_id: str) -> bool:
        """Whether the job was waiting (it is gone now)."""
        return self._waiting.pop(job_id, None) is not None

    def forget(self, job_id: str) -> None:
        """The job may be submitted again (a withdrawn job's return)."""
        self._known.discard(job_id)

    def update(self, job_id: str, **changes) -> bool:
        """Change a waiting job's ``JobSpec`` fields; whether it was waiting."""
        waiting = self._waiting.get(job_id)
        if waiting is not None:
            self._waiting[job_id] = waiting._replace(spec=replace(waiting.spec, **changes))
        return waiting is not None

    def update_each(self, change: Callable[[JobSpec], JobSpec | None]) -> None:
        """``change(spec)`` for each waiting job: its new spec, or None to keep it."""
        for job_id, waiting in list(self._waiting.items()):
            spec = change(waiting.spec)
            if spec is not None:
                self._waiting[job_id] = waiting._replace(spec=spec)

    def take(self) -> Iterable[Arrival]:
        """The waiting jobs, in order, to admit; none waits after."""
        out, self._waiting = list(self._waiting.values()), {}
        return out
