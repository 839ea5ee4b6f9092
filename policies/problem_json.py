"""The door of the Problem JSON (docs/design.md): read it into the records of ``jobs.py``,
checking every field, and raise ``ProblemError`` naming the first bad one.

``Problem.from_dict`` (``problem.py``) is the way in; this module only reads and checks, so
a value is checked here, at the door, never deep inside a policy (docs/style.md §7).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .errors import ProblemError
from .jobs import (
    CONFIG_SEPARATOR,
    COUNT_SEPARATOR,
    ENTITY_POLICIES,
    PAIR_SEPARATOR,
    Configuration,
    Entity,
    Job,
    Pair,
)

# A JSON integer must fit 64 bits (docs/design.md, Safety rules); policies/ imports nothing of
# ours, so this is not traces/checks.py's constant.
INT64_LIMIT = 2**63


def _number(value: Any, where: str, *, minimum: float | None = None,
            strict: bool = False, integer: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProblemError(f"{where}: must be a number, got {_shown(value)}")
    if isinstance(value, int) and not -INT64_LIMIT <= value < INT64_LIMIT:
        raise ProblemError(f"{where}: must be an integer within 64 bits, got {_shown(value)}")
    if not math.isfinite(value):
        raise ProblemError(f"{where}: must be finite, got {_shown(value)}")
    if integer and int(value) != value:
        raise ProblemError(f"{where}: must be a whole number, got {_shown(value)}")
    if minimum is not None and (value <= minimum if strict else value < minimum):
        cmp = ">" if strict else ">="
        raise ProblemError(f"{where}: must be {cmp} {minimum:g}, got {_shown(value)}")
    return int(value) if integer else float(value)


def whole_number(value: Any, where: str, low: int, high: int | None = None) -> int:
    """``value`` if it is an int (not a bool) in ``[low, high]`` (no ``high``: within 64
    bits), else ``ProblemError`` naming ``where``: an entity's cap, a policy's integer
    options."""
    limit = INT64_LIMIT - 1 if high is None else high
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= limit:
        need = f">= {low} within 64 bits" if high is None else f"in [{low}, {high}]"
        raise ProblemError(f"{where}: must be an integer {need}, got {_shown(value)}")
    return value


# The numbers of a job that ``build_columns`` reads after its throughputs, in its order.
JOB_NUMBERS = ("scale_factor", "weight", "remaining_steps", "elapsed_s", "isolated_elapsed_s",
               "slo_s")


def non_finite(problem, per_job, per_type) -> ProblemError:
    """The ``ProblemError`` naming the job (or worker type) of the first NaN or ±inf in
    ``per_job`` (jobs x (types, then ``JOB_NUMBERS``)) or ``per_type`` (types x (workers,
    price)). docs/design.md, Safety rules: the doors refuse such values; behind them
    ``build_columns`` tests its arrays once, vectorised, and only on failure asks this
    which job to name, so that one bad job that slipped through never fails every re-solve
    as a solver's numerical error."""
    import numpy as np

    types = problem.worker_types
    bad = np.argwhere(~np.isfinite(per_job))
    if bad.size:
        i, k = bad[0]
        field = f"throughputs.{types[k]}" if k < len(types) else JOB_NUMBERS[k - len(types)]
        return ProblemError(f"jobs[{i}] (job {problem.jobs[i].id!r}).{field}: must be "
                            f"finite, got {float(per_job[i, k])!r}", job_id=problem.jobs[i].id)
    j, k = np.argwhere(~np.isfinite(per_type))[0]
    return ProblemError(f"{('cluster', 'prices')[k]}.{types[j]}: must be finite, got "
                        f"{float(per_type[j, k])!r}")


def _shown(value: Any) -> str:
    """``repr(value)`` cut to 60 characters: an error stays one short line."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _name(value: Any, where: str) -> str:
    """A name (a worker type, a job id, an entity) as one line of UTF-8 text: a JSON
    ``"\\ud800"`` escape or a newline in one broke whatever printed or wrote it."""
    text = str(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ProblemError(f"{where}: a name must be UTF-8 text, got {_shown(value)}") from None
    if any(c < " " or c == "\x7f" for c in text):
        raise ProblemError(f"{where}: a name must be one line, got {_shown(value)}")
    return text


def _mapping(value: Any, where: str) -> Mapping:
    if not isinstance(value, Mapping):
        raise ProblemError(f"{where}: must be an object, got {type(value).__name__}")
    return value


def problem_fields(data: Any) -> dict[str, Any]:
    """The fields of a ``Problem`` (its keyword arguments) read from the Problem JSON
    ``data``, every one checked; raise ``ProblemError`` naming the first bad field."""
    data = _mapping(data, "problem")
    if "cluster" not in data:
        raise ProblemError("problem: missing field 'cluster'")
    cluster = {
        _name(t, "cluster"): _number(n, f"cluster.{t}", minimum=0)
        for t, n in _mapping(data["cluster"], "cluster").items()
    }
    prices = {
        str(t): _number(p, f"prices.{t}", minimum=0)
        for t, p in _mapping(data.get("prices") or {}, "prices").items()
    }
    unknown_prices = set(prices) - set(cluster)
    if unknown_prices:
        raise ProblemError(f"prices: unknown worker type {min(unknown_prices)!r}")
    raw_jobs = data.get("jobs", [])
    if not isinstance(raw_jobs, list):
        raise ProblemError("jobs: must be a list")
    jobs = [_parse_job(j, i, cluster) for i, j in enumerate(raw_jobs)]
    seen: set[str] = set()
    for i, job in enumerate(jobs):
        if job.id in seen:
            raise ProblemError(f"jobs[{i}].id: duplicate id {job.id!r}")
        if PAIR_SEPARATOR in job.id:
            raise ProblemError(f"jobs[{i}].id: must not contain {PAIR_SEPARATOR!r}, got {job.id!r}")
        seen.add(job.id)
    by_id = {job.id: job for job in jobs}
    raw_pairs = data.get("pairs") or []
    if not isinstance(raw_pairs, list):
        raise ProblemError("pairs: must be a list")
    pairs = [_parse_pair(p, i, by_id, cluster) for i, p in enumerate(raw_pairs)]
    entities = {_name(name, "entities"): _parse_entity(name, e) for name, e in
                _mapping(data.get("entities") or {}, "entities").items()}
    for i, job in enumerate(jobs):
        if entities and job.entity is not None and job.entity not in entities:
            raise ProblemError(f"jobs[{i}].entity: unknown entity {job.entity!r}")
    previous = {
        str(k): {str(t): _number(f, f"previous.{k}.{t}", minimum=0) for t, f in
                 _mapping(v, f"previous.{k}").items()}
        for k, v in _mapping(data.get("previous") or {}, "previous").items()
    }
    return dict(cluster=cluster, jobs=tuple(jobs), prices=prices, pairs=tuple(pairs),
                entities=entities, previous=previous,
                policy_state=_mapping(data.get("policy_state") or {}, "policy_state"))


ENTITY_FIELDS = ("weight", "policy", "max_gpus")


def _parse_entity(name: Any, raw: Any) -> Entity:
    """One entity of the ``entities`` object (thesis §5.4.3): ``weight`` (a finite number
    > 0, default 1), ``policy`` (``ENTITY_POLICIES``, default fairness) and ``max_gpus``
    (an integer >= 1: the most GPUs its jobs hold at once; absent or null: no cap)."""
    where = f"entities.{name}"
    raw = _mapping(raw, where)
    unknown = [k for k in raw if k not in ENTITY_FIELDS]
    if unknown:
        raise ProblemError(f"{where}: unknown field {_shown(unknown[0])}; known: "
                           f"{', '.join(ENTITY_FIELDS)}")
    policy = raw.get("policy", "fairness")
    if not isinstance(policy, str) or policy not in ENTITY_POLICIES:
        raise ProblemError(f"{where}.policy: must be one of {', '.join(ENTITY_POLICIES)}, "
                           f"got {_shown(policy)}")
    cap = raw.get("max_gpus")
    if cap is not None:
        cap = whole_number(cap, f"{where}.max_gpus", 1)
    return Entity(name=str(name), weight=_number(raw.get("weight", 1.0), f"{where}.weight",
                                                 minimum=0, strict=True),
                  policy=policy, max_gpus=cap)


def _parse_job(raw: Any, i: int, cluster: Mapping[str, float]) -> Job:
    where = f"jobs[{i}]"
    raw = _mapping(raw, where)
    for required in ("id", "throughputs"):
        if required not in raw:
            raise ProblemError(f"{where}: missing field {required!r}")
    throughputs = {}
    for t, v in _mapping(raw["throughputs"], f"{where}.throughputs").items():
        if t not in cluster:
            raise ProblemError(f"{where}.throughputs: unknown worker type {t!r}")
        throughputs[str(t)] = 0.0 if v is None else _number(v, f"{where}.throughputs.{t}", minimum=0)
    slo = raw.get("slo_s")
    return Job(
        id=_name(raw["id"], f"{where}.id"),
        throughputs=throughputs,
        scale_factor=_number(raw.get("scale_factor", 1), f"{where}.scale_factor", minimum=1, integer=True),
        weight=_number(raw.get("weight", 1.0), f"{where}.weight", minimum=0, strict=True),
        remaining_steps=_number(raw.get("remaining_steps", 0.0), f"{where}.remaining_steps", minimum=0),
        elapsed_s=_number(raw.get("elapsed_s", 0.0), f"{where}.elapsed_s", minimum=0),
        slo_s=None if slo is None else _number(slo, f"{where}.slo_s", minimum=0, strict=True),
        entity=None if raw.get("entity") is None else _name(raw["entity"], f"{where}.entity"),
        isolated_elapsed_s=None if raw.get("isolated_elapsed_s") is None else _number(
            raw["isolated_elapsed_s"], f"{where}.isolated_elapsed_s", minimum=0),
        configurations=_parse_configurations(raw.get("configurations"), where, cluster),
    )


def _parse_configurations(raw: Any, where: str,
                          cluster: Mapping[str, float]) -> tuple[Configuration, ...]:
    """A job's optional ``configurations``: ``[{"gpus": {type: count}, "throughput": s}]``."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ProblemError(f"{where}.configurations: must be a list, got {type(raw).__name__}")
    out, seen = [], set()
    for k, entry in enumerate(raw):
        at = f"{where}.configurations[{k}]"
        entry = _mapping(entry, at)
        unknown = set(entry) - {"gpus", "throughput"}
        if unknown:
            raise ProblemError(f"{at}: unknown field {min(unknown)!r}")
        if "gpus" not in entry or "throughput" not in entry:
            raise ProblemError(f"{at}: needs 'gpus' and 'throughput'")
        gpus = {}
        for t, n in _mapping(entry["gpus"], f"{at}.gpus").items():
            if t not in cluster:
                raise ProblemError(f"{at}.gpus: unknown worker type {t!r}")
            if CONFIG_SEPARATOR in t or COUNT_SEPARATOR in t:
                raise ProblemError(f"{at}.gpus: worker type {t!r} contains "
                                   f"{CONFIG_SEPARATOR!r} or {COUNT_SEPARATOR!r}")
            gpus[str(t)] = _number(n, f"{at}.gpus.{t}", minimum=1, integer=True)
        if not gpus:
            raise ProblemError(f"{at}.gpus: must name at least one worker type")
        config = Configuration(gpus, _number(entry["throughput"], f"{at}.throughput",
                                             minimum=0, strict=True))
        if config.name in seen:
            raise ProblemError(f"{at}: configuration {config.name!r} listed twice")
        seen.add(config.name)
        out.append(config)
    return tuple(out)


def _parse_pair(raw: Any, i: int, by_id: Mapping[str, Job], cluster: Mapping[str, float]) -> Pair:
    where = f"pairs[{i}]"
    raw = _mapping(raw, where)
    ids = raw.get("jobs")
    if not isinstance(ids, list) or len(ids) != 2 or ids[0] == ids[1]:
        raise ProblemError(f"{where}.jobs: must list two different job ids, got {_shown(ids)}")
    ids = [str(x) for x in ids]
    for x in ids:
        if x not in by_id:
            raise ProblemError(f"{where}.jobs: unknown job id {x!r}")
    if by_id[ids[0]].scale_factor != by_id[ids[1]].scale_factor:
        raise ProblemError(f"{where}: jobs {ids[0]!r} and {ids[1]!r} have different scale factors")
    throughputs = {}
    for t, v in _mapping(raw.get("throughputs", {}), f"{where}.throughputs").items():
        if t not in cluster:
            raise ProblemError(f"{where}.throughputs: unknown worker type {t!r}")
        if not isinstance(v, (list, tuple)) or len(v) != 2:
            raise ProblemError(f"{where}.throughputs.{t}: must be [first, second], got {_shown(v)}")
        throughputs[str(t)] = tuple(_number(x, f"{where}.throughputs.{t}", minimum=0) for x in v)
    return Pair(jobs=(ids[0], ids[1]), throughputs=throughputs)
