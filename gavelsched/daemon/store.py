"""The daemon's persistent state: SQLite in WAL mode, each change in one transaction
(thesis §5.6: the scheduler survives its own restart).

Tables: ``jobs`` (the submission, state, *durable* steps_done, reason, arrival and
completion times), ``servers`` (worker servers with the ids the core gave their GPUs),
``throughputs`` (measured steps/s per job and worker type, §5.3.3) and ``meta`` (the
round counter, the next job id, the daemon's time origin). Only the executor thread
writes; opening the same ``state_dir`` again restores everything.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from ..core import JobSpec

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY, seq INTEGER NOT NULL, spec TEXT NOT NULL, state TEXT NOT NULL,
    steps_done INTEGER NOT NULL, reason TEXT, arrival_s REAL NOT NULL, completion_s REAL);
CREATE TABLE IF NOT EXISTS servers (
    id INTEGER PRIMARY KEY, worker_type TEXT NOT NULL, workers TEXT NOT NULL,
    address TEXT NOT NULL, hostname TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS throughputs (
    job_id TEXT NOT NULL, worker_type TEXT NOT NULL, steps_per_s REAL NOT NULL,
    PRIMARY KEY (job_id, worker_type));
"""

STATES = ("queued", "running", "done", "failed", "cancelled")
FINAL = frozenset({"done", "failed", "cancelled"})


@dataclass(frozen=True)
class JobRow:
    """One submitted job as stored: the core's ``JobSpec`` (what the scheduler plans with)
    and what only the daemon keeps: ``workload``/``command`` (what the worker runs), the
    state, the *durable* step count and the times."""

    spec: JobSpec
    workload: str = ""
    command: str = ""
    state: str = "queued"
    steps_done: int = 0
    reason: str | None = None
    arrival_s: float = 0.0
    completion_s: float | None = None

    @property
    def id(self) -> str:
        return self.spec.id

    def but(self, **changes) -> JobRow:
        return replace(self, **changes)

    def with_id(self, job_id: str) -> JobRow:
        return replace(self, spec=replace(self.spec, id=job_id))

    @property
    def final(self) -> bool:
        return self.state in FINAL


@dataclass(frozen=True)
class ServerRow:
    id: int
    worker_type: str
    workers: tuple[int, ...]
    address: str
    hostname: str = ""


_SPEC_FIELDS = ("job_type", "scale_factor", "total_steps", "priority_weight", "slo_s",
                "entity", "mixed", "min_scale_factor")
_RUN_FIELDS = ("workload", "command")


class Store:
    """The SQLite file ``state_dir/gavelsched.db`` (created with its folder)."""

    def __init__(self, state_dir: str | Path) -> None:
        self.path = Path(state_dir) / "gavelsched.db"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        self._db.close()

    @property
    def journal_mode(self) -> str:
        return self._db.execute("PRAGMA journal_mode").fetchone()[0]

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Everything written inside lands together or not at all."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # ---- meta -------------------------------------------------------------------------
    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return default if row is None else row[0]

    def set_meta(self, values: Mapping[str, object], db: sqlite3.Connection | None = None) -> None:
        (db or self._db).executemany(
            "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET "
            "value=excluded.value", [(k, str(v)) for k, v in values.items()])

    # ---- jobs -------------------------------------------------------------------------
    def add_job(self, job: JobRow) -> None:
        """Insert a new job and advance the job-id counter, in one transaction."""
        with self.transaction() as db:
            seq = int(self.get_meta("next_job_id", "0"))
            self._put_job(db, job, seq)
            self.set_meta({"next_job_id": seq + 1}, db)

    def next_job_id(self) -> int:
        return int(self.get_meta("next_job_id", "0"))

    def update_jobs(self, jobs: list[JobRow]) -> None:
        """Write changed jobs (state, steps_done, reason, completion) together."""
        if not jobs:
            return
        with self.transaction() as db:
            db.executemany("UPDATE jobs SET state=?, steps_done=?, reason=?, completion_s=? "
                           "WHERE id=?", [(j.state, j.steps_done, j.reason, j.completion_s, j.id)
                                          for j in jobs])

    def _put_job(self, db: sqlite3.Connection, job: JobRow, seq: int) -> None:
        spec = json.dumps({**{k: getattr(job.spec, k) for k in _SPEC_FIELDS},
                           **{k: getattr(job, k) for k in _RUN_FIELDS}})
        db.execute("INSERT INTO jobs(id, seq, spec, state, steps_done, reason, arrival_s, "
                   "completion_s) VALUES(?, ?, ?, ?, ?, ?, ?, ?)",
                   (job.id, seq, spec, job.state, job.steps_done, job.reason, job.arrival_s,
                    job.completion_s))

    def jobs(self) -> list[JobRow]:
        """Every job, in submission order."""
        out = []
        for (job_id, spec, state, steps, reason, arrival,
             completion) in self._db.execute("SELECT id, spec, state, steps_done, reason, "
                                             "arrival_s, completion_s FROM jobs ORDER BY seq"):
            fields = json.loads(spec)
            run = {k: fields.pop(k, "") for k in _RUN_FIELDS}
            out.append(JobRow(JobSpec(id=job_id, **fields), **run, state=state,
                              steps_done=steps, reason=reason, arrival_s=arrival,
                              completion_s=completion))
        return out

    # ---- servers ----------------------------------------------------------------------
    def put_server(self, server: ServerRow) -> None:
        with self.transaction() as db:
            db.execute("INSERT INTO servers(id, worker_type, workers, address, hostname) "
                       "VALUES(?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
                       "address=excluded.address, hostname=excluded.hostname",
                       (server.id, server.worker_type, json.dumps(list(server.workers)),
                        server.address, server.hostname))

    def servers(self) -> list[ServerRow]:
        return [ServerRow(i, t, tuple(json.loads(w)), a, h) for i, t, w, a, h in
                self._db.execute("SELECT id, worker_type, workers, address, hostname "
                                 "FROM servers ORDER BY id")]

    # ---- throughputs ------------------------------------------------------------------
    def put_throughput(self, job_id: str, worker_type: str, steps_per_s: float) -> None:
        with self.transaction() as db:
            db.execute("INSERT INTO throughputs(job_id, worker_type, steps_per_s) "
                       "VALUES(?, ?, ?) ON CONFLICT(job_id, worker_type) DO UPDATE SET "
                       "steps_per_s=excluded.steps_per_s", (job_id, worker_type, steps_per_s))

    def throughputs(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for job_id, t, v in self._db.execute("SELECT job_id, worker_type, steps_per_s "
                                             "FROM throughputs"):
            out.setdefault(job_id, {})[t] = v
        return out
