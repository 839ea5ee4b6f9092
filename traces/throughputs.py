"""Throughput table files: gavelsched's native format and Gavel's JSON (docs/design.md).

A throughput table gives the steps/s of each (job type, scale factor) on each worker type,
alone and, for space sharing, co-located in pairs (thesis §5.3.1: the matrix T; Figure 5.4).

**Native format** (YAML or JSON), a mapping of worker types::

    v100:
      "ResNet-50 (batch size 64)": {1: 10.1, 2: 19.6, 4: 38.7, 8: 76.9}
      "A3C": 24.4                      # a bare number is scale factor 1
    k80:
      ...
    pairs:                             # optional: co-located throughputs
      v100:
        - {a: "A3C", b: "LM (batch size 5)", steps_per_s: [20.1, 15.2]}
        - {a: "X", a_sf: 2, b: "Y", b_sf: 2, steps_per_s: [3.0, 4.0]}
    restart_s: {"A3C": 40, "LM (batch size 5)": 25}   # optional: restart cost per job type
    meta: {...}                        # optional, free-form, ignored by the loader

``pairs``, ``restart_s`` and ``meta`` are reserved and cannot name a worker type.
``restart_s`` declares what a restart (start-up plus checkpoint) costs each job type it
names, in seconds: finite and >= 0, for job types the table has (Sia §3.3, the restart
penalty; ``ThroughputTable.restart_s``). Scale-factor keys are
integers (``"2"`` in JSON). A steps/s of 0 means "cannot run there". Each unordered pair
appears at most once per worker type; ``steps_per_s`` is ``[a's steps/s, b's steps/s]``.

**Gavel's format** (JSON, loaded unchanged)::

    {"v100": {"('A3C', 1)": {"null": 24.4, "('LM (batch size 5)', 1)": [20.1, 15.2]}}}

Keys are parsed with a regular expression, never evaluated. Pairs of ``[0.0, 0.0]`` (Gavel's
marker for jobs that cannot share a GPU) are dropped; each pair is listed twice in Gavel
files, once under each job, and the first copy is kept.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from . import checks
from .checks import BadValue, NotUtf8, shown, utf8
from .errors import TraceError
from .types import JobKey, ThroughputTable

log = logging.getLogger(__name__)

RESERVED_KEYS = ("pairs", "restart_s", "meta")
_GAVEL_KEY = re.compile(
    r"""^\(\s*(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")\s*,\s*([0-9]{1,10})\s*\)$""")


# ----------------------------------------------------------------------------- reading

def load_table(path: str | os.PathLike) -> ThroughputTable:
    """Read a throughput table, native (YAML/JSON) or Gavel's JSON, detected from content."""
    return table_from_dict(read_document(path), path)


def read_document(path: str | os.PathLike) -> Any:
    """Parse a ``.json``, ``.yaml`` or ``.yml`` file (other names: JSON, then YAML)."""
    path = Path(path)
    try:
        text = utf8(path.read_bytes())
    except NotUtf8 as err:
        raise TraceError(path, err.line, None, f"not UTF-8 text (byte offset {err.offset}: "
                         f"{err.byte:#04x})") from None
    suffix = path.suffix.lower()
    if suffix == ".json":
        return _parse_json(text, path)
    if suffix in (".yaml", ".yml"):
        return _parse_yaml(text, path)
    try:
        return json.loads(text)
    except (ValueError, RecursionError):   # not JSON (JSONDecodeError is a ValueError)
        return _parse_yaml(text, path)


def _parse_json(text: str, path: Path) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise TraceError(path, err.lineno, None, f"not valid JSON: {err.msg} "
                         f"(column {err.colno})") from None
    except (ValueError, RecursionError) as err:  # an integer of > 4300 digits, deep nesting
        raise TraceError(path, None, None, "not valid JSON: "
                         f"{str(err).splitlines()[0][:80]}") from None


def _parse_yaml(text: str, path: Path) -> Any:
    import yaml  # here, not at the top: the default catalog is JSON (~35 ms saved at start-up)

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = str(getattr(err, "problem", None) or err).splitlines()[0]
        raise TraceError(path, line, None, f"not valid YAML: {problem}") from None
    except RecursionError:
        raise TraceError(path, None, None, "not valid YAML: nested too deeply") from None


def is_gavel_format(data: Any) -> bool:
    """True when the first job key of the document looks like Gavel's ``"('TYPE', sf)"``."""
    if not isinstance(data, Mapping):
        return False
    for worker, jobs in data.items():
        if worker in RESERVED_KEYS or not isinstance(jobs, Mapping):
            continue
        for key in jobs:
            return isinstance(key, str) and key.lstrip().startswith("(")
    return False


def table_from_dict(data: Any, path: str | os.PathLike = "<table>") -> ThroughputTable:
    """Build a table from a parsed document (native or Gavel, auto-detected)."""
    if not isinstance(data, Mapping):
        raise TraceError(path, None, None, "expected a mapping of worker types to job "
                         f"throughputs, got {type(data).__name__}")
    table = _from_gavel(data, path) if is_gavel_format(data) else _from_native(data, path)
    if not table.solo:
        raise TraceError(path, None, None, "no worker types with throughputs")
    return table


def _rate(value: Any, path, field: str) -> float:
    """A steps/s value: a finite number >= 0 (``checks.number``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TraceError(path, None, field, f"steps/s must be a number, got {shown(value)}")
    try:
        return checks.number(value, field, low=0.0)
    except BadValue:
        raise TraceError(path, None, field, f"steps/s must be finite and >= 0, got "
                         f"{shown(value)}") from None


def _scale_factor(value: Any, path, field: str) -> int:
    """An integer >= 1 that a proto int32 holds; a key may be a string of ASCII digits
    (``"²".isdigit()`` is true, and ``int("²")`` fails)."""
    if isinstance(value, str) and re.fullmatch(r"\s*[0-9]{1,10}\s*", value):
        value = int(value)
    if (isinstance(value, bool) or not isinstance(value, int) or value < 1
            or value > checks.INT32_MAX):
        raise TraceError(path, None, field, f"scale factor must be an integer between 1 and "
                         f"{checks.INT32_MAX}, got {shown(value)}")
    return value


def _name(value: Any, path, field: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise TraceError(path, None, field, f"{what} must be a non-empty string, got "
                         f"{shown(value)}")
    try:
        return checks.text(value, field)     # (one line of UTF-8)
    except BadValue as err:
        raise TraceError(path, None, None, f"{what}: {err.reason}") from None


def _from_native(data: Mapping, path) -> ThroughputTable:
    solo: dict[str, dict[JobKey, float]] = {}
    for worker, jobs in data.items():
        if worker in RESERVED_KEYS:
            continue
        worker = _name(worker, path, str(worker), "a worker type")
        if not isinstance(jobs, Mapping):
            raise TraceError(path, None, worker, "expected a mapping of job types to "
                             f"{{scale factor: steps/s}}, got {type(jobs).__name__}")
        table: dict[JobKey, float] = {}
        for job_type, rates in jobs.items():
            job_type = _name(job_type, path, f"{worker}/{job_type}", "a job type")
            where = f"{worker}/{job_type}"
            if not isinstance(rates, Mapping):
                rates = {1: rates}
            for sf, value in rates.items():
                key = (job_type, _scale_factor(sf, path, f"{where}/{sf}"))
                table[key] = _rate(value, path, f"{where}/{sf}")
        solo[worker] = table
    pairs = _native_pairs(data.get("pairs"), solo, path)
    return ThroughputTable(solo=solo, pairs=pairs,
                           restart_s=_native_restarts(data.get("restart_s"), solo, path))


def _native_restarts(section: Any, solo: Mapping[str, Mapping[JobKey, float]], path
                     ) -> dict[str, float]:
    """``restart_s: {job type: seconds}``: seconds in ``[0, MAX_SECONDS]`` (beyond, a
    replay would never end) of job types in ``solo``."""
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise TraceError(path, None, "restart_s", "expected a mapping of job types to "
                         f"seconds, got {type(section).__name__}")
    known = {job_type for rows in solo.values() for job_type, _ in rows}
    out: dict[str, float] = {}
    for job_type, seconds in section.items():
        where = f"restart_s/{job_type}"
        if job_type not in known:
            raise TraceError(path, None, where, f"job type {shown(job_type)} has no "
                             "throughput in the table")
        try:
            out[job_type] = checks.number(seconds, where, low=0.0, high=checks.MAX_SECONDS)
        except BadValue:
            raise TraceError(path, None, where, "restart cost must be a number of seconds "
                             f"in [0, {checks.MAX_SECONDS:g}], got {shown(seconds)}") from None
    return out


def _native_pairs(section: Any, solo: Mapping[str, Mapping[JobKey, float]], path
                  ) -> dict[str, dict[tuple[JobKey, JobKey], tuple[float, float]]]:
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise TraceError(path, None, "pairs", "expected a mapping of worker types to lists "
                         "of pairs")
    pairs: dict[str, dict[tuple[JobKey, JobKey], tuple[float, float]]] = {}
    for worker, entries in section.items():
        if worker not in solo:
            raise TraceError(path, None, f"pairs/{worker}", f"worker type {worker!r} has "
                             "pairs but no solo throughputs")
        if not isinstance(entries, list):
            raise TraceError(path, None, f"pairs/{worker}", "expected a list of "
                             "{a, b, steps_per_s} entries")
        table: dict[tuple[JobKey, JobKey], tuple[float, float]] = {}
        for i, entry in enumerate(entries):
            where = f"pairs/{worker}[{i}]"
            if not isinstance(entry, Mapping):
                raise TraceError(path, None, where, "expected {a, b, steps_per_s}")
            unknown = set(entry) - {"a", "b", "a_sf", "b_sf", "steps_per_s"}
            if unknown:
                raise TraceError(path, None, f"{where}/{min(map(str, unknown))}", "unknown key "
                                 "(expected a, b, a_sf, b_sf, steps_per_s)")
            keys = []
            for side in ("a", "b"):
                if side not in entry:
                    raise TraceError(path, None, f"{where}/{side}", "missing")
                job = _name(entry[side], path, f"{where}/{side}", "a job type")
                key = (job, _scale_factor(entry.get(f"{side}_sf", 1), path,
                                          f"{where}/{side}_sf"))
                if key not in solo[worker]:
                    raise TraceError(path, None, f"{where}/{side}", f"{key[0]!r} at scale "
                                     f"factor {key[1]} has no solo throughput on {worker}")
                keys.append(key)
            rates = entry.get("steps_per_s")
            if not isinstance(rates, (list, tuple)) or len(rates) != 2:
                raise TraceError(path, None, f"{where}/steps_per_s", "expected [steps/s of a, "
                                 f"steps/s of b], got {rates!r}")
            a, b = keys[0], keys[1]
            if (a, b) in table or (b, a) in table:
                raise TraceError(path, None, where, f"pair ({a[0]!r}, {b[0]!r}) is listed "
                                 "twice")
            table[(a, b)] = (_rate(rates[0], path, f"{where}/steps_per_s"),
                             _rate(rates[1], path, f"{where}/steps_per_s"))
        pairs[worker] = table
    return pairs


def parse_gavel_key(key: str) -> JobKey | None:
    """``"('ResNet-50 (batch size 64)', 2)"`` -> ``("ResNet-50 (batch size 64)", 2)``."""
    match = _GAVEL_KEY.match(key.strip()) if isinstance(key, str) else None
    if match is None:
        return None
    quoted = match.group(1) if match.group(1) is not None else match.group(2)
    return re.sub(r"\\(.)", r"\1", quoted), int(match.group(3))


def _from_gavel(data: Mapping, path) -> ThroughputTable:
    solo: dict[str, dict[JobKey, float]] = {}
    raw_pairs: dict[str, list[tuple[JobKey, JobKey, Any, str]]] = {}
    for worker, jobs in data.items():
        worker = _name(worker, path, str(worker), "a worker type")
        if not isinstance(jobs, Mapping):
            raise TraceError(path, None, worker, "expected a mapping of \"('TYPE', sf)\" "
                             "keys")
        solo[worker], raw_pairs[worker] = {}, []
        for key, entry in jobs.items():
            where = f"{worker}/{key}"
            job = parse_gavel_key(key)
            if job is None:
                raise TraceError(path, None, where, "not a Gavel job key like "
                                 "\"('ResNet-50 (batch size 64)', 1)\"")
            _name(job[0], path, where, "a job type")
            _scale_factor(job[1], path, where)
            if not isinstance(entry, Mapping) or "null" not in entry:
                raise TraceError(path, None, where, "missing \"null\" (the job's steps/s "
                                 "alone)")
            solo[worker][job] = _rate(entry["null"], path, f"{where}/null")
            for other_key, rates in entry.items():
                if other_key == "null":
                    continue
                other = parse_gavel_key(other_key)
                if other is None:
                    raise TraceError(path, None, f"{where}/{other_key}", "not a Gavel job "
                                     "key like \"('A3C', 1)\"")
                _scale_factor(other[1], path, f"{where}/{other_key}")
                raw_pairs[worker].append((job, other, rates, f"{where}/{other_key}"))
    return ThroughputTable(solo=solo, pairs=_gavel_pairs(raw_pairs, solo, path))


_PairTable = dict[tuple[JobKey, JobKey], tuple[float, float]]


def _gavel_pairs(raw_pairs: Mapping[str, list[tuple[JobKey, JobKey, Any, str]]],
                 solo: Mapping[str, Mapping[JobKey, float]], path) -> dict[str, _PairTable]:
    """One entry per unordered pair, from Gavel's listings under both jobs."""
    pairs: dict[str, dict[tuple[JobKey, JobKey], tuple[float, float]]] = {}
    dropped = mismatched = unknown = 0
    for worker, entries in raw_pairs.items():
        table: dict[tuple[JobKey, JobKey], tuple[float, float]] = {}
        for a, b, rates, where in entries:
            if not isinstance(rates, (list, tuple)) or len(rates) != 2:
                raise TraceError(path, None, where, "expected [steps/s of this job, steps/s "
                                 f"of the other], got {rates!r}")
            ra, rb = _rate(rates[0], path, where), _rate(rates[1], path, where)
            if ra == 0.0 and rb == 0.0:
                dropped += 1
                continue
            if b not in solo[worker]:
                unknown += 1
                continue
            if (b, a) in table:
                kb, ka = table[(b, a)]
                if not (math.isclose(ka, ra, rel_tol=1e-6) and math.isclose(kb, rb,
                                                                            rel_tol=1e-6)):
                    mismatched += 1
                continue
            table.setdefault((a, b), (ra, rb))
        pairs[worker] = table
    if dropped:
        log.debug("%s: dropped %d [0, 0] pairs (cannot co-locate)", path, dropped)
    if unknown:
        log.warning("%s: skipped %d pairs whose other job has no solo throughput", path,
                    unknown)
    if mismatched:
        log.warning("%s: %d pairs disagree between their two listings; kept the first", path,
                    mismatched)
    return pairs


# ----------------------------------------------------------------------------- writing

def table_to_native_dict(table: ThroughputTable) -> dict[str, Any]:
    """The native document of ``table`` (integer scale-factor keys; see ``dump_table``)."""
    out: dict[str, Any] = {}
    for worker, jobs in table.solo.items():
        rows: dict[str, dict[int, float]] = {}
        for (job_type, sf), rate in jobs.items():
            rows.setdefault(job_type, {})[sf] = rate
        out[worker] = rows
    pairs = {}
    for worker, entries in table.pairs.items():
        rows_ = []
        for (a, b), (ra, rb) in entries.items():
            row: dict[str, Any] = {"a": a[0], "b": b[0]}
            if a[1] != 1:
                row["a_sf"] = a[1]
            if b[1] != 1:
                row["b_sf"] = b[1]
            row["steps_per_s"] = [ra, rb]
            rows_.append(row)
        if rows_:
            pairs[worker] = rows_
    if pairs:
        out["pairs"] = pairs
    if table.restart_s:
        out["restart_s"] = dict(table.restart_s)
    return out


def table_to_gavel_dict(table: ThroughputTable) -> dict[str, dict[str, dict[str, Any]]]:
    """Gavel's JSON document of ``table``. As Gavel's own files do, every pair of jobs with
    the same scale factor gets an entry under both jobs; ``[0.0, 0.0]`` where unknown."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for worker, jobs in table.solo.items():
        has_pairs = bool(table.pairs.get(worker))
        rows: dict[str, dict[str, Any]] = {}
        for a, rate in jobs.items():
            row: dict[str, Any] = {"null": rate}
            if has_pairs:
                for b in jobs:
                    if b[1] == a[1]:
                        pair = table.pair(worker, a, b)
                        row[repr(b)] = list(pair) if pair is not None else [0.0, 0.0]
            rows[repr(a)] = row
        out[worker] = rows
    return out


def table_slice(source: Any, keys: Iterable[JobKey],
                worker_types: Sequence[str]) -> ThroughputTable:
    """What ``source`` (a table, or anything with its ``get`` and ``pair``) gives the job
    ``keys`` on ``worker_types``, alone and co-located: every pair of keys with one scale
    factor, as the core pairs jobs (thesis §5.3.1). What a replay of a live scheduler needs
    to plan its jobs' pairs as it does (``simulator/twin.py``)."""
    keys = sorted(set(keys))
    solo = {t: {k: rate for k in keys if (rate := float(source.get(t, *k))) > 0}
            for t in worker_types}
    pairs = {}
    for t in worker_types:
        rows = {(a, b): (float(got[0]), float(got[1]))
                for i, a in enumerate(keys) for b in keys[i:]
                if a[1] == b[1] and (got := source.pair(t, a, b)) is not None}
        if rows:
            pairs[t] = rows
    return ThroughputTable(solo, pairs)


def table_text(table: ThroughputTable) -> str:
    """``table`` as one line of native JSON (``table_from_dict(json.loads(...))`` reads it)."""
    return json.dumps(_string_keys(table_to_native_dict(table)), separators=(",", ":"))


def dump_table(table: ThroughputTable, path: str | os.PathLike, *,
               fmt: str = "native") -> None:
    """Write ``table`` to ``path``: ``fmt`` is ``"native"`` (YAML for .yaml/.yml, else
    JSON) or ``"gavel"`` (JSON)."""
    path = Path(path)
    if fmt == "gavel":
        text = json.dumps(table_to_gavel_dict(table), indent=2) + "\n"
    elif fmt == "native":
        doc = table_to_native_dict(table)
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml
            text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=100,
                                  allow_unicode=True)
        else:
            text = json.dumps(_string_keys(doc), indent=2) + "\n"
    else:
        raise ValueError(f"unknown table format {fmt!r}; expected 'native' or 'gavel'")
    write_text(path, text)


def _string_keys(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _string_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_string_keys(v) for v in value]
    return value


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (UTF-8, ``\\n`` line endings)."""
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        handle.write(text)
