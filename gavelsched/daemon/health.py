"""Which worker servers are alive (thesis §5.6), and which jobs are suspected.

A server is alive from its registration until it misses ``HEARTBEAT_MISSES`` heartbeats in a
row. A rank of a multi-server job that exits nonzero makes its job a *suspect*: gloo reports
a dead peer's lost connection as the rank's own failure, so the job fails only if no server
of its run is found dead within ``(HEARTBEAT_MISSES + 1)`` heartbeats. Pure bookkeeping on
a monotonic clock the caller passes in; the executor acts on what it returns.

Heartbeats are the one thing other threads touch (``seen``, under a lock): a heartbeat is
taken as it arrives, never queued behind the executor's work (at 50,000 jobs a plan holds
the executor thread for seconds, and workers whose heartbeats waited there were failed).
Nor do the executor's own stalls count as a worker's silence (``excuse``): while it was
busy, the handlers that wait on it may have held every gRPC thread, heartbeats included.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from .store import ServerRow

HEARTBEAT_MISSES = 3


@dataclass
class ServerState:
    row: ServerRow
    alive: bool
    last_seen: float            # monotonic
    registration: int = 0       # its newest registration's fencing token (0: none yet)


class Health:
    def __init__(self, heartbeat_seconds: float, servers: list[ServerRow] = ()) -> None:
        self.heartbeat_seconds = heartbeat_seconds
        # restored servers are down until they register again
        self.servers: dict[int, ServerState] = {s.id: ServerState(s, False, 0.0) for s in servers}
        # job -> (deadline, reason, exit code)
        self._suspects: dict[str, tuple[float, str, int]] = {}
        self._lock = threading.Lock()    # ``seen`` (any thread) against the executor's writes

    # ---- servers ------------------------------------------------------------------------
    def up(self, row: ServerRow, mono: float, registration: int = 0) -> None:
        """``row`` registered (again) at ``mono``, with fencing token ``registration``."""
        with self._lock:
            self.servers[row.id] = ServerState(row, alive=True, last_seen=mono,
                                               registration=registration)

    def seen(self, server_id: int, mono: float) -> ServerState | None:
        """A heartbeat, from any thread: the server, or None when it is unknown or was
        failed (then it registers again)."""
        with self._lock:
            server = self.servers.get(server_id)
            if server is None or not server.alive:
                return None
            server.last_seen = max(server.last_seen, mono)
            return server

    def newly_dead(self, mono: float) -> list[ServerState]:
        """Servers silent for ``HEARTBEAT_MISSES`` heartbeats, now marked down."""
        limit = HEARTBEAT_MISSES * self.heartbeat_seconds
        with self._lock:
            dead = [s for s in self.servers.values()
                    if s.alive and mono - s.last_seen > limit]
            for server in dead:
                server.alive = False
        return dead

    def excuse(self, busy_s: float, mono: float) -> None:
        """The executor was busy for ``busy_s`` seconds up to ``mono``: that time does not
        count as any server's silence (its heartbeat may have waited for a gRPC thread that
        a handler held while it waited on the executor). A server that really died is
        failed that much later."""
        if busy_s <= 0:
            return
        with self._lock:
            for server in self.servers.values():
                if server.alive:
                    server.last_seen = min(mono, server.last_seen + busy_s)

    def alive(self, server_id: int) -> bool:
        server = self.servers.get(server_id)
        return server is not None and server.alive

    def address(self, server_id: int) -> str:
        return self.servers[server_id].row.address

    def addresses(self) -> dict[int, str]:
        return {sid: s.row.address for sid, s in self.servers.items()}

    def alive_gpus(self) -> int:
        return sum(len(s.row.workers) for s in self.servers.values() if s.alive)

    def gpus_by_type(self) -> dict[str, int]:
        """GPUs registered per worker type, alive or not (the size a job may ask for)."""
        gpus: dict[str, int] = {}
        for s in self.servers.values():
            gpus[s.row.worker_type] = gpus.get(s.row.worker_type, 0) + len(s.row.workers)
        return gpus

    # ---- suspects -----------------------------------------------------------------------
    def suspect(self, job_id: str, reason: str, exit_code: int, mono: float) -> float | None:
        """A rank of ``job_id`` failed: the seconds until the job fails unless a server of
        its run is found dead first; None when it was already suspected."""
        if job_id in self._suspects:
            return None
        limit = (HEARTBEAT_MISSES + 1) * self.heartbeat_seconds
        self._suspects[job_id] = (mono + limit, reason, exit_code)
        return limit

    def clear(self, job_id: str) -> bool:
        """A server of the job's run died: the rank's failure was its peer's. Was it
        suspected?"""
        return self._suspects.pop(job_id, None) is not None

    def due(self, mono: float) -> list[tuple[str, str, int]]:
        """Suspects whose deadline passed, removed: (job, reason, exit code) for each."""
        out = [(job, reason, code) for job, (deadline, reason, code) in self._suspects.items()
               if mono >= deadline]
        for job, _, _ in out:
            del self._suspects[job]
        return out
