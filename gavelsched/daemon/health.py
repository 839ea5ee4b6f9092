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
And a scheduler that hears no server at all is taken to be the deaf one (``deaf``), as
Kubernetes' node controller evicts nothing from a zone whose every node went silent at
once: it fails no server for up to ``DEAF_LIMIT`` silence limits, and when it hears them
again that time is not counted against any (at 2,048 GPUs all 256 servers were failed at
once while every gRPC thread waited on the executor). A cluster of one server is failed as
before, and a whole cluster that died is failed after ``DEAF_LIMIT`` limits.

Nor does the time heartbeats wait to reach this scheduler (``intake_delay``). Each is
stamped with its worker's clock as it is sent; its delay is how much later it arrived than
its server's fastest. While the heartbeats taken in the last silence limit arrived up to
``d`` seconds late, every server gets ``d`` more before it is failed: its own may be waiting
in the same queue. At 2,048 GPUs and 50,000 jobs a round's burst of thousands of calls queued
heartbeats for seconds in gRPC's intake, which takes its turns at the GIL with the plan, and
the servers whose heartbeats had not come through yet were failed by the dozen (issue #30).
"""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass

from .store import ServerRow

HEARTBEAT_MISSES = 3
DEAF_LIMIT = 5      # silence limits a scheduler that hears no server fails none (``deaf``)
# A server's fastest heartbeat (arrival less its stamp, two clocks apart) may rise by this
# much a heartbeat, so that the clocks' drift is never read as delay (``intake_delay``).
BASELINE_CREEP_S = 0.001


def stamped(sent_s: float) -> bool:
    """A heartbeat's ``sent_s`` is a time to read its delay from: finite and positive (an
    older worker sends 0; a NaN or an infinity is no time)."""
    return 0 < sent_s < math.inf


@dataclass
class ServerState:
    row: ServerRow
    alive: bool
    last_seen: float            # monotonic
    registration: int = 0       # its newest registration's fencing token (0: none yet)
    fastest: float = math.inf   # its heartbeats' least arrival less stamp (``intake_delay``)
    delay: float = 0.0          # how late its last heartbeat arrived against its fastest


class Health:
    def __init__(self, heartbeat_seconds: float, servers: list[ServerRow] = ()) -> None:
        """``servers``: those of a restarted scheduler's store, down until they register
        again."""
        self.heartbeat_seconds = heartbeat_seconds
        self.servers: dict[int, ServerState] = {s.id: ServerState(s, False, 0.0) for s in servers}
        # (``back``: the last registration; None: none yet)
        self._restored, self._registered_at = {s.id for s in servers}, None
        self._missing: set[int] = set()   # restored servers not back when ``back`` gave up
        # job -> (deadline, reason, exit code)
        self._suspects: dict[str, tuple[float, str, int]] = {}
        self._lock = threading.Lock()    # ``seen`` (any thread) against the executor's writes
        self._heard_at: float | None = None   # the last heartbeat or registration of any
        # at most the ``last_seen`` of every alive server (they only grow, but for a
        # registration): while it is within the limit, no server can be silent past it and
        # ``newly_dead`` scans none (the executor asks after every batch of events)
        self._earliest_seen = math.inf
        # (arrival, delay) of the heartbeats taken in the last limit, delays decreasing: the
        # first is the longest (a sliding window's maximum)
        self._delays: deque[tuple[float, float]] = deque()

    # ---- servers ------------------------------------------------------------------------
    def up(self, row: ServerRow, mono: float, registration: int = 0) -> None:
        """``row`` registered (again) at ``mono``, with fencing token ``registration``."""
        with self._lock:
            self.servers[row.id] = ServerState(row, alive=True, last_seen=mono,
                                               registration=registration)
            self._registered_at = max(self._registered_at or mono, mono)
            self._earliest_seen = min(self._earliest_seen, mono)
            self._heard(mono)

    def seen(self, server_id: int, mono: float, sent_s: float = 0.0) -> ServerState | None:
        """A heartbeat, from any thread, that arrived at ``mono`` and was sent at
        ``sent_s`` on its worker's clock (0, or not a finite positive number: not stamped):
        the server, or None when it is unknown or was failed (then it registers again)."""
        with self._lock:
            server = self.servers.get(server_id)
            if server is None or not server.alive:
                return None
            self._heard(mono)
            server.last_seen = max(server.last_seen, mono)
            if stamped(sent_s):
                self._delayed(server, mono, mono - sent_s)
            return server

    def _delayed(self, server: ServerState, mono: float, offset: float) -> None:
        """A heartbeat of ``server`` arrived ``offset`` after its stamp (the two clocks'
        difference plus its delay): its delay against the server's fastest, into the
        window that ``intake_delay`` reads (under the lock)."""
        server.fastest = min(server.fastest + BASELINE_CREEP_S, offset)
        server.delay = offset - server.fastest
        delays = self._delays
        while delays and delays[-1][1] <= server.delay:
            delays.pop()
        delays.append((mono, server.delay))

    def intake_delay(self, mono: float) -> float:
        """The longest delay of the heartbeats taken in the last silence limit (at most
        ``DEAF_LIMIT - 1`` limits): how long a server's heartbeat may still be on its way
        here, which ``newly_dead`` grants every server on top of the limit."""
        with self._lock:
            return self._intake_delay(mono)

    def _intake_delay(self, mono: float) -> float:
        delays = self._delays
        while delays and delays[0][0] < mono - self.limit:
            delays.popleft()
        return min(delays[0][1], (DEAF_LIMIT - 1) * self.limit) if delays else 0.0

    def _heard(self, mono: float) -> None:
        """A server was heard (under the lock): after a silence of all of them past the
        limit, that silence is not counted against any (module docstring)."""
        if self._heard_at is not None and mono - self._heard_at > self.limit:
            self._excuse(mono - self._heard_at, mono)
        self._heard_at = mono if self._heard_at is None else max(self._heard_at, mono)

    def back(self, mono: float) -> bool:
        """Whether the servers restored at the start have all registered again, or, since
        the first did, none has for a silence limit (what fails a server; they come back
        over seconds to a busy scheduler): a restarted scheduler plans its first round
        then, so that the runs its servers list are adopted before it (``orphans``: a plan
        keeps them in place)."""
        if self._restored and self._registered_at is not None and (
                mono - self._registered_at >= self.limit
                or all(self.servers[i].alive for i in self._restored)):
            self._missing = {i for i in self._restored if not self.servers[i].alive}
            self._restored = set()
        return not self._restored

    def awaited(self, server_id: int) -> bool:
        """Whether ``server_id`` is a server restored at the start that has not registered
        again while the first plan still waits for it (``back``): the runs it lists are not
        known yet (``orphans``)."""
        server = self.servers.get(server_id)
        return server_id in self._restored and (server is None or not server.alive)

    def take_missing(self) -> set[int]:
        """The restored servers ``back`` stopped waiting for, once (then none)."""
        missing, self._missing = self._missing, set()
        return missing

    @property
    def limit(self) -> float:
        """Seconds of silence that fail a server."""
        return HEARTBEAT_MISSES * self.heartbeat_seconds

    def deaf(self, mono: float) -> float:
        """Seconds this scheduler has heard no server at all, when that makes it the deaf
        one (more than one server alive, silent past the limit, not yet ``DEAF_LIMIT``
        limits); else 0."""
        quiet = 0.0 if self._heard_at is None else mono - self._heard_at
        if not self.limit < quiet <= DEAF_LIMIT * self.limit:
            return 0.0
        return quiet if sum(s.alive for s in self.servers.values()) > 1 else 0.0

    def newly_dead(self, mono: float) -> list[ServerState]:
        """Servers silent for ``HEARTBEAT_MISSES`` heartbeats and the ``intake_delay``,
        now marked down (none while the scheduler is ``deaf``)."""
        with self._lock:
            limit = self.limit + self._intake_delay(mono)
            if mono - self._earliest_seen <= limit or self.deaf(mono):
                return []
            alive = [s for s in self.servers.values() if s.alive]
            dead = [s for s in alive if mono - s.last_seen > limit]
            for server in dead:
                server.alive = False
            self._earliest_seen = min((s.last_seen for s in alive if s.alive),
                                      default=math.inf)
        return dead

    def excuse(self, busy_s: float, mono: float) -> None:
        """The executor was busy for ``busy_s`` seconds up to ``mono``: that time does not
        count as any server's silence (its heartbeat may have waited for a gRPC thread that
        a handler held while it waited on the executor), nor as the pause in registrations
        a restarted scheduler waits for (``back``). A server that really died is failed
        that much later."""
        if busy_s > 0:
            with self._lock:
                self._excuse(busy_s, mono)

    def _excuse(self, seconds: float, mono: float) -> None:
        for server in self.servers.values():
            if server.alive:
                server.last_seen = min(mono, server.last_seen + seconds)
        if self._registered_at is not None:
            self._registered_at = min(mono, self._registered_at + seconds)

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
        limit = self.limit + self.heartbeat_seconds
        self._suspects[job_id] = (mono + limit, reason, exit_code)
        return limit

    def clear(self, job_id: str) -> bool:
        """A server of the job's run died: the rank's failure was its peer's. Was it
        suspected?"""
        return self._suspects.pop(job_id, None) is not None

    def due(self, mono: float) -> list[tuple[str, str, int]]:
        """Suspects whose deadline passed, removed: (job, reason, exit code) for each.
        Their deadlines move with the ``intake_delay``, as a dead server's failure does."""
        if not self._suspects:
            return []
        mono -= self.intake_delay(mono)
        out = [(job, reason, code) for job, (deadline, reason, code) in self._suspects.items()
               if mono >= deadline]
        for job, _, _ in out:
            del self._suspects[job]
        return out
