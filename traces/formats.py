"""Trace files: native ``.jsonl`` and Gavel's tab-separated ``.trace`` (docs/design.md).

``.jsonl``: one JSON object a line, with ``job_type``, ``scale_factor``, ``total_steps`` and
``arrival_s`` (seconds from the start of the trace), and optionally ``priority_weight``
(default 1), ``slo_s`` (seconds from arrival, or null), ``entity`` (or null), and Gavel's
runtime fields ``command``, ``working_dir``, ``num_steps_arg``, ``needs_data_dir``, and
``mixed`` (true: the job may run on several GPU types at once, VirtualFlow §5) and
``min_scale_factor`` (an elastic job: it may also run on fewer GPUs of one type, down to
this many, 1 <= it <= scale_factor; ``gavelsched/core/configurations.py``), and a job's own
speeds: ``throughputs`` (``{worker_type: steps/s}`` at its scale factor, finite and >= 0, in
place of the table's row for its type; a type not named cannot run it) and ``startup_s``
(seconds a run on new workers loses, in place of its type's preemption overhead), and
``restart_s`` (what a restart costs it for the restart rule, start-up plus save; default:
its ``startup_s`` or its type's overhead). Unknown
fields are errors, so that a misspelt optional field is not silently dropped. Blank lines
are skipped.

``.trace``: Gavel's format, 10 tab-separated fields a line: job_type, command, working_dir,
num_steps_arg, needs_data_dir (0/1), total_steps, scale_factor, priority_weight, SLO
(seconds, -1 for none) and arrival_s. It has no entity; writing one drops it with a warning.

Order: jobs keep file order, and job *i* of the list is the *i*-th job of the file. Arrival
times need not be sorted; ``sort_by_arrival`` sorts stably when a consumer needs it (the
generator and importers write sorted traces).

Every problem raises ``TraceError`` naming the file, the line and the field: bytes that are
not UTF-8 (the byte offset), a line that is not JSON, a number that is not finite, an
integer beyond 64 bits (``checks.py``, docs/design.md Safety rules).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from . import checks
from .checks import BadValue, NotUtf8, shown, utf8
from .errors import TraceError
from .throughputs import write_text
from .types import ThroughputTable, TraceJob

log = logging.getLogger(__name__)

FORMATS = {".jsonl": "jsonl", ".trace": "trace"}
GAVEL_FIELDS = ("job_type", "command", "working_dir", "num_steps_arg", "needs_data_dir",
                "total_steps", "scale_factor", "priority_weight", "SLO", "arrival_s")
JSONL_REQUIRED = ("job_type", "scale_factor", "total_steps", "arrival_s")
JSONL_OPTIONAL = ("priority_weight", "slo_s", "entity", "command", "working_dir",
                  "num_steps_arg", "needs_data_dir", "mixed", "min_scale_factor",
                  "throughputs", "startup_s", "restart_s")


def trace_format(path: str | os.PathLike, fmt: str | None = None) -> str:
    """``"jsonl"`` or ``"trace"``: ``fmt`` if given, else from the file extension."""
    if fmt is not None:
        if fmt not in FORMATS.values():
            raise ValueError(f"unknown trace format {fmt!r}; expected 'jsonl' or 'trace'")
        return fmt
    try:
        return FORMATS[Path(path).suffix.lower()]
    except KeyError:
        raise TraceError(path, None, None, "unknown trace format: the file name must end in "
                         ".jsonl (native) or .trace (Gavel)") from None


# ----------------------------------------------------------------------------- reading

def load_trace(path: str | os.PathLike, *, fmt: str | None = None,
               table: ThroughputTable | None = None,
               cluster: Mapping[str, int] | None = None) -> list[TraceJob]:
    """Read a trace in file order. With ``table`` (and optionally ``cluster``), also run
    ``validate_trace`` with the jobs' true line numbers."""
    numbered = read_trace(path, fmt=fmt)
    jobs = [job for _, job in numbered]
    if table is not None:
        validate_trace(jobs, table, cluster, path, lines=[line for line, _ in numbered])
    return jobs


def read_trace(path: str | os.PathLike, *, fmt: str | None = None
               ) -> list[tuple[int, TraceJob]]:
    """``(line number, job)`` for every job of the file, in file order."""
    kind = trace_format(path, fmt)
    parse = _parse_jsonl_line if kind == "jsonl" else _parse_trace_line
    out = []
    try:
        with open(path, encoding="utf-8") as handle:
            for number, text in enumerate(handle, start=1):
                text = text.rstrip("\r\n")
                if not text.strip():
                    continue
                out.append((number, parse(text, path, number)))
    except UnicodeDecodeError:
        _not_utf8(path)
    log.debug("%s: read %d jobs", path, len(out))
    return out


def _not_utf8(path) -> None:
    """Raise the ``TraceError`` of a file that is not UTF-8: its line and byte offset."""
    try:
        utf8(Path(path).read_bytes())
    except NotUtf8 as err:
        raise TraceError(path, err.line, None, f"not UTF-8 text (byte offset {err.offset}: "
                         f"{err.byte:#04x})") from None
    raise TraceError(path, None, None, "not UTF-8 text")  # pragma: no cover - it changed


class _Fields:
    """Typed access to one line's raw values, raising TraceError that names the field."""

    def __init__(self, path, line: int) -> None:
        self.path, self.line = path, line

    def error(self, field: str | None, message: str) -> TraceError:
        return TraceError(self.path, self.line, field, message)

    def number(self, field: str, value: Any) -> float:
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                raise self.error(field, f"not a number: {shown(value)}") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(field, f"not a number: {shown(value)}")
        try:
            return checks.number(value, field)
        except BadValue:
            raise self.error(field, f"must be finite, got {shown(value)}") from None

    def integer(self, field: str, value: Any) -> int:
        """A whole number within 64 bits; a JSON integer is taken exactly."""
        if not isinstance(value, int) or isinstance(value, bool):
            value = self.number(field, value)
        try:
            return checks.whole(value, field)
        except BadValue as err:
            raise self.error(field, err.reason) from None

    def job_type(self, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.error("job_type", f"must be a non-empty string, got {shown(value)}")
        if "\t" in value or "\n" in value:
            raise self.error("job_type", "must not contain tabs or newlines")
        return self.text("job_type", value)

    def scale_factor(self, value: Any) -> int:
        sf = self.integer("scale_factor", value)
        if sf < 1:
            raise self.error("scale_factor", f"must be >= 1 (the number of GPUs), got {sf}")
        if sf > checks.INT32_MAX:
            raise self.error("scale_factor", f"must be <= {checks.INT32_MAX}, got {sf}")
        return sf

    def min_scale_factor(self, value: Any, scale_factor: int) -> int | None:
        if value is None:
            return None
        low = self.integer("min_scale_factor", value)
        if not 1 <= low <= scale_factor:
            raise self.error("min_scale_factor", f"must be between 1 and scale_factor "
                             f"({scale_factor}), got {low}")
        return low

    def total_steps(self, value: Any) -> int:
        steps = self.integer("total_steps", value)
        if not 0 < steps <= checks.MAX_STEPS:
            raise self.error("total_steps", f"must be > 0 and <= {checks.MAX_STEPS}, got {steps}")
        return steps

    def arrival_s(self, value: Any) -> float:
        arrival = self.number("arrival_s", value)
        if arrival < 0:
            raise self.error("arrival_s", f"must be >= 0, got {arrival!r}")
        return arrival

    def priority_weight(self, value: Any) -> float:
        weight = self.number("priority_weight", value)
        if weight <= 0:
            raise self.error("priority_weight", f"must be > 0, got {weight!r}")
        if not checks.PRIORITY_WEIGHT_MIN <= weight <= checks.PRIORITY_WEIGHT_MAX:
            raise self.error("priority_weight", f"must be between "
                             f"{checks.PRIORITY_WEIGHT_MIN:g} and "
                             f"{checks.PRIORITY_WEIGHT_MAX:g}, got {weight!r}")
        return weight

    def slo(self, field: str, value: Any, *, none_marker: bool) -> float | None:
        if value is None:
            return None
        slo = self.number(field, value)
        if none_marker and slo == -1:
            return None
        if slo <= 0:
            hint = " (or -1 for none)" if none_marker else " (or null for none)"
            raise self.error(field, f"must be > 0{hint}, got {slo!r}")
        return slo

    def flag(self, field: str, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true"):
            return True
        if text in ("0", "false"):
            return False
        raise self.error(field, f"must be 0 or 1, got {shown(value)}")

    def throughputs(self, value: Any) -> dict[str, float] | None:
        """A job's own ``{worker_type: steps/s}``: names non-empty, rates finite, >= 0."""
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.error("throughputs", f"must be an object of worker type -> steps/s, "
                             f"got {shown(value)}")
        out = {}
        for worker_type, rate in value.items():
            if not worker_type.strip():
                raise self.error("throughputs", "a worker type must be a non-empty string")
            out[worker_type] = self.number(f"throughputs.{worker_type[:40]}", rate)
            if out[worker_type] < 0:
                raise self.error(f"throughputs.{worker_type[:40]}",
                                 f"must be >= 0, got {out[worker_type]!r}")
        return out

    def seconds(self, field: str, value: Any) -> float | None:
        """Seconds >= 0, or None."""
        if value is None:
            return None
        seconds = self.number(field, value)
        if seconds < 0:
            raise self.error(field, f"must be >= 0, got {seconds!r}")
        return seconds

    def text(self, field: str, value: Any) -> str:
        """A string ("" for none): UTF-8, without NUL (``checks.text``)."""
        if value is None:
            return ""
        try:
            return checks.text(value, field, one_line=False)
        except BadValue as err:
            raise self.error(field, err.reason) from None


def _parse_jsonl_line(text: str, path, line: int) -> TraceJob:
    f = _Fields(path, line)
    try:
        row = json.loads(text)
    except json.JSONDecodeError as err:
        raise f.error(None, f"not valid JSON: {err.msg} (column {err.colno})") from None
    except (ValueError, RecursionError) as err:   # an integer of > 4300 digits, deep nesting
        raise f.error(None, f"not valid JSON: {str(err).splitlines()[0][:80]}") from None
    if not isinstance(row, dict):
        raise f.error(None, f"expected a JSON object, got {type(row).__name__}")
    for name in JSONL_REQUIRED:
        if name not in row:
            raise f.error(name, "missing")
    unknown = [k for k in row if k not in JSONL_REQUIRED and k not in JSONL_OPTIONAL]
    if unknown:
        raise f.error(unknown[0][:40], "unknown field (known: "
                      f"{', '.join(JSONL_REQUIRED + JSONL_OPTIONAL)})")
    entity = row.get("entity")
    if entity is not None and (not isinstance(entity, str) or not entity):
        raise f.error("entity", f"must be a non-empty string or null, got {shown(entity)}")
    entity = entity if entity is None else f.text("entity", entity)
    scale_factor = f.scale_factor(row["scale_factor"])
    return TraceJob(
        job_type=f.job_type(row["job_type"]),
        scale_factor=scale_factor,
        total_steps=f.total_steps(row["total_steps"]),
        arrival_s=f.arrival_s(row["arrival_s"]),
        priority_weight=f.priority_weight(row.get("priority_weight", 1.0)),
        slo_s=f.slo("slo_s", row.get("slo_s"), none_marker=False),
        entity=entity,
        command=f.text("command", row.get("command")),
        working_dir=f.text("working_dir", row.get("working_dir")),
        num_steps_arg=f.text("num_steps_arg", row.get("num_steps_arg")),
        needs_data_dir=f.flag("needs_data_dir", row.get("needs_data_dir", False)),
        mixed=f.flag("mixed", row.get("mixed", False)),
        min_scale_factor=f.min_scale_factor(row.get("min_scale_factor"), scale_factor),
        throughputs=f.throughputs(row.get("throughputs")),
        startup_s=f.seconds("startup_s", row.get("startup_s")),
        restart_s=f.seconds("restart_s", row.get("restart_s")),
    )


def _parse_trace_line(text: str, path, line: int) -> TraceJob:
    f = _Fields(path, line)
    values = text.split("\t")
    if len(values) < len(GAVEL_FIELDS):
        raise f.error(GAVEL_FIELDS[len(values)], f"missing (the line has {len(values)} of "
                      f"{len(GAVEL_FIELDS)} tab-separated fields)")
    if len(values) > len(GAVEL_FIELDS):
        raise f.error(None, f"{len(values)} tab-separated fields, expected "
                      f"{len(GAVEL_FIELDS)}: {', '.join(GAVEL_FIELDS)}")
    v = dict(zip(GAVEL_FIELDS, values))
    return TraceJob(
        job_type=f.job_type(v["job_type"]),
        scale_factor=f.scale_factor(v["scale_factor"]),
        total_steps=f.total_steps(v["total_steps"]),
        arrival_s=f.arrival_s(v["arrival_s"]),
        priority_weight=f.priority_weight(v["priority_weight"]),
        slo_s=f.slo("SLO", v["SLO"], none_marker=True),
        command=v["command"], working_dir=v["working_dir"], num_steps_arg=v["num_steps_arg"],
        needs_data_dir=f.flag("needs_data_dir", v["needs_data_dir"]),
    )


# ----------------------------------------------------------------------------- writing

def write_trace(path: str | os.PathLike, jobs: Iterable[TraceJob], *,
                fmt: str | None = None) -> None:
    """Write ``jobs`` in file order, as ``.jsonl`` or ``.trace`` (from the extension)."""
    kind = trace_format(path, fmt)
    jobs = list(jobs)
    if kind == "jsonl":
        lines = [json.dumps(job_to_dict(job), ensure_ascii=False) for job in jobs]
    else:
        lines = [_trace_line(job, path, i) for i, job in enumerate(jobs, start=1)]
        dropped = sum(job.entity is not None for job in jobs)
        if dropped:
            log.warning("%s: Gavel's .trace format has no entity; dropped the entity of %d "
                        "jobs (use .jsonl to keep them)", path, dropped)
        dropped = sum(job.mixed for job in jobs)
        if dropped:
            log.warning("%s: Gavel's .trace format has no mixed flag; dropped it from %d "
                        "jobs (use .jsonl to keep it)", path, dropped)
        for name in ("min_scale_factor", "throughputs", "startup_s", "restart_s"):
            dropped = sum(getattr(job, name) is not None for job in jobs)
            if dropped:
                log.warning("%s: Gavel's .trace format has no %s; dropped it from %d jobs "
                            "(use .jsonl to keep it)", path, name, dropped)
    write_text(Path(path), "".join(line + "\n" for line in lines))
    log.debug("%s: wrote %d jobs", path, len(jobs))


def job_to_dict(job: TraceJob) -> dict[str, Any]:
    """The ``.jsonl`` object of ``job``; Gavel's runtime fields only when set."""
    row: dict[str, Any] = {
        "job_type": job.job_type, "scale_factor": job.scale_factor,
        "total_steps": job.total_steps, "arrival_s": float(job.arrival_s),
        "priority_weight": float(job.priority_weight),
        "slo_s": None if job.slo_s is None else float(job.slo_s), "entity": job.entity,
    }
    for name in ("command", "working_dir", "num_steps_arg"):
        if getattr(job, name):
            row[name] = getattr(job, name)
    if job.needs_data_dir:
        row["needs_data_dir"] = True
    if job.mixed:
        row["mixed"] = True
    if job.min_scale_factor is not None:
        row["min_scale_factor"] = job.min_scale_factor
    if job.throughputs is not None:
        row["throughputs"] = dict(job.throughputs)
    for name in ("startup_s", "restart_s"):
        if getattr(job, name) is not None:
            row[name] = float(getattr(job, name))
    return row


def _trace_line(job: TraceJob, path, line: int) -> str:
    texts = {"job_type": job.job_type, "command": job.command,
             "working_dir": job.working_dir, "num_steps_arg": job.num_steps_arg}
    for name, value in texts.items():
        if "\t" in value or "\n" in value or "\r" in value:
            raise TraceError(path, line, name, "contains a tab or newline, which Gavel's "
                             ".trace format cannot hold")
    slo = -1.0 if job.slo_s is None else float(job.slo_s)
    return "\t".join([
        job.job_type, job.command, job.working_dir, job.num_steps_arg,
        "1" if job.needs_data_dir else "0", str(int(job.total_steps)),
        str(int(job.scale_factor)), repr(float(job.priority_weight)), repr(slo),
        repr(float(job.arrival_s)),
    ])


# ----------------------------------------------------------------------------- checking

def validate_trace(jobs: Sequence[TraceJob], table: ThroughputTable,
                   cluster: Mapping[str, int] | None,
                   path: str | os.PathLike = "<trace>", *,
                   lines: Sequence[int] | None = None) -> None:
    """Check that every job can run: its job type is in ``table`` at its scale factor and,
    given a ``cluster`` (``{worker_type: number of GPUs}``), that some worker type has at
    least ``scale_factor`` GPUs and a non-zero throughput for it. ``lines[i]`` is job *i*'s
    line in ``path`` (default ``i + 1``). Raises ``TraceError`` at the first bad job."""
    known_types = set(table.job_types)
    scale_factors: dict[str, list[int]] = {}
    for job_type, sf in table.job_keys:
        scale_factors.setdefault(job_type, []).append(sf)
    largest, cluster_text = 0, ""
    if cluster is not None:
        largest = max(cluster.values(), default=0)
        cluster_text = ", ".join(f"{w}={n}" for w, n in cluster.items()) or "no GPUs"
    known_workers = set(table.worker_types) | set(cluster or {})
    for i, job in enumerate(jobs):
        line = lines[i] if lines is not None else i + 1
        own = job.throughputs
        if own is not None:
            unknown = sorted(set(own) - known_workers)
            if unknown:
                raise TraceError(path, line, "throughputs", f"unknown worker type "
                                 f"{unknown[0]!r}: not in the throughput table or the cluster")
        elif job.job_type not in known_types:
            raise TraceError(path, line, "job_type", f"unknown job type {job.job_type!r}: not "
                             "in the throughput table")
        elif not table.has(job.job_type, job.scale_factor):
            have = ", ".join(map(str, sorted(scale_factors[job.job_type])))
            raise TraceError(path, line, "scale_factor", f"{job.job_type!r} has no "
                             f"throughput at scale factor {job.scale_factor} (the table has "
                             f"{have})")
        if cluster is None:
            continue
        if job.scale_factor > largest:
            raise TraceError(path, line, "scale_factor", f"scale factor {job.scale_factor} is "
                             "larger than every worker type of the cluster "
                             f"({cluster_text})")
        if not any(n >= job.scale_factor and job.rate_on(w, table) > 0
                   for w, n in cluster.items()):
            raise TraceError(path, line, "job_type", f"{job.job_type!r} at scale factor "
                             f"{job.scale_factor} cannot run on any worker type of the "
                             f"cluster ({cluster_text}): no throughput where there are "
                             "enough GPUs")


def sort_by_arrival(jobs: Iterable[TraceJob]) -> list[TraceJob]:
    """Jobs sorted by arrival time; ties keep their file order."""
    return sorted(jobs, key=lambda job: job.arrival_s)
