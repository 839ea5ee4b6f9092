"""Measured profiles of one worker type, and the throughput priors they give a type the
table lacks (thesis §5.3.3, "Throughput Estimator": a job's throughputs start from priors
that measurements then replace; §5.7.1 Table 5.2: the job types measured).

``gavelsched profile --type T -o FILE`` writes one JSON document per run::

    {"schema": "gavelsched-profile/1", "worker_type": "h100", "precision": "fp32",
     "device": "NVIDIA H100 80GB HBM3", "reduced": false, "torch": "2.11.0+cu130",
     "cuda": "13.0", "measured_at": "2026-11-26T13:45:00+00:00", "seconds": 71.2,
     "steps_per_s": {"ResNet-50 (batch size 16)": 123.4, ...},   # scale factor 1, one GPU
     "skipped": {"job type": "why"}, "architectures": {"ResNet-50": "one line"}}

``schema``, ``worker_type``, ``precision`` (fp32 or bf16) and ``steps_per_s`` (1 to
``MAX_JOB_TYPES`` job types, each > 0 and finite) are required; the rest are optional and
unknown keys are ignored. Every value is checked here, at the door (``TraceError``, one line).

``with_profile`` adds a profile's type to a table. **The table wins**: every (worker type,
job type, scale factor) it has stays as it is; the profile fills only what is missing. A
profile measures one GPU, so scale factor k > 1 is an *estimate*: the type's sf-1 rate times
``table(ref, job, k) / table(ref, job, 1)``, where ``ref`` is the table's type with the
highest sf-1 rate for that job type (the new type is taken to scale like the fastest type
known). A job type the table lacks gets scale factor 1 only, and the new type gets no
co-located pairs (§5.3.3's pair estimates need a profiled pair).

``traces/data/measured/*.json`` holds the measured rows committed with the package; the
fp32 row of a worker type (not a ``reduced`` one) is its shipped prior (``shipped_profiles``;
bf16 rows are records only), and ``table_for_types`` fills a cluster's missing types from
them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from . import checks
from .checks import BadValue, shown
from .errors import TraceError
from .throughputs import read_document
from .types import ThroughputTable

SCHEMA = "gavelsched-profile/1"
PRECISIONS = ("fp32", "bf16")
PRIOR_PRECISION = "fp32"
MAX_JOB_TYPES = 10_000
MEASURED_DIR = Path(__file__).with_name("data") / "measured"


@dataclass(frozen=True)
class Profile:
    """One run of ``gavelsched profile`` on one worker type: steps/s per job type at scale
    factor 1 (one GPU), and how it was measured."""

    worker_type: str
    precision: str
    steps_per_s: Mapping[str, float]
    device: str = ""
    reduced: bool = False
    torch: str = ""
    cuda: str | None = None
    measured_at: str = ""
    seconds: float | None = None
    skipped: Mapping[str, str] = field(default_factory=dict)
    architectures: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("steps_per_s", "skipped", "architectures"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    def describe(self) -> str:
        """``26 job types (fp32, NVIDIA H100 80GB HBM3)``: a log line's summary."""
        n = len(self.steps_per_s)
        how = ", ".join(p for p in (self.precision, self.device,
                                    "reduced" if self.reduced else "") if p)
        return f"{n} job type{'s' if n != 1 else ''} ({how})"


# ----------------------------------------------------------------------------- the door

def read_profile(path: str | os.PathLike) -> Profile:
    """A profile file, checked (``TraceError`` naming the file and field)."""
    return profile_from_dict(read_document(path), path)


def profile_from_dict(data: Any, source: str | os.PathLike = "<profile>") -> Profile:
    """A profile from a parsed document (or a message's fields); ``source`` names it in
    errors."""
    try:
        return _profile(data)
    except BadValue as err:
        raise TraceError(source, None, err.field or None, err.reason) from None


def _profile(data: Any) -> Profile:
    if not isinstance(data, Mapping):
        raise BadValue("", "a profile must be a JSON object", type(data).__name__)
    if data.get("schema") != SCHEMA:
        raise BadValue("schema", f"must be {SCHEMA!r}", data.get("schema"))
    worker_type = _name(data.get("worker_type"), "worker_type")
    precision = data.get("precision")
    if precision not in PRECISIONS:
        raise BadValue("precision", f"must be one of {', '.join(PRECISIONS)}", precision)
    rates = _mapping(data, "steps_per_s", empty=False)
    steps = {_name(job, _at("steps_per_s", job)): checks.number(
        rate, _at("steps_per_s", job), low=0.0, above=True) for job, rate in rates.items()}
    reduced = data.get("reduced", False)
    if not isinstance(reduced, bool):
        raise BadValue("reduced", "must be true or false", reduced)
    seconds = data.get("seconds")
    cuda = data.get("cuda")
    return Profile(
        worker_type=worker_type, precision=precision, steps_per_s=steps,
        device=_optional_text(data, "device"), reduced=reduced,
        torch=_optional_text(data, "torch"),
        cuda=None if cuda is None else checks.text(cuda, "cuda"),
        measured_at=_optional_text(data, "measured_at"),
        seconds=None if seconds is None else checks.number(seconds, "seconds", low=0.0),
        skipped=_notes(data, "skipped"), architectures=_notes(data, "architectures"))


def _name(value: Any, where: str) -> str:
    """A non-empty one-line name (a worker type, a job type)."""
    name = checks.text(value, where, empty=False)
    if not name.strip():
        raise BadValue(where, "must not be blank", value)
    return name


def _mapping(data: Mapping, key: str, *, empty: bool = True) -> Mapping:
    """``data[key]``: an object of at most ``MAX_JOB_TYPES`` job types (missing: ``{}``,
    allowed only where ``empty``)."""
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        raise BadValue(key, "must be an object of job types", type(value).__name__)
    if not value and not empty:
        raise BadValue(key, "missing or empty: a profile measures at least one job type",
                       show=False)
    if len(value) > MAX_JOB_TYPES:
        raise BadValue(key, f"must have at most {MAX_JOB_TYPES} job types", len(value))
    return value


def _optional_text(data: Mapping, key: str) -> str:
    return checks.text(data.get(key, ""), key)


def _notes(data: Mapping, key: str) -> dict[str, str]:
    """``skipped`` / ``architectures``: name -> one line."""
    notes = _mapping(data, key)
    return {_name(k, _at(key, k)): checks.text(v, _at(key, k)) for k, v in notes.items()}


def _at(key: str, name: Any) -> str:
    """The field of one entry, its name cut so that an error stays one short line."""
    name = str(name)
    return f"{key}/{name if len(name) <= checks.SHOWN_CHARS else name[:57] + '...'}"


def profile_to_dict(profile: Profile) -> dict[str, Any]:
    """The JSON document of ``profile`` (``profile_from_dict`` reads it back equal)."""
    return {"schema": SCHEMA, "worker_type": profile.worker_type,
            "device": profile.device, "precision": profile.precision,
            "reduced": profile.reduced, "torch": profile.torch, "cuda": profile.cuda,
            "measured_at": profile.measured_at, "seconds": profile.seconds,
            "steps_per_s": dict(profile.steps_per_s), "skipped": dict(profile.skipped),
            "architectures": dict(profile.architectures)}


# ----------------------------------------------------------------------------- priors

def with_profile(table: ThroughputTable, profile: Profile) -> ThroughputTable:
    """``table`` with ``profile``'s worker type filled in where the table lacks a key (the
    module docstring: the table wins; sf k > 1 scales like the fastest known type)."""
    worker = profile.worker_type
    filled = dict(table.solo.get(worker, {}))
    for job_type, measured in profile.steps_per_s.items():
        base = filled.setdefault((job_type, 1), measured)
        ref = _fastest(table, worker, job_type)
        if ref is None:
            continue                      # a job type the table lacks: sf 1 only
        for k in _scale_factors(table, job_type):
            ratio = table.get(ref, job_type, k) / table.get(ref, job_type, 1)
            if ratio > 0:
                filled.setdefault((job_type, k), base * ratio)
    return ThroughputTable(solo={**table.solo, worker: filled}, pairs=table.pairs,
                           restart_s=table.restart_s)


def _fastest(table: ThroughputTable, worker: str, job_type: str) -> str | None:
    """The table's type (other than ``worker``) with the highest sf-1 rate for the job."""
    rates = [(table.get(t, job_type, 1), t) for t in table.worker_types if t != worker]
    rate, ref = max(rates, default=(0.0, None), key=lambda r: r[0])
    return ref if rate > 0 else None


def _scale_factors(table: ThroughputTable, job_type: str) -> list[int]:
    return sorted({sf for jt, sf in table.job_keys if jt == job_type and sf > 1})


def shipped_profiles(folder: str | os.PathLike | None = None) -> dict[str, Profile]:
    """The shipped prior of each measured worker type: its fp32 row (not ``reduced``) in
    ``folder`` (default ``MEASURED_DIR``, ``traces/data/measured``); ``{}`` when the folder
    is missing. Two such rows for one type are refused."""
    folder = Path(MEASURED_DIR if folder is None else folder)
    out: dict[str, Profile] = {}
    paths = sorted(folder.glob("*.json")) if folder.is_dir() else []
    for path in paths:
        profile = read_profile(path)
        if profile.precision != PRIOR_PRECISION or profile.reduced:
            continue                      # a record, not a prior
        if profile.worker_type in out:
            raise TraceError(path, None, "worker_type", f"a second {PRIOR_PRECISION} row of "
                             f"{profile.worker_type!r}; keep one per worker type")
        out[profile.worker_type] = profile
    return out


def table_for_types(table: ThroughputTable, types: Iterable[str]) -> ThroughputTable:
    """``table`` with every type of ``types`` that it lacks filled from its shipped prior
    (``shipped_profiles``); ``TraceError`` naming a type that neither has."""
    missing = [t for t in dict.fromkeys(types) if t not in table.solo]
    if not missing:
        return table
    shipped = shipped_profiles()
    for worker in missing:
        if worker not in shipped:
            known = ", ".join(dict.fromkeys((*table.worker_types, *shipped)))
            raise TraceError(f"worker type {shown(worker)}", None, None, "no throughputs: "
                             f"neither in the table nor measured in {MEASURED_DIR} (known: "
                             f"{known}); measure it with: gavelsched profile --type {worker}")
        table = with_profile(table, shipped[worker])
    return table


__all__ = ["MAX_JOB_TYPES", "MEASURED_DIR", "PRECISIONS", "SCHEMA", "Profile",
           "profile_from_dict", "profile_to_dict", "read_profile", "shipped_profiles",
           "table_for_types", "with_profile"]
