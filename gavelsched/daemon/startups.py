"""Start-up statistics: how long a fresh run of each job type takes from its round's start
to its first ``InitJob`` (imports, model build, checkpoint load), the cost a restart takes
out of its round (thesis §5.6-5.7, what the simulator charges as preemption overhead).

The mean per job type is kept in the store's meta table (``startup_s/<job type>`` over
``startup_n/<job type>`` runs), so it survives a scheduler restart.
"""

from __future__ import annotations

from .meta import STARTUP_N, STARTUP_S
from .store import Store


class Startups:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._means: dict[str, tuple[float, int]] = {}   # job type -> (mean s, runs)

    def mean(self, job_type: str) -> tuple[float, int]:
        """(mean start-up seconds, fresh runs) recorded for ``job_type``; (0, 0) before the
        first."""
        got = self._means.get(job_type)
        if got is None:
            got = (float(self._store.get_meta(STARTUP_S.key(job_type), "0") or 0.0),
                   int(self._store.get_meta(STARTUP_N.key(job_type), "0") or 0))
            self._means[job_type] = got
        return got

    def record(self, job_type: str, seconds: float) -> None:
        mean, n = self.mean(job_type)
        mean = (n * mean + seconds) / (n + 1)
        self._means[job_type] = (mean, n + 1)
        self._store.set_meta({STARTUP_S.key(job_type): f"{mean:.3f}",
                              STARTUP_N.key(job_type): n + 1})
