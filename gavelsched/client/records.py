"""The records ``Client`` returns besides the status (``status.py``): a drain's answer, a
piece of a job's output and a prediction."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Drained", "LogChunk", "Prediction"]


@dataclass(frozen=True)
class Drained:
    """The answer to ``drain``: whether the server is out of service now, the job runs
    still on it (0: safe to stop it), and the scheduler's one line for the operator."""

    drained: bool
    runs: int
    message: str


@dataclass(frozen=True)
class LogChunk:
    """Bytes of one of a job's log files (docs/runtime.md, "Logs"): ``round``, ``rank``,
    ``stream`` ("out" or "err"), from worker server ``server_id`` on ``host``, starting
    at byte ``offset``. ``error`` instead of data: that server could not be read (one
    line)."""

    round: int
    rank: int
    stream: str
    server_id: int
    host: str
    offset: int
    data: bytes
    error: str = ""

    @classmethod
    def from_pb(cls, chunk) -> LogChunk:
        f = chunk.file
        return cls(f.round, f.rank, f.stream, chunk.server_id, chunk.host, chunk.offset,
                   chunk.data, chunk.error)


@dataclass(frozen=True)
class Prediction:
    """``Client.predict``: the live state replayed in the simulator under the daemon's
    rules without and with the job (``simulator/twin.py``). ``state`` is that live state
    (``simulator.live.LiveState``: its jobs, clock and rules); ``job`` the new job's
    ``Eta`` and ``before``/``after`` every live job's, in seconds from ``state.now_s``
    (``start_s`` None: started already, or never starts; ``finish_s`` None: never
    finishes in the replay). ``why_sooner``: for each live job that finishes sooner with
    the new job (a delay below zero), why (``simulator.whatif.why_sooner``)."""

    state: Any
    job: Any
    before: Mapping[str, Any]
    after: Mapping[str, Any]
    why_sooner: Mapping[str, str] = field(default_factory=dict)   # jobs that finish sooner

    def delay_s(self, job_id: str) -> float | None:
        """How much later (< 0: earlier) live job ``job_id`` finishes with the new job;
        None when either replay never finishes it."""
        after, before = self.after[job_id].finish_s, self.before[job_id].finish_s
        return None if after is None or before is None else after - before


@dataclass(frozen=True)
class Submitted:
    """What a submission made: its jobs' ids (one, or an array's copies) and the array's
    id (None: one job)."""

    job_ids: tuple[str, ...]
    array_id: str | None = None


@dataclass(frozen=True)
class HistoryEvent:
    """One entry of a job's history (``gavelsched history JOB``): who did what, when."""

    time_unix: float
    user: str
    action: str
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"time_unix": self.time_unix, "user": self.user, "action": self.action,
                "detail": self.detail}
