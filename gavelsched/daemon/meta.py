"""The keys of the store's ``meta`` table, each declared once (issue #27): its name (a key, or
the prefix of a family of keys ending in ``/``), the module that owns it, and the check its
value passes when the store is read back at start (docs/design.md, Safety rules: the store
on load is a door; ``rows.meta_value`` applies the check, and a row that fails it is dropped
with a warning, so its owner reads its default).

The owners build their keys from these declarations (``ROUND.key()``,
``ATTEMPTS.key(job_id)``) and ``Store.set_meta`` refuses a key that none declares. The
families keyed by a job id (``per_job``) are removed with the job's checkpoints when they
are retired (``retention.Retention``): a job that ended long ago keeps no meta rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from traces import checks
from traces.checks import BadValue
from traces.errors import TraceError
from traces.profiles import profile_from_dict

Check = Callable[[str, str], None]   # (value, key): returns, or raises BadValue


@dataclass(frozen=True)
class MetaKey:
    """One key of the ``meta`` table, or (``name`` ending in ``/``) a family of keys
    ``name + suffix``; ``owner`` is the module of ``gavelsched/daemon/`` that writes it;
    ``per_job``: a family whose suffix is a job id."""

    name: str
    owner: str
    check: Check
    per_job: bool = False

    def __post_init__(self) -> None:
        if self.per_job and not self.family:
            raise ValueError(f"meta key {self.name!r}: a per-job key must be a family")

    @property
    def family(self) -> bool:
        return self.name.endswith("/")

    def key(self, suffix: object = "") -> str:
        """The key itself, or for a family the key of ``suffix`` (a job id, a job type, a
        server id)."""
        suffix = str(suffix)
        if self.family == (suffix == ""):
            raise ValueError(f"meta key {self.name!r}: "
                             + ("a family's key needs a suffix" if self.family else
                                f"a single key takes no suffix, got {suffix!r}"))
        return self.name + suffix

    def owns(self, key: str) -> bool:
        """Whether ``key`` is this key, or one of this family."""
        return key.startswith(self.name) and len(key) > len(self.name) if self.family \
            else key == self.name


# ---- the checks of values -----------------------------------------------------------------
def _parsed(kind: type, check, what: str) -> Check:
    """``value`` parses as ``kind`` and passes ``check`` (>= 0)."""
    def verify(value: str, key: str) -> None:
        try:
            number = kind(value)
        except ValueError:
            raise BadValue(key, f"must be {what}", value) from None
        check(number, key, low=kind(0))
    return verify


_count = _parsed(int, checks.integer, "an integer")
_seconds = _parsed(float, checks.number, "a number")


def _json(value: str, key: str):
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        raise BadValue(key, "must be JSON", value) from None


def _attempts(value: str, key: str) -> None:
    """``retries``' history: a JSON list of ``Attempt`` objects (round, exit code, reason)."""
    got = _json(value, key)
    if not isinstance(got, list):
        raise BadValue(key, "must be a JSON list of attempts", got)
    for a in got:
        if not isinstance(a, dict) or set(a) != {"round", "exit_code", "reason"}:
            raise BadValue(key, "each attempt must hold round, exit_code and reason", a)
        checks.integer(a["round"], key, low=0)
        checks.integer(a["exit_code"], key)
        checks.text(a["reason"], key, one_line=False)


def _wave(value: str, key: str) -> None:
    """``startups``' start-up with its launch wave: a JSON list [job type, wave, seconds,
    sequence number] (``core/waves.py``)."""
    got = _json(value, key)
    if not isinstance(got, list) or len(got) != 4:
        raise BadValue(key, "must be a JSON list [job type, wave, seconds, number]", got)
    checks.text(got[0], key)
    checks.integer(got[1], key, low=1)
    checks.number(got[2], key, low=0.0)
    checks.integer(got[3], key, low=0)


def _profile(value: str, key: str) -> None:
    """``priors``' learned profile of a worker type (``traces.profiles``)."""
    try:
        profile_from_dict(_json(value, key), f"store meta {key}")
    except TraceError as err:
        raise BadValue(key, str(err).splitlines()[0]) from None


# ---- the declarations ---------------------------------------------------------------------
ROUND = MetaKey("round", "executor", _count)                 # rounds run, across restarts
EPOCH_UNIX = MetaKey("epoch_unix", "clock", _seconds)        # wall time of the daemon's t = 0
CLOCK_SEEN = MetaKey("clock_seen", "clock", _seconds)        # its time at the last plan
NEXT_JOB_ID = MetaKey("next_job_id", "store", _count)
STARTUP_S = MetaKey("startup_s/", "startups", _seconds)      # per job type: mean start-up
STARTUP_N = MetaKey("startup_n/", "startups", _count)        # per job type: runs averaged
SAVE_S = MetaKey("save_s/", "startups", _seconds)            # per job type: mean save + exit
SAVE_N = MetaKey("save_n/", "startups", _count)              # per job type: runs averaged
RESTART_S = MetaKey("restart_s/", "startups", _seconds)      # per job type: the cost weighed
EXIT_S = MetaKey("exit_s/", "startups", _seconds)            # per job type: last step to exit
EXIT_N = MetaKey("exit_n/", "startups", _count)              # per job type: runs averaged
STARTUP_WAVE = MetaKey("startup_wave/", "startups", _wave)   # per slot: a start-up, its wave
ATTEMPTS = MetaKey("attempts/", "retries", _attempts, per_job=True)
NEXT_GENERATION = MetaKey("next_generation", "fences", _count)
GENERATION = MetaKey("generation/", "fences", _count, per_job=True)
CHECKPOINT_GENERATION = MetaKey("checkpoint_generation/", "fences", _count, per_job=True)
DRAINED = MetaKey("drained/", "servers", _count)             # per server: who drained it
PROFILE = MetaKey("profile/", "priors", _profile)            # per worker type

KEYS: tuple[MetaKey, ...] = (ROUND, EPOCH_UNIX, CLOCK_SEEN, NEXT_JOB_ID, STARTUP_S, STARTUP_N,
                             SAVE_S, SAVE_N, RESTART_S, EXIT_S, EXIT_N, STARTUP_WAVE, ATTEMPTS,
                             NEXT_GENERATION, GENERATION, CHECKPOINT_GENERATION, DRAINED,
                             PROFILE)
PER_JOB: tuple[MetaKey, ...] = tuple(k for k in KEYS if k.per_job)
# a counter the store keeps past the values already issued under these families, so that a
# dropped or lowered one never issues a fencing token twice
COUNTERS: Mapping[MetaKey, tuple[MetaKey, ...]] = {
    NEXT_GENERATION: (GENERATION, CHECKPOINT_GENERATION)}


def declared(key: str) -> MetaKey | None:
    """The declaration ``key`` belongs to, or None."""
    return next((k for k in KEYS if k.owns(key)), None)


def job_keys(job_id: str) -> list[str]:
    """Every per-job key of ``job_id``."""
    return [k.key(job_id) for k in PER_JOB]
