"""The store's records (``JobRow``, defined with its states in ``jobs``; ``ServerRow``) and
the door they pass when the store is read back at start (issue #17; docs/design.md, Safety
rules: the store on load is a door like any other, and one bad job never stops the others;
thesis §5.6: the scheduler survives its own restart).

Each raw SQLite row is checked once, here, with ``traces/checks.py``: text columns arrive
as bytes and must be UTF-8, numbers finite and in range, integers within 64 bits, states
and job types known. ``job_row`` turns a job row with a bad value into a ``failed`` row
whose reason names the field (``refused at load: priority_weight: ...``); ``server_row``,
``throughput`` and ``meta_value`` raise ``BadValue`` for the store to drop the row.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from policies import key_members
from traces import checks
from traces.checks import BadValue, NotUtf8, utf8
from traces.workloads import UnknownWorkload, check_workload

from ..core import JobSpec
from .jobs import FINAL, STATES, JobRow, refused, stored
from .meta import declared

REFUSED = "refused at load"
SPEC_FIELDS = ("job_type", "scale_factor", "total_steps", "priority_weight", "slo_s",
               "entity", "mixed", "min_scale_factor")
RUN_FIELDS = ("workload", "command", "user", "array_id", "array_index", "max_runtime_s",
              "after")
MAX_AFTER = 1000          # dependencies of one job


class Table(Protocol):
    """What the load checks read of a throughput table (``traces.ThroughputTable``)."""

    @property
    def worker_types(self) -> tuple[str, ...]: ...

    def get(self, worker_type: str, job_type: str, scale_factor: int = 1) -> float: ...


@dataclass(frozen=True)
class ServerRow:
    id: int
    worker_type: str
    workers: tuple[int, ...]
    address: str
    hostname: str = ""


def runs_on(table: Table, job_type: str, scale_factor: int) -> tuple[str, ...]:
    """The table's worker types that run ``job_type`` at ``scale_factor`` (steps/s > 0), as
    the submission door decides (``submissions.check_submission``)."""
    return tuple(t for t in table.worker_types if table.get(t, job_type, scale_factor) > 0)


# ---- jobs ---------------------------------------------------------------------------------
def job_row(job_id: Any, spec: Any, state: Any, steps_done: Any, reason: Any,
            arrival_s: Any, completion_s: Any, started_s: Any = None, ended_s: Any = None,
            table: Table | None = None) -> JobRow:
    """The typed row of raw ``jobs`` columns (text columns as bytes). A bad value gives a
    ``failed`` row whose one-line reason names the field, keeping what of the row is good;
    with ``table``, a job it runs nowhere is bad too. Raises ``BadValue`` only for a bad id:
    a row that cannot be named."""
    job_id = _text(job_id, "id", empty=False)
    if "+" in job_id:
        raise BadValue("id", "must not contain '+'", job_id)
    try:
        submitted = _submission(job_id, spec)
    except BadValue as err:
        return _refused(_salvaged(job_id, spec), steps_done, arrival_s, err)
    try:
        row = _columns(submitted, state, steps_done, reason, arrival_s, completion_s,
                       started_s, ended_s)
        if table is not None and not row.final:
            _known(row.spec, table)
        return row
    except BadValue as err:
        return _refused(submitted, steps_done, arrival_s, err)


def _submission(job_id: str, raw: Any) -> JobRow:
    """The ``spec`` column: the job as submitted (``JobSpec``, workload, command)."""
    f = _spec(raw)
    for key in ("job_type", "scale_factor", "total_steps"):
        if key not in f:
            raise BadValue(key, "missing from the stored spec", show=False)
    sf = checks.integer(f["scale_factor"], "scale_factor", low=1, high=checks.INT32_MAX)
    slo, entity, low = f.get("slo_s"), f.get("entity"), f.get("min_scale_factor")
    if not isinstance(f.get("mixed", False), bool):
        raise BadValue("mixed", "must be true or false", f["mixed"])
    spec = JobSpec(
        id=job_id, job_type=checks.text(f["job_type"], "job_type", empty=False),
        scale_factor=sf, total_steps=checks.integer(f["total_steps"], "total_steps", low=1,
                                                high=checks.MAX_STEPS),
        priority_weight=checks.number(f.get("priority_weight", 1.0), "priority_weight",
                                      low=checks.PRIORITY_WEIGHT_MIN,
                                      high=checks.PRIORITY_WEIGHT_MAX),
        slo_s=None if slo is None else checks.number(slo, "slo_s", low=0.0, above=True),
        entity=None if entity is None else checks.text(entity, "entity"),
        mixed=f.get("mixed", False),
        min_scale_factor=None if low is None else checks.integer(
            low, "min_scale_factor", low=1, high=sf))
    workload = checks.text(f.get("workload", ""), "workload")
    if workload:
        try:
            check_workload(workload)
        except UnknownWorkload as err:
            raise BadValue("workload", str(err), show=False) from None
    limit = f.get("max_runtime_s")
    after = f.get("after", [])
    if not isinstance(after, list) or len(after) > MAX_AFTER:
        raise BadValue("after", f"must be a list of at most {MAX_AFTER} job ids", after)
    return JobRow(spec, workload=workload,
                  command=checks.text(f.get("command", ""), "command", one_line=False),
                  user=checks.text(f.get("user", ""), "user"),
                  array_id=checks.text(f.get("array_id", ""), "array_id"),
                  array_index=checks.integer(f.get("array_index", 0), "array_index", low=0),
                  max_runtime_s=None if limit is None else checks.number(
                      limit, "max_runtime_s", low=0.0),
                  after=tuple(checks.text(a, "after", empty=False) for a in after))


def _columns(job: JobRow, state: Any, steps_done: Any, reason: Any, arrival_s: Any,
             completion_s: Any, started_s: Any, ended_s: Any) -> JobRow:
    """``job`` with the other columns: state, durable steps, reason and times."""
    total = job.spec.total_steps
    state = _text(state, "state")
    if state not in STATES:
        raise BadValue("state", f"must be one of {', '.join(STATES)}", state)
    steps = checks.integer(_plain(steps_done, "steps_done"), "steps_done", low=0, high=total)
    if state not in FINAL and steps == total:
        raise BadValue("steps_done", f"must be < total_steps ({total}) for a {state} job",
                       steps)
    return stored(job, state).but(
        steps_done=steps,
        reason=None if reason is None else _text(reason, "reason", one_line=False),
        arrival_s=checks.number(_plain(arrival_s, "arrival_s"), "arrival_s", low=0.0),
        completion_s=_time(completion_s, "completion_s"),
        started_s=_time(started_s, "started_s"), ended_s=_time(ended_s, "ended_s"))


def _time(raw: Any, field: str) -> float | None:
    """A time column: None (not yet), or seconds >= 0 on the daemon's clock."""
    return None if raw is None else checks.number(_plain(raw, field), field, low=0.0)


def _spec(raw: Any) -> dict:
    """The stored spec: a JSON object of ``SPEC_FIELDS`` and ``RUN_FIELDS``."""
    fields = _json(raw, "spec")
    if not isinstance(fields, dict):
        raise BadValue("spec", "must be a JSON object", fields)
    for key in fields:
        if key not in SPEC_FIELDS + RUN_FIELDS:
            raise BadValue("spec", f"unknown key {checks.shown(key)}", show=False)
    return fields


def _known(spec: JobSpec, table: Table) -> None:
    """The job runs somewhere by the table, as the submission door requires."""
    if not runs_on(table, spec.job_type, spec.scale_factor):
        raise BadValue("job_type", f"no worker type of the throughput table runs it at "
                                   f"scale factor {spec.scale_factor}", spec.job_type)


def _salvaged(job_id: str, raw: Any) -> JobRow:
    """What a bad ``spec`` column still says to show: the job type, scale factor and total
    steps where they are good."""
    try:
        f = _spec(raw)
    except BadValue:
        f = {}
    return JobRow(JobSpec(
        id=job_id,
        job_type=_or("?", checks.text, f.get("job_type"), "job_type", empty=False),
        scale_factor=_or(1, checks.integer, f.get("scale_factor"), "scale_factor", low=1,
                         high=checks.INT32_MAX),
        total_steps=_or(1, checks.integer, f.get("total_steps"), "total_steps", low=1)))


def _refused(job: JobRow, steps_done: Any, arrival_s: Any, err: BadValue) -> JobRow:
    """``job`` as a ``failed`` row refused with ``err``, with its steps and arrival where
    they are good."""
    return refused(job, f"{REFUSED}: {err}",
                   steps_done=_or(0, checks.integer, steps_done, "steps_done", low=0,
                                  high=job.spec.total_steps),
                   arrival_s=_or(0.0, checks.number, arrival_s, "arrival_s", low=0.0))


def _or(default: Any, check: Callable[..., Any], value: Any, *args, **kw) -> Any:
    try:
        return check(value, *args, **kw)
    except BadValue:
        return default


# ---- servers, throughputs, meta -----------------------------------------------------------
def server_row(server_id: Any, worker_type: Any, workers: Any, address: Any,
               hostname: Any) -> ServerRow:
    """The typed row of raw ``servers`` columns, or ``BadValue``."""
    ids = _json(workers, "workers")
    if not isinstance(ids, list) or not ids:
        raise BadValue("workers", "must be a non-empty JSON list of worker ids", ids)
    ids = tuple(checks.integer(w, "workers", low=0) for w in ids)
    if len(set(ids)) != len(ids):
        raise BadValue("workers", "must not repeat a worker id", list(ids))
    return ServerRow(checks.integer(_plain(server_id, "id"), "id", low=0),
                     _text(worker_type, "worker_type", empty=False), ids,
                     _text(address, "address", empty=False), _text(hostname, "hostname"))


def throughput(job_id: Any, worker_type: Any, steps_per_s: Any) -> tuple[str, str, float]:
    """(job, worker type, steps/s > 0) of a raw ``throughputs`` row, or ``BadValue``."""
    return (_text(job_id, "job_id", empty=False), _text(worker_type, "worker_type", empty=False),
            checks.number(_plain(steps_per_s, "steps_per_s"), "steps_per_s", low=0.0,
                          above=True))


def pair_throughput(pair: Any, job_id: Any, worker_type: Any,
                    steps_per_s: Any) -> tuple[str, str, str, float]:
    """(pair key, one of its two jobs, worker type, steps/s > 0) of a raw
    ``pair_throughputs`` row, or ``BadValue``."""
    key = _text(pair, "pair", empty=False)
    members = key_members(key)
    if len(members) != 2 or not all(members):
        raise BadValue("pair", "must name two jobs (a+b)", key)
    job, worker, rate = throughput(job_id, worker_type, steps_per_s)
    if job not in members:
        raise BadValue("job_id", f"must be a job of pair {key}", job)
    return key, job, worker, rate


def scaling_sample(job_type: Any, worker_type: Any, gpus: Any,
                   steps_per_s: Any) -> tuple[str, str, int, float]:
    """(job type, worker type, GPUs >= 1, steps/s > 0) of a raw ``scaling`` row, or
    ``BadValue``."""
    return (_text(job_type, "job_type", empty=False), _text(worker_type, "worker_type",
                                                            empty=False),
            checks.integer(_plain(gpus, "gpus"), "gpus", low=1),
            checks.number(_plain(steps_per_s, "steps_per_s"), "steps_per_s", low=0.0,
                          above=True))


def host(job_id: Any, server_id: Any) -> tuple[str, int]:
    """(job, server id) of a raw ``hosts`` row, or ``BadValue``."""
    return (_text(job_id, "job_id", empty=False),
            checks.integer(_plain(server_id, "server_id"), "server_id", low=0))


def meta_value(key: Any, value: Any) -> tuple[str, str]:
    """(key, value) of a raw ``meta`` row, its value checked by the key's declaration
    (``meta.declared``; a key none declares passes unchecked), or ``BadValue``."""
    key, value = _text(key, "meta key", one_line=False), _text(value, "meta value",
                                                               one_line=False)
    declaration = declared(key)
    if declaration is not None:
        declaration.check(value, key)
    return key, value


# ---- raw values ---------------------------------------------------------------------------
def _text(raw: Any, field: str, *, one_line: bool = True, empty: bool = True) -> str:
    """A text column read as bytes (``CAST(... AS BLOB)``): UTF-8, then ``checks.text``."""
    if isinstance(raw, bytes):
        try:
            raw = utf8(raw)
        except NotUtf8 as err:
            raise BadValue(field, f"not UTF-8 text at {err}", show=False) from None
    return checks.text(raw, field, one_line=one_line, empty=empty)


def _plain(raw: Any, field: str) -> Any:
    """A number column as read back: text in it (bytes) decoded, for the checks to refuse
    by its own name."""
    return _text(raw, field, one_line=False) if isinstance(raw, bytes) else raw


def _json(raw: Any, field: str) -> Any:
    text = _text(raw, field, one_line=False)
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise BadValue(field, "must be JSON", text) from None


def event(job_id: Any, time_unix: Any, user: Any, action: Any, detail: Any) -> tuple:
    """An ``events`` row (a job's history): (job, time, user, action, detail)."""
    return (_text(job_id, "job_id", empty=False),
            checks.number(_plain(time_unix, "time_unix"), "time_unix", low=0.0),
            _text(user, "user"), _text(action, "action", empty=False),
            _text(detail, "detail"))


def usage(job_id: Any, generation: Any, user: Any, entity: Any, worker_type: Any,
          gpus: Any, start_unix: Any, end_unix: Any, price: Any, share: Any = 1.0) -> tuple:
    """A ``usage`` row (one ended run), checked: times in order, GPUs >= 1, price >= 0,
    share in (0, 1]."""
    start = checks.number(_plain(start_unix, "start_unix"), "start_unix", low=0.0)
    end = checks.number(_plain(end_unix, "end_unix"), "end_unix", low=start)
    return (_text(job_id, "job_id", empty=False),
            checks.integer(_plain(generation, "generation"), "generation", low=0),
            _text(user, "user"), _text(entity, "entity"),
            _text(worker_type, "worker_type", empty=False),
            checks.integer(_plain(gpus, "gpus"), "gpus", low=1), start, end,
            checks.number(_plain(price, "price"), "price", low=0.0),
            checks.number(_plain(share, "share"), "share", low=0.0, high=1.0, above=True))
