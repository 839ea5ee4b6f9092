"""Who changed what, and when (issue #28): every state-changing call is one log line and
one event in the history of each job it touched (``gavelsched history JOB``), kept in the
store's ``events`` table; the scheduler's own changes (a job's start, its end) are events
of the user ``scheduler``. Calls that touch no job (drain, reload) are log lines only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from policies.errors import named

from .store import Store

log = logging.getLogger("gavelsched.audit")

SCHEDULER = "scheduler"       # the user of the scheduler's own events


@dataclass(frozen=True)
class Event:
    """One entry of a job's history."""

    time_unix: float
    user: str
    action: str
    detail: str


class Audit:
    """Records events through the store; ``clock`` gives Unix time."""

    def __init__(self, store: Store, clock: Callable[[], float] = time.time) -> None:
        self.store, self._clock = store, clock

    def record(self, user: str, action: str, job_ids: Iterable[str] = (),
               detail: str = "") -> None:
        """``user`` did ``action`` (to ``job_ids``): a log line, and one event per job."""
        ids = list(job_ids)
        now = self._clock()
        log.info("%s: %s%s%s", user, action, f" {named(ids)}" if ids else "",
                 f" ({detail})" if detail else "")
        if ids:
            self.store.add_events((job_id, now, user, action, detail) for job_id in ids)

    def history(self, job_id: str) -> list[Event]:
        return [Event(*row) for row in self.store.events(job_id)]
