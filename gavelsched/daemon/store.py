"""The daemon's persistent state: SQLite in WAL mode, each change in one transaction
(thesis §5.6: the scheduler survives its own restart).

Tables: ``jobs`` (the submission, state, *durable* steps_done, reason, and the times it
was submitted, first started, done and ended), ``servers`` (worker servers with the ids
the core gave their GPUs), ``hosts`` (which servers ran each job: where its logs are),
``throughputs`` (measured steps/s per job and worker type, §5.3.3), ``pair_throughputs``
(each member's measured steps/s in a co-located pair, per type, §5.3.1; a job's rows in
both go when it is retired: ``forget_throughputs_later``), ``scaling`` (measured
steps/s per job type on n GPUs of a type: elastic counts, Sia §3), ``events`` (each job's
history: who changed it, how and when; ``audit``), ``usage`` (one row per ended run: who
and which entity, the GPUs of a type it held, from when to when, at what price;
``accounting``) and ``meta`` (the round counter, the next job id, the daemon's time
origin). Only the executor thread writes;
opening the same ``state_dir`` again restores everything, and a file from before a column
or table existed gets it (``migrate``).

What is read back passes a door (``rows``; docs/design.md, Safety rules): text columns are read
as bytes and checked, a bad job row comes back ``failed`` with its reason (and is written
so), a bad server, throughput or meta row is dropped with a warning.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TypeVar

from traces.checks import BadValue

from .jobs import FAILED, JobRow
from .meta import COUNTERS, NEXT_JOB_ID, declared
from .migrate import migrate
from .room import disk_full
from .rows import (RUN_FIELDS, SPEC_FIELDS, ServerRow, Table, event, host, job_row,
                   meta_value, pair_throughput, scaling_sample, server_row, throughput,
                   usage)

__all__ = ["JobRow", "ServerRow", "Store", "StoreError"]

log = logging.getLogger(__name__)
T = TypeVar("T")
Where = tuple[str, tuple]               # a WHERE clause and its parameters
EVERY: Where = ("1", ())
# A column as read back: text as bytes, so that a row that is not UTF-8 is refused by the
# checks (``rows``) instead of failing the whole query.
_RAW = "CASE typeof({0}) WHEN 'text' THEN CAST({0} AS BLOB) ELSE {0} END"


class StoreError(Exception):
    """The store's file cannot be opened or written (damaged, not a database, on a full or
    read-only disk): one line naming it and what to do. The file is left as it is."""


SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY, seq INTEGER NOT NULL, spec TEXT NOT NULL, state TEXT NOT NULL,
    steps_done INTEGER NOT NULL, reason TEXT, arrival_s REAL NOT NULL, completion_s REAL,
    started_s REAL, ended_s REAL);
CREATE TABLE IF NOT EXISTS servers (
    id INTEGER PRIMARY KEY, worker_type TEXT NOT NULL, workers TEXT NOT NULL,
    address TEXT NOT NULL, hostname TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS throughputs (
    job_id TEXT NOT NULL, worker_type TEXT NOT NULL, steps_per_s REAL NOT NULL,
    PRIMARY KEY (job_id, worker_type));
CREATE TABLE IF NOT EXISTS pair_throughputs (
    pair TEXT NOT NULL, job_id TEXT NOT NULL, worker_type TEXT NOT NULL,
    steps_per_s REAL NOT NULL, PRIMARY KEY (pair, job_id, worker_type));
CREATE INDEX IF NOT EXISTS pair_throughputs_job ON pair_throughputs(job_id);
CREATE TABLE IF NOT EXISTS scaling (
    job_type TEXT NOT NULL, worker_type TEXT NOT NULL, gpus INTEGER NOT NULL,
    steps_per_s REAL NOT NULL, PRIMARY KEY (job_type, worker_type, gpus));
CREATE TABLE IF NOT EXISTS hosts (
    job_id TEXT NOT NULL, server_id INTEGER NOT NULL, PRIMARY KEY (job_id, server_id));
CREATE TABLE IF NOT EXISTS events (
    job_id TEXT NOT NULL, time_unix REAL NOT NULL, user TEXT NOT NULL, action TEXT NOT NULL,
    detail TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS events_by_job ON events(job_id);
CREATE TABLE IF NOT EXISTS usage (
    job_id TEXT NOT NULL, generation INTEGER NOT NULL, user TEXT NOT NULL,
    entity TEXT NOT NULL, worker_type TEXT NOT NULL, gpus INTEGER NOT NULL,
    start_unix REAL NOT NULL, end_unix REAL NOT NULL, price REAL NOT NULL,
    share REAL NOT NULL DEFAULT 1.0);
CREATE INDEX IF NOT EXISTS usage_by_job ON usage(job_id);
"""
# Estimates written behind are written at most this often (``flush_estimates``): each flush
# is a transaction, three sqlite calls, where the executor's loop runs once per event or two
# at a round's burst.
ESTIMATES_EVERY_S = 1.0
# Rows a multi-row INSERT writes at once (``_upsert``; sqlite binds at most 32,766 values).
UPSERT_ROWS = 1000
JOB_COLUMNS = "id, spec, state, steps_done, reason, arrival_s, completion_s, started_s, ended_s"


class Store:
    """The SQLite file ``state_dir/gavelsched.db`` (created with its folder)."""

    def __init__(self, state_dir: str | Path) -> None:
        self.path = Path(state_dir) / "gavelsched.db"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._open()
        except sqlite3.Error as err:
            if hasattr(self, "_db"):
                self._db.close()
            damaged = any(w in str(err) for w in ("not a database", "malformed"))
            fix = ("free space on its disk" if disk_full(err) else "it is left as it is: "
                   "restore it from a backup, or move it away to start with no jobs" if damaged
                   else "the scheduler must be able to write it and its folder")
            raise StoreError(f"{self.path}: the scheduler's store cannot be opened ({err}): "
                             f"{fix}") from None

    def _open(self) -> None:
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        # writes kept for later (``flush_later``)
        self._later_meta: dict[str, object] = {}
        self._later_rates: dict[tuple[str, str], float] = {}
        self._later_pairs: dict[tuple[str, str, str], float] = {}
        self._later_hosts: set[tuple[str, int]] = set()
        self._later_gone: set[str] = set()     # jobs whose measured rates go
        self._batching = False
        self._estimates_at = 0.0        # the next ``flush_estimates`` (monotonic)
        self._db.executescript(SCHEMA)
        migrate(self._db, self.transaction, self.path)
        self._check_meta()

    def close(self) -> None:
        """Write what is kept for later (a disk that cannot take it: logged), and close."""
        try:
            self.flush_later()
        except sqlite3.Error as err:
            log.error("the store closed without its last estimates and launches' rows: %s", err)
        self._db.close()

    @property
    def journal_mode(self) -> str:
        return self._db.execute("PRAGMA journal_mode").fetchone()[0]

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Everything written inside lands together or not at all (a failed COMMIT too)."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:    # (sqlite may have rolled it back itself)
                self._db.execute("ROLLBACK")
            raise

    def _write(self, sql: str, rows: list[tuple]) -> None:
        """``sql`` once per row, all or none: a single row as one statement, which sqlite
        commits on its own (one call: BEGIN and COMMIT around it are two more, and each
        call lets go of the GIL, which the executor must then wait for; under a round's
        burst at 2,048 GPUs those waits were a tenth of its time, issue #30); several rows
        in one transaction."""
        if len(rows) == 1:
            self._db.execute(sql, rows[0])
        elif rows:
            with self.transaction() as db:
                db.executemany(sql, rows)

    # ---- meta -------------------------------------------------------------------------
    def get_meta(self, key: str, default: str | None = None) -> str | None:
        self.flush_later()
        row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return default if row is None else row[0]

    def meta_family(self, prefix: str) -> dict[str, str]:
        """The meta rows whose key starts with ``prefix`` (a family, ``meta.MetaKey``), by
        the key's suffix."""
        self.flush_later()
        rows = self._db.execute("SELECT key, value FROM meta WHERE substr(key, 1, ?) = ?",
                                (len(prefix), prefix)).fetchall()
        return {key[len(prefix):]: value for key, value in rows}

    def set_meta(self, values: Mapping[str, object], db: sqlite3.Connection | None = None) -> None:
        """Write meta rows, all or none, in one statement (one sqlite call, as ``_write``
        makes for one row); every key must be declared (``meta.py``), else ``KeyError``."""
        _declared(values)
        if self._batching and db is None:
            self._later_meta.update(values)
            return
        if self._later_meta:                       # (this value is newer than one kept)
            for key in self._later_meta.keys() & values.keys():
                del self._later_meta[key]
        rows = [(k, str(v)) for k, v in values.items()]
        if db is None and len(rows) > UPSERT_ROWS:
            with self.transaction() as db:
                self.set_meta(values, db)
        elif rows:
            _upsert(db or self._db, "INSERT INTO meta(key, value)", rows,
                    "ON CONFLICT(key) DO UPDATE SET value=excluded.value")

    def delete_meta(self, keys: Iterable[str]) -> None:
        """Remove these meta rows (those that exist), in one transaction."""
        with self.transaction() as db:
            db.executemany("DELETE FROM meta WHERE key=?", [(k,) for k in keys])

    def _check_meta(self) -> None:
        """Meta rows checked once, at open (``rows.meta_value``): a bad one is dropped with a
        warning, so its reader takes its default; the counters (``next_job_id``,
        ``meta.COUNTERS``) are kept past every id they issued."""
        meta = dict(self._checked("meta", "key, value", meta_value))
        for counter, families in COUNTERS.items():
            self._keep_past(counter.key(), max((int(v) for k, v in meta.items()
                                                if any(f.owns(k) for f in families)),
                                               default=None))
        (top,) = self._db.execute("SELECT MAX(seq) FROM jobs "
                                  "WHERE typeof(seq) = 'integer'").fetchone()
        self._keep_past(NEXT_JOB_ID.key(), top)

    def _keep_past(self, counter: str, last: int | None) -> None:
        stored = self.get_meta(counter)
        if last is not None and (stored is None or int(stored) <= last):
            log.warning("store %s: %s %s set to %d, past the last one issued", self.path,
                        counter, stored, last + 1)
            self.set_meta({counter: last + 1})

    def _checked(self, table: str, columns: str, check: Callable[..., T], *,
                 order: str = "rowid", delete: bool = True, where: Where = EVERY) -> list[T]:
        """What ``check`` makes of each row of ``table`` (given the raw ``columns``, text as
        bytes: ``_RAW``) that matches ``where`` (a clause and its parameters); a row it
        refuses (``BadValue``) is left out with a warning, and deleted unless
        ``delete=False``."""
        names = [c.strip() for c in columns.split(",")]
        good, bad = [], []
        for rowid, *raw in self._db.execute(
                f"SELECT rowid, {', '.join(_RAW.format(c) for c in names)} FROM {table} "
                f"WHERE {where[0]} ORDER BY {order}", where[1]):
            try:
                good.append(check(*raw))
            except BadValue as err:
                bad.append(rowid)
                log.warning("store %s: %s row %d left out: %s", self.path, table, rowid, err)
        if bad and delete:
            with self.transaction() as db:
                db.executemany(f"DELETE FROM {table} WHERE rowid=?", [(r,) for r in bad])
        return good

    # ---- jobs -------------------------------------------------------------------------
    def add_job(self, job: JobRow) -> None:
        self.add_jobs([job])

    def add_jobs(self, jobs: list[JobRow]) -> None:
        """Insert new jobs (an array's copies) and advance the job-id counter past them, in
        one transaction."""
        with self.transaction() as db:
            seq = int(self.get_meta(NEXT_JOB_ID.key(), "0"))
            for i, job in enumerate(jobs):
                self._put_job(db, job, seq + i)
            self.set_meta({NEXT_JOB_ID.key(): seq + len(jobs)}, db)

    def next_job_id(self) -> int:
        return int(self.get_meta(NEXT_JOB_ID.key(), "0"))

    def update_jobs(self, jobs: list[JobRow], db: sqlite3.Connection | None = None) -> None:
        """Write changed jobs (state, steps_done, reason, times) together (inside the
        caller's transaction ``db``, when given)."""
        sql = ("UPDATE jobs SET state=?, steps_done=?, reason=?, completion_s=?, started_s=?, "
               "ended_s=? WHERE id=?")
        rows = [(j.state, j.steps_done, j.reason, j.completion_s, j.started_s, j.ended_s, j.id)
                for j in jobs]
        if db is None:
            self._write(sql, rows)
        else:
            db.executemany(sql, rows)

    def update_spec(self, job: JobRow) -> None:
        """Write a job's changed submission (``update``: priority weight, entity)."""
        with self.transaction() as db:
            db.execute("UPDATE jobs SET spec=? WHERE id=?", (_spec_json(job), job.id))

    def _put_job(self, db: sqlite3.Connection, job: JobRow, seq: int) -> None:
        spec = _spec_json(job)
        db.execute(f"INSERT INTO jobs(seq, {JOB_COLUMNS}) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (seq, job.id, spec, job.state, job.steps_done, job.reason, job.arrival_s,
                    job.completion_s, job.started_s, job.ended_s))

    def jobs(self, table: Table | None = None, where: Where = EVERY) -> list[JobRow]:
        """Every job (or those ``where`` picks: ``retired.py``), in submission order, each
        row checked (``rows.job_row``; with ``table``, a job it runs nowhere is refused
        too). A refused row comes back ``failed`` with its reason and is written so; a row
        with no usable id is left out (and kept in the file), with a warning."""
        rows = self._checked("jobs", JOB_COLUMNS,
                             lambda *raw: (job_row(*raw, table=table), (raw[2], raw[4])),
                             order="seq", delete=False, where=where)
        changed = [row for row, (state, reason) in rows if row.state == FAILED
                   and (state, reason) != (FAILED.encode(), (row.reason or "").encode())]
        for row in changed:
            log.warning("store %s: job %s %s", self.path, row.id, row.reason)
        self.update_jobs(changed)
        return [row for row, _ in rows]

    # ---- servers ----------------------------------------------------------------------
    def put_server(self, server: ServerRow) -> None:
        with self.transaction() as db:
            db.execute("INSERT INTO servers(id, worker_type, workers, address, hostname) "
                       "VALUES(?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
                       "address=excluded.address, hostname=excluded.hostname",
                       (server.id, server.worker_type, json.dumps(list(server.workers)),
                        server.address, server.hostname))

    def servers(self) -> list[ServerRow]:
        """Every worker server, each row checked (``rows.server_row``); a bad one, or one
        that names another's worker ids, is dropped with a warning (its worker registers
        again as a new server)."""
        seen: set[int] = set()

        def check(*raw) -> ServerRow:
            row = server_row(*raw)
            if seen & set(row.workers):
                raise BadValue("workers", "must not repeat another server's worker ids",
                               list(row.workers))
            seen.update(row.workers)
            return row

        return self._checked("servers", "id, worker_type, workers, address, hostname", check)

    # ---- hosts --------------------------------------------------------------------------
    def add_hosts(self, job_id: str, server_ids: Iterable[int]) -> None:
        """Servers that ran a process of the job (its logs are there)."""
        if self._batching:
            self._later_hosts.update((job_id, int(s)) for s in server_ids)
            return
        self._write("INSERT OR IGNORE INTO hosts(job_id, server_id) VALUES(?, ?)",
                    [(job_id, int(s)) for s in server_ids])

    def hosts(self, where: Where = EVERY) -> dict[str, tuple[int, ...]]:
        """Job (of those ``where`` picks) -> the servers that ran it, in id order; a bad
        row is dropped with a warning (``rows.host``)."""
        self.flush_later()
        out: dict[str, list[int]] = {}
        for job_id, server_id in self._checked("hosts", "job_id, server_id", host,
                                               order="job_id, server_id", where=where):
            out.setdefault(job_id, []).append(server_id)
        return {job: tuple(ids) for job, ids in out.items()}

    # ---- writes kept for later ------------------------------------------------------------
    # Each sqlite call lets go of the GIL, which the executor thread must then wait for: at
    # 2,048 GPUs, thousands of calls a round, each waiting out other threads' turns (issue
    # #30). Two kinds of writes are kept here, the newest value of each key, and written by
    # ``flush_later`` in one transaction, a statement a table. Estimates (start-up
    # statistics, measured throughputs: ``set_meta_later``, ``put_throughput_later``) wait
    # for ``flush_estimates``, at most ``ESTIMATES_EVERY_S``; a crash loses the last
    # second's, which the next runs measure again. The meta rows and hosts written
    # inside ``batched`` (a round's launches: their fencing tokens and hosts) are written as
    # it ends, before the launches' calls are sent. A read of either, and ``close``, flush
    # first.
    def set_meta_later(self, values: Mapping[str, object]) -> None:
        """``set_meta`` of estimates, written by the next ``flush_later``."""
        _declared(values)
        self._later_meta.update(values)

    def put_throughput_later(self, job_id: str, worker_type: str, steps_per_s: float) -> None:
        """A job's measured steps/s on a type, written by the next ``flush_later``."""
        self._later_rates[job_id, worker_type] = steps_per_s

    def put_pair_throughput_later(self, pair: str, job_id: str, worker_type: str,
                                  steps_per_s: float) -> None:
        """A pair member's measured steps/s on a type, written by the next ``flush_later``."""
        self._later_pairs[pair, job_id, worker_type] = steps_per_s

    def forget_throughputs_later(self, job_ids: Iterable[str]) -> None:
        """The measured steps/s of ``job_ids`` (jobs retired: ``retention``), alone and in
        co-located pairs, deleted by the next ``flush_later``, with those kept for them."""
        self._later_gone.update(job_ids)

    def flush_estimates(self, mono: float) -> None:
        """``flush_later`` if ``ESTIMATES_EVERY_S`` passed since the last (``mono``: a
        monotonic clock; the executor asks after each batch of events)."""
        if mono >= self._estimates_at:
            self.flush_later()
            self._estimates_at = mono + ESTIMATES_EVERY_S

    @contextmanager
    def batched(self) -> Iterator[None]:
        """``set_meta`` (outside a caller's transaction) and ``add_hosts`` inside are kept,
        and written together as it ends (with an error too: what was done is kept)."""
        if self._batching:
            yield
            return
        self._batching = True
        try:
            yield
        finally:
            self._batching = False
            self.flush_later()

    def flush_later(self) -> None:
        """Write what is kept for later, in one transaction; kept again if it fails."""
        meta, rates, pairs, hosts, gone = (self._later_meta, self._later_rates,
                                           self._later_pairs, self._later_hosts,
                                           self._later_gone)
        if not (meta or rates or pairs or hosts or gone):
            return
        (self._later_meta, self._later_rates, self._later_pairs, self._later_hosts,
         self._later_gone) = ({}, {}, {}, set(), set())
        if gone:
            rates = {key: rate for key, rate in rates.items() if key[0] not in gone}
            pairs = {key: rate for key, rate in pairs.items() if key[1] not in gone}
        try:
            self._write_later(meta, rates, pairs, hosts, gone)
        except BaseException:    # (a full disk: the newer values kept since win)
            self._later_meta = {**meta, **self._later_meta}
            self._later_rates = {**rates, **self._later_rates}
            self._later_pairs = {**pairs, **self._later_pairs}
            self._later_hosts |= hosts
            self._later_gone |= gone
            raise

    def _write_later(self, meta: dict, rates: dict, pairs: dict, hosts: set, gone: set) -> None:
        with self.transaction() if not self._db.in_transaction else nullcontext(self._db) as db:
            if meta:
                self.set_meta(meta, db)
            if rates:
                _upsert(db, "INSERT INTO throughputs(job_id, worker_type, steps_per_s)",
                        [(job, wtype, rate) for (job, wtype), rate in rates.items()],
                        "ON CONFLICT(job_id, worker_type) DO UPDATE SET "
                        "steps_per_s=excluded.steps_per_s")
            if pairs:
                _upsert(db, "INSERT INTO pair_throughputs(pair, job_id, worker_type, "
                        "steps_per_s)", [(*key, rate) for key, rate in pairs.items()],
                        "ON CONFLICT(pair, job_id, worker_type) DO UPDATE SET "
                        "steps_per_s=excluded.steps_per_s")
            if hosts:
                _upsert(db, "INSERT OR IGNORE INTO hosts(job_id, server_id)", sorted(hosts), "")
            if gone:
                jobs = [(job,) for job in gone]
                db.executemany("DELETE FROM throughputs WHERE job_id = ?", jobs)
                db.executemany("DELETE FROM pair_throughputs WHERE job_id = ?", jobs)

    # ---- throughputs ------------------------------------------------------------------
    def throughputs(self) -> dict[str, dict[str, float]]:
        """Measured steps/s per job and type, each row checked (``rows.throughput``: finite,
        > 0); a bad one is dropped with a warning (the table's prior stands in)."""
        self.flush_later()
        out: dict[str, dict[str, float]] = {}
        for job_id, t, v in self._checked("throughputs", "job_id, worker_type, steps_per_s",
                                          throughput):
            out.setdefault(job_id, {})[t] = v
        return out

    def pair_throughputs(self) -> dict[str, dict[str, dict[str, float]]]:
        """Measured steps/s of each co-located pair's members, by pair, type and job
        (``OnlineThroughputs.pairs``), each row checked (``rows.pair_throughput``)."""
        self.flush_later()
        out: dict[str, dict[str, dict[str, float]]] = {}
        for pair, job_id, t, v in self._checked(
                "pair_throughputs", "pair, job_id, worker_type, steps_per_s", pair_throughput):
            out.setdefault(pair, {}).setdefault(t, {})[job_id] = v
        return out

    def put_scaling(self, job_type: str, worker_type: str, gpus: int,
                    steps_per_s: float) -> None:
        """The steps/s ``job_type`` measured on ``gpus`` GPUs of ``worker_type`` (an
        elastic count; ``OnlineThroughputs.observe_count``)."""
        with self.transaction() as db:
            db.execute("INSERT INTO scaling(job_type, worker_type, gpus, steps_per_s) "
                       "VALUES(?, ?, ?, ?) ON CONFLICT(job_type, worker_type, gpus) DO UPDATE "
                       "SET steps_per_s=excluded.steps_per_s",
                       (job_type, worker_type, gpus, steps_per_s))

    def scaling(self) -> dict[tuple[str, str, int], float]:
        """Measured steps/s per (job type, worker type, GPUs), each row checked
        (``rows.scaling_sample``); a bad one is dropped with a warning."""
        return {(job_type, t, n): v for job_type, t, n, v in self._checked(
            "scaling", "job_type, worker_type, gpus, steps_per_s", scaling_sample)}

    # ---- events (each job's history) and usage (each ended run) -----------------------
    def add_events(self, rows: Iterable[tuple[str, float, str, str, str]]) -> None:
        """Events (job_id, time_unix, user, action, detail), in one transaction."""
        with self.transaction() as db:
            db.executemany("INSERT INTO events(job_id, time_unix, user, action, detail) "
                           "VALUES(?, ?, ?, ?, ?)", list(rows))

    def events(self, job_id: str) -> list[tuple[float, str, str, str]]:
        """The job's history, oldest first: (time_unix, user, action, detail); a bad row is
        left out with a warning (``rows.event``)."""
        return [row[1:] for row in self._checked(
            "events", "job_id, time_unix, user, action, detail", event,
            order="rowid", delete=False, where=("job_id=?", (job_id,)))]

    def add_usage(self, row: tuple) -> None:
        """One ended run: (job_id, generation, user, entity, worker_type, gpus, start_unix,
        end_unix, price[, share]) (share: 1 when not given)."""
        self._write(f"INSERT INTO usage({USAGE_COLUMNS}) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(*row, 1.0)[:10]])

    def usage(self, since_unix: float = 0.0, where: Where = EVERY) -> list[tuple]:
        """The runs that ended after ``since_unix`` (of those ``where`` picks: ``retired.
        of_jobs``), each row checked (``rows.usage``)."""
        return self._checked("usage", USAGE_COLUMNS, usage, delete=False,
                             where=(f"end_unix > ? AND ({where[0]})", (since_unix, *where[1])))

    def usage_sums(self) -> list[tuple]:
        """Every run's GPU-seconds summed by user, entity, type, price and share, each sum
        as a usage row of one GPU from 0 (checked: ``rows.usage``; a damaged row counts as
        SQLite reads it): the totals at a start, in a row per kind instead of one per run."""
        kind = ", ".join([*(_RAW.format(c) for c in ("user", "entity", "worker_type")),
                          "price", "share"])
        out = []
        for *key, price, share, total in self._db.execute(
                f"SELECT {kind}, SUM(gpus * MAX(0.0, end_unix - start_unix)) FROM usage "
                f"GROUP BY {kind}"):
            try:
                out.append(usage("*", 0, *key, 1, 0.0, total, price, share))
            except BadValue as err:
                log.warning("store %s: usage totals of %s left out: %s", self.path, key, err)
        return out


USAGE_COLUMNS = ("job_id, generation, user, entity, worker_type, gpus, start_unix, end_unix, "
                 "price, share")


def _spec_json(job: JobRow) -> str:
    """The ``spec`` column: the submission's fields (``SPEC_FIELDS``, ``RUN_FIELDS``)."""
    fields = {**{k: getattr(job.spec, k) for k in SPEC_FIELDS},
              **{k: getattr(job, k) for k in RUN_FIELDS}}
    fields["after"] = list(job.after)
    return json.dumps(fields)


def _upsert(db: sqlite3.Connection, head: str, rows: list[tuple], conflict: str) -> None:
    """``head VALUES (...), (...) conflict`` for ``rows``, ``UPSERT_ROWS`` to a statement:
    one sqlite step each, where ``executemany`` steps (and waits for the GIL) once a row."""
    for at in range(0, len(rows), UPSERT_ROWS):
        chunk = rows[at:at + UPSERT_ROWS]
        marks = f"({', '.join('?' * len(chunk[0]))})"
        db.execute(f"{head} VALUES {', '.join([marks] * len(chunk))} {conflict}",
                   [x for row in chunk for x in row])


def _declared(values: Mapping[str, object]) -> None:
    """Every meta key must be declared (``meta.py``), else ``KeyError``."""
    undeclared = [k for k in values if declared(k) is None]
    if undeclared:
        raise KeyError(f"meta keys declared nowhere (gavelsched/daemon/meta.py): {undeclared}")
