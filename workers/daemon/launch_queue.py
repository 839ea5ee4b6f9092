"""The worker's launches that wait for their GPUs (thesis §5.6; docs/runtime.md).

A RunJob whose GPUs another job still holds (it is saving its checkpoint at the round's
end) waits here, and starts when they are free. A launch in progress counts as running:
a RunJob that comes for the same run while it is being launched (its process not yet known
to the launcher) waits, and is applied to the run once the launch has ended, never
launched a second time. A stopping worker closes the queue: nothing waiting starts after
that. The worker's RPC threads and its monitor thread share the queue; it has a lock of its
own.
"""

from __future__ import annotations

import threading

from .launcher import Launcher, LaunchSpec


class Refused(Exception):
    """A RunJob the queue does not take: older than a waiting launch of the same job, or
    come after the queue closed."""


class LaunchQueue:
    """Launch specs by job, oldest first, and the GPUs of the launches under way."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, LaunchSpec] = {}
        self._starting: dict[int, set[str]] = {}   # GPU -> jobs whose launch is under way
        self._closed = False

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._waiting)

    def add(self, spec: LaunchSpec) -> list[LaunchSpec]:
        """Queue ``spec`` (replacing a waiting launch of the same job, in its place). A later
        placement on the same GPUs supersedes a launch still waiting for them (the scheduler
        has moved on; running both would oversubscribe a GPU), but for the partner of a
        co-located pair, which runs beside it: returns the superseded, now dropped.
        Raises ``Refused`` when a newer run of the job waits, or the queue is closed."""
        with self._lock:
            if self._closed:
                raise Refused(f"RunJob for job {spec.job_id} refused: this worker is stopping")
            older = self._waiting.get(spec.job_id)
            if older is not None and older.generation > spec.generation:
                raise Refused(f"stale RunJob for job {spec.job_id}: generation "
                              f"{older.generation} waits")
            superseded = [s for job, s in self._waiting.items()
                          if job not in (spec.job_id, spec.partner)
                          and set(s.gpus) & set(spec.gpus)]
            for s in superseded:
                del self._waiting[s.job_id]
            self._waiting[spec.job_id] = spec
        return superseded

    def ready(self, launcher: Launcher) -> list[LaunchSpec]:
        """Take the waiting launches whose GPUs are free now (no other job on them, or only
        its partner of a co-located pair, thesis §5.3.1) and whose job neither runs nor is
        being launched; they count as being launched until ``launched``."""
        with self._lock:
            if self._closed:
                return []
            busy = launcher.busy_gpus()
            for g, jobs in self._starting.items():
                busy.setdefault(g, set()).update(jobs)
            running = set(launcher.running_jobs()).union(*self._starting.values())
            ready = []
            for spec in list(self._waiting.values()):    # oldest first
                others = {spec.job_id, spec.partner}
                if spec.job_id in running or any(busy.get(g, others) - others
                                                 for g in spec.gpus):
                    continue   # (an older run of the same job is still exiting or starting)
                ready.append(spec)
                del self._waiting[spec.job_id]
                for g in spec.gpus:
                    busy.setdefault(g, set()).add(spec.job_id)
                    self._starting.setdefault(g, set()).add(spec.job_id)
        return ready

    def launched(self, spec: LaunchSpec, launcher: Launcher) -> LaunchSpec | None:
        """``spec``'s launch has ended (started or failed). Returns the spec of a RunJob for
        the same run or a newer one that came meanwhile, for the caller to apply to the run (same
        generation: extend its lease; newer: supersede it); one of the same generation
        leaves the queue. None when there is none, or the run is not there."""
        job, gen = spec.job_id, spec.generation
        with self._lock:
            for g in spec.gpus:
                self._starting.get(g, set()).discard(job)
            self._starting = {g: jobs for g, jobs in self._starting.items() if jobs}
            waiting = self._waiting.get(job)
            if waiting is None or launcher.generation_of(job) != gen \
                    or waiting.generation < gen:
                return None
            if waiting.generation == gen:
                del self._waiting[job]
            return waiting

    def drop(self, job_id: str, generation: int = 0) -> LaunchSpec | None:
        """Remove the waiting launch of ``job_id`` (with a ``generation``, only that run's);
        returns it, or None."""
        with self._lock:
            spec = self._waiting.get(job_id)
            if spec is None or (generation and spec.generation != generation):
                return None
            return self._waiting.pop(job_id)

    def clear(self) -> list[LaunchSpec]:
        """Remove and return every waiting launch."""
        with self._lock:
            waiting, self._waiting = list(self._waiting.values()), {}
        return waiting

    def close(self) -> list[LaunchSpec]:
        """``clear``, and take nothing from now on (the worker is stopping)."""
        with self._lock:
            self._closed = True
        return self.clear()
