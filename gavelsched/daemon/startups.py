"""Restart statistics per job type: how long a fresh run takes from its round's start to
its first ``InitJob`` (imports, model build, checkpoint load), the cost a restart takes out
of its round (thesis §5.6-5.7, what the simulator charges as preemption overhead), and how
long a run whose lease ended takes to save and exit. Their sum is what a restart costs a
job (``restart_s``), which the core's restart rule weighs (``core/restarts.py``).

The means are kept in the store's meta table (``startup_s/<job type>`` over
``startup_n/<job type>`` runs, ``save_s/`` over ``save_n/``), so they survive a scheduler
restart.
"""

from __future__ import annotations

from .meta import SAVE_N, SAVE_S, STARTUP_N, STARTUP_S, MetaKey
from .store import Store


class _Means:
    """A running mean per job type, kept under two meta keys (mean, count)."""

    def __init__(self, store: Store, mean_key: MetaKey, count_key: MetaKey) -> None:
        self._store, self._mean_key, self._count_key = store, mean_key, count_key
        self._means: dict[str, tuple[float, int]] = {}   # job type -> (mean s, samples)

    def get(self, job_type: str) -> tuple[float, int]:
        got = self._means.get(job_type)
        if got is None:
            got = (float(self._store.get_meta(self._mean_key.key(job_type), "0") or 0.0),
                   int(self._store.get_meta(self._count_key.key(job_type), "0") or 0))
            self._means[job_type] = got
        return got

    def add(self, job_type: str, seconds: float) -> None:
        mean, n = self.get(job_type)
        mean = (n * mean + seconds) / (n + 1)
        self._means[job_type] = (mean, n + 1)
        self._store.set_meta({self._mean_key.key(job_type): f"{mean:.3f}",
                              self._count_key.key(job_type): n + 1})


class Startups:
    def __init__(self, store: Store) -> None:
        self._startups = _Means(store, STARTUP_S, STARTUP_N)
        self._saves = _Means(store, SAVE_S, SAVE_N)

    def mean(self, job_type: str) -> tuple[float, int]:
        """(mean start-up seconds, fresh runs) recorded for ``job_type``; (0, 0) before the
        first."""
        return self._startups.get(job_type)

    def record(self, job_type: str, seconds: float) -> None:
        """A fresh run of ``job_type`` started up in ``seconds``."""
        self._startups.add(job_type, seconds)

    def record_save(self, job_type: str, seconds: float) -> None:
        """A run of ``job_type`` saved and exited ``seconds`` after its lease ended."""
        self._saves.add(job_type, seconds)

    def restart_s(self, job_type: str) -> float:
        """What a restart costs a job of ``job_type``: its mean start-up and save."""
        return self._startups.get(job_type)[0] + self._saves.get(job_type)[0]
