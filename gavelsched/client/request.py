"""``JobRequest``: a job to submit, as a typed record checked at the door (docs/design.md,
Safety rules: every field checked once, where it comes in), from Python, a mapping or a
job YAML file (``gavelsched submit JOB.yaml``'s keys, ``JOB_KEYS``).

A bad value raises ``InputError``, one line naming the field (and the file, from YAML).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from .errors import InputError

__all__ = ["JOB_KEYS", "JobRequest", "job_fields"]

JOB_KEYS = ("workload", "command", "job_type", "scale_factor", "total_steps",
            "priority_weight", "slo_s", "entity", "mixed", "min_scale_factor",
            "max_runtime_s", "after")
MAX_AFTER = 1000           # jobs one job may wait for


@dataclass(frozen=True)
class JobRequest:
    """A job to submit. ``total_steps`` steps of ``job_type`` (a type of the scheduler's
    throughput table) on ``scale_factor`` GPUs, running a reference ``workload`` or a
    shell ``command`` (neither: its job type's reference workload). ``priority_weight``
    (None: 1), ``slo_s`` (seconds from submission; None: none), ``entity`` (hierarchical
    policies, thesis §5.4.3), ``mixed`` (may run on several GPU types at once under a
    ``*_mixed`` policy), ``min_scale_factor`` (elastic: may run on down to this many
    GPUs; Varuna §4), ``max_runtime_s`` (a time limit: once it has run that long it stops
    at its next checkpoint and fails with reason "time limit"; None: none), ``after``
    (jobs or arrays it waits for: it is cancelled if one fails or is cancelled)."""

    job_type: str
    total_steps: int
    scale_factor: int = 1
    priority_weight: float | None = None
    slo_s: float | None = None
    entity: str | None = None
    workload: str | None = None
    command: str | None = None
    mixed: bool = False
    min_scale_factor: int | None = None
    max_runtime_s: float | None = None
    after: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name, value in _checked({f.name: getattr(self, f.name)
                                     for f in fields(self)}).items():
            object.__setattr__(self, name, value)

    @classmethod
    def from_dict(cls, data: Any) -> JobRequest:
        """A job from a mapping of ``JOB_KEYS`` (a key left out or null takes its default;
        an unknown key is refused)."""
        if not isinstance(data, dict):
            raise InputError("expected a mapping of job keys")
        return cls(**_checked(data))

    @classmethod
    def from_yaml(cls, path: str | Path) -> JobRequest:
        """A job from a job YAML file; every refusal names the file."""
        import yaml

        from traces.checks import NotUtf8, utf8
        try:
            raw = Path(path).read_bytes()
        except OSError as err:
            raise InputError(f"{path}: {err.strerror}") from None
        try:
            data = yaml.safe_load(utf8(raw))
        except NotUtf8 as err:
            raise InputError(f"{path}: not UTF-8 text at {err}") from None
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            raise InputError(f"{path}: bad YAML{where}") from None
        except RecursionError:
            raise InputError(f"{path}: bad YAML: nested too deeply") from None
        try:
            return cls.from_dict(data)
        except InputError as err:
            raise InputError(f"{path}: {err}") from None

    @classmethod
    def from_pb(cls, message) -> JobRequest:
        """The job of a ``pb.JobRequest`` (proto3's unset 0 and "" read as None)."""
        return cls(job_type=message.job_type, total_steps=message.total_steps,
                   scale_factor=message.scale_factor or 1,
                   priority_weight=message.priority_weight or None,
                   slo_s=message.slo_s or None,
                   entity=message.entity or None, workload=message.workload or None,
                   command=message.command or None, mixed=message.mixed,
                   min_scale_factor=message.min_scale_factor or None,
                   max_runtime_s=message.max_runtime_s or None, after=tuple(message.after))

    def to_pb(self):
        """The ``pb.JobRequest`` sent to the scheduler (None fields left unset)."""
        from ..rpc import pb
        return pb.JobRequest(**{f.name: list(v) if isinstance(v, tuple) else v
                                for f in fields(self)
                                if (v := getattr(self, f.name)) is not None})


def _checked(data: dict) -> dict:
    """``job_fields``, its refusal as ``InputError``."""
    from traces.checks import BadValue, shown
    try:
        return job_fields(data)
    except BadValue as err:
        raise InputError(err.need if not err.show else
                         f"{err.field} has a bad value {shown(err.value)} ({err.need})") \
            from None


def job_fields(data: dict) -> dict:
    """The checked fields of a mapping of job keys, those not None (docs/design.md, Safety
    rules: every field checked once, at the door). An explicit value must be good:
    ``scale_factor: 0`` is refused, not read as 1 (in the request 0 means unset, as
    proto3 has it). Raises ``BadValue`` naming the first bad field."""
    from traces import checks
    from traces.checks import BadValue, shown
    from traces.workloads import UnknownWorkload, check_workload

    for key in data:
        if key not in JOB_KEYS:
            raise BadValue(shown(key), f"unknown key {shown(key)}; known: "
                                       f"{', '.join(JOB_KEYS)}", show=False)
    for key in ("job_type", "total_steps"):
        if data.get(key) is None:
            raise BadValue(key, f"missing key {key!r}", show=False)
    value = {k: v for k, v in data.items() if v is not None}
    sf = checks.integer(value.get("scale_factor", 1), "scale_factor", low=1,
                        high=checks.INT32_MAX)
    out = {"job_type": checks.text(value["job_type"], "job_type", empty=False),
           "total_steps": checks.integer(value["total_steps"], "total_steps", low=1,
                                         high=checks.MAX_STEPS),
           "scale_factor": sf}
    if "priority_weight" in value:
        out["priority_weight"] = checks.number(
            value["priority_weight"], "priority_weight", low=checks.PRIORITY_WEIGHT_MIN,
            high=checks.PRIORITY_WEIGHT_MAX)
    if "slo_s" in value:
        out["slo_s"] = checks.slo(value["slo_s"])
    for key in ("entity", "workload", "command"):
        if key in value:
            out[key] = checks.text(value[key], key, one_line=key != "command")
    if out.get("workload"):
        try:
            check_workload(out["workload"])
        except UnknownWorkload as err:
            raise BadValue("workload", f"workload: {err}", show=False) from None
    if "mixed" in value:
        if not isinstance(value["mixed"], bool):
            raise BadValue("mixed", "must be true or false", value["mixed"])
        out["mixed"] = value["mixed"]
    if "min_scale_factor" in value:
        out["min_scale_factor"] = checks.integer(value["min_scale_factor"],
                                                 "min_scale_factor", low=1, high=sf)
    if "max_runtime_s" in value:
        if not checks.number(value["max_runtime_s"], "max_runtime_s") > 0:
            raise BadValue("max_runtime_s", "must be > 0 seconds (or null: no limit)",
                           value["max_runtime_s"])
        out["max_runtime_s"] = float(value["max_runtime_s"])
    if "after" in value:
        after = value["after"]
        after = [after] if isinstance(after, (str, int)) and not isinstance(after, bool) \
            else after
        if not isinstance(after, (list, tuple)) or len(after) > MAX_AFTER:
            raise BadValue("after", f"must be a list of at most {MAX_AFTER} job ids", after)
        out["after"] = tuple(checks.text(str(a) if isinstance(a, int)
                                         and not isinstance(a, bool) else a, "after",
                                         empty=False) for a in after)
    return out
