"""The cluster YAML's scheduling settings: what ``gavelsched simulate`` gives a policy with
``--entities``, ``--option`` and ``--prices``/``--price-trace``, the scheduler daemon reads
from three keys (``SETTINGS_KEYS``), so that it runs every policy as the simulator does:
the water-filling policies with their entities (thesis §5.4.3), the cost and SLO policies
with their prices (chapter 6), ``min_makespan_with_budget`` with its budget.

- ``entities``: ``{NAME: {weight: W, policy: fairness|fifo, max_gpus: N}}``, the Problem
  JSON's ``entities`` object (``policies/problem_json.py``), or ``{NAME: W}`` for a weight
  alone. ``weight`` is a number in [1e-6, 1e6] (default 1), ``policy`` the entity's inner
  policy (default fairness), ``max_gpus`` an integer >= 1 capping the GPUs the entity's
  jobs hold at once (absent: no cap). Names follow a job's ``entity``: non-empty text
  without control characters. The cap holds under every policy (the round planner's quota,
  ``gavelsched/mechanism/quota.py``); a policy that does not read entities only logs that
  it ignores their weights.
- ``policy_options``: ``{KEY: VALUE}``, what ``gavelsched solve --option KEY=VALUE`` takes
  (``policies.policy_options(policy)``), e.g. ``budget: 500``. A value is a number, a
  string, true/false or null. The options are checked by making the policy and solving a
  two-job problem with it, so that a value the policy reads only when it solves (a solver
  name) is refused here rather than at every re-solve. ``seed`` (an integer >= 0), where
  the policy declares it, wins over the cluster's ``seed``; POP's ``partitions`` and
  ``processes`` are integers in [1, 1024].
- ``prices``: $/GPU-hour, ``{TYPE: PRICE}`` (finite, >= 0); or the path of a price trace
  file (``traces/prices.py``: ``{TYPE: [[time_s, price], ...]}``, relative paths from the
  config file's folder); or both, as the mapping with a ``trace: PATH`` entry. Before a
  type's first change in the trace its static price holds. The policy prices a type the
  YAML does not with the catalog's price (``traces.default_prices``: k80, p100, v100), as
  a simulation does; under a policy that reads prices, a server of a type priced nowhere
  is refused at registration (``servers.py``): every re-solve would fail for want of its
  price.

``parse_settings`` is a door (docs/design.md, Safety rules; docs/style.md §7): every value
is checked here, once, and a bad one raises ``SettingsError``, one line naming the key.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from policies import (Entity, Infeasible, Policy, Problem, ProblemError, UnknownPolicy,
                      get_policy, policy_options)
from policies.registry import WRAPPER_OPTIONS
from traces import checks, default_prices
from traces.checks import BadValue, shown
from traces.prices import PriceTrace, PriceTraceError

from .files import FileError, absolute_path

log = logging.getLogger(__name__)

SETTINGS_KEYS = ("entities", "policy_options", "prices")
TRACE_KEY = "trace"          # prices: {TRACE_KEY: PATH, TYPE: PRICE, ...}
# The most changes of each type's price a Status carries (``price_changes_after``): the
# scheduler's ETA replay spans at most 2,000 rounds, 200 hours of hourly spot prices at
# Gavel's 360-s rounds.
MAX_PRICE_CHANGES = 512
MAX_POP = 1024               # the most ``partitions`` or ``processes`` (POP) an option asks


class SettingsError(ValueError):
    """A bad ``entities``, ``policy_options`` or ``prices``; the message is one line naming
    the key, e.g. ``cluster.yaml: entities.team-a.weight: must be finite, got nan``."""


def _frozen(mapping: Mapping) -> Mapping:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class ClusterSettings:
    """The checked settings (module docstring); read-only mappings inside."""

    entities: Mapping[str, Entity] = field(default_factory=dict)
    policy_options: Mapping[str, Any] = field(default_factory=dict)
    prices: Mapping[str, float] = field(default_factory=dict)
    price_trace: PriceTrace | None = None
    price_trace_path: Path | None = None

    def __post_init__(self) -> None:
        for name in ("entities", "policy_options", "prices"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))

    @property
    def entity_names(self) -> tuple[str, ...]:
        """The entities, in the order the file lists them."""
        return tuple(self.entities)

    @property
    def entity_caps(self) -> dict[str, int]:
        """Entity -> ``max_gpus``, for the capped ones."""
        return {n: e.max_gpus for n, e in self.entities.items() if e.max_gpus is not None}

    def prices_at(self, t: float) -> dict[str, float]:
        """$/GPU-hour per type at ``t`` seconds on the price trace's axis (the executor's
        ``now``): the static prices, overlaid by the trace's in force at ``t``."""
        if self.price_trace is None:
            return dict(self.prices)
        return self.price_trace.at(t, self.prices)

    def policy_prices_at(self, t: float) -> dict[str, float]:
        """What the policy prices the GPUs at: ``prices_at``, and the catalog's price
        (``traces.default_prices``) for a type they leave out, as a simulation prices its
        cluster. (``usage`` keeps ``prices_at``: a type the YAML does not price costs
        nothing there.)"""
        return {**default_prices(), **self.prices_at(t)}

    def price_changes_after(self, t: float) -> dict[str, tuple[tuple[float, float], ...]]:
        """Each type's price changes after ``t`` on the trace (at most
        ``MAX_PRICE_CHANGES``): (when, $/GPU-hour from then), as the policy will price the
        type; empty without a trace."""
        if self.price_trace is None:
            return {}
        return self.price_trace.changes_after(t, MAX_PRICE_CHANGES)

    def next_price_change_after(self, t: float) -> float | None:
        """When the trace next changes a price after ``t``; None without one."""
        return None if self.price_trace is None else self.price_trace.next_change_after(t)

    def policy(self, name: str, seed: int = 0) -> Policy:
        """The policy ``name`` made with ``policy_options``, and ``seed`` where it declares
        a ``seed`` option and the options give none."""
        options = dict(self.policy_options)
        if "seed" in policy_options(name):
            options.setdefault("seed", seed)
        return get_policy(name, **options)


def parse_settings(data: Mapping, *, policy: str, base: str | Path = ".",
                   name: str = "config") -> ClusterSettings:
    """The settings of a parsed cluster YAML ``data`` (its other keys are not read) for
    ``policy``; relative paths are taken from ``base``, errors start with ``name`` (the
    file). Raises ``SettingsError`` naming the key (module docstring)."""
    if not isinstance(data, Mapping):
        raise SettingsError(f"{name}: expected a mapping of keys, got {type(data).__name__}")
    if not isinstance(policy, str):
        raise SettingsError(f"{name}: policy must be a policy name, got {shown(policy)}")
    try:
        accepted = policy_options(policy)
    except UnknownPolicy as err:
        raise SettingsError(f"{name}: policy: {_line(err)}") from None
    entities = _entities(data.get("entities"), name)
    options = _options(data.get("policy_options"), policy, accepted, name)
    prices, trace, trace_path = _prices(data.get("prices"), Path(base), name)
    settings = ClusterSettings(entities, options, prices, trace, trace_path)
    made = _checked_policy(settings, policy, name)
    if entities and "entities" not in made.traits.reads:
        log.warning("%s: policy %s does not read entities: their weights and inner policies "
                    "are ignored (their max_gpus caps still hold)", name, policy)
    return settings


# ---- entities ---------------------------------------------------------------------------

def _entities(raw: Any, name: str) -> dict[str, Entity]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise SettingsError(f"{name}: entities must be a mapping of entity name to "
                            f"{{weight, policy, max_gpus}}, got {type(raw).__name__}")
    out = {}
    for key, value in raw.items():
        try:
            entity = checks.text(key, "entity name", empty=False)
        except BadValue as err:
            raise SettingsError(f"{name}: entities: {err}") from None
        where = f"entities.{entity}"
        if isinstance(value, bool) or value is None:
            raise SettingsError(f"{name}: {where}: must be a weight or a mapping "
                                f"{{weight, policy, max_gpus}}, got {shown(value)}")
        if isinstance(value, (int, float)):
            value = {"weight": value}
        try:
            parsed = Problem.from_dict({"cluster": {}, "entities": {entity: value}}).entities
        except ProblemError as err:
            raise SettingsError(f"{name}: {_line(err)}") from None
        try:
            checks.number(parsed[entity].weight, f"{where}.weight",
                          low=checks.PRIORITY_WEIGHT_MIN, high=checks.PRIORITY_WEIGHT_MAX)
        except BadValue as err:
            raise SettingsError(f"{name}: {err}") from None
        out[entity] = parsed[entity]
    return out


# ---- policy options ---------------------------------------------------------------------

def _options(raw: Any, policy: str, accepted: Mapping[str, str],
             name: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise SettingsError(f"{name}: policy_options must be a mapping of option to value, "
                            f"got {type(raw).__name__}")
    out = {}
    for key, value in raw.items():
        if not isinstance(key, str) or key not in accepted:
            raise SettingsError(f"{name}: policy_options.{_key(key)}: not an option of "
                                f"{policy}; accepted: {', '.join(sorted(accepted))}")
        where = f"{name}: policy_options.{key}"
        if isinstance(value, float) and not math.isfinite(value):
            raise SettingsError(f"{where}: must be a finite number, got {shown(value)}")
        if isinstance(value, int) and not isinstance(value, bool) and \
                abs(value) > checks.INT64_MAX:
            raise SettingsError(f"{where}: must be an integer within 64 bits, got "
                                f"{shown(value)}")
        if isinstance(value, str):
            try:
                checks.text(value, key)
            except BadValue as err:
                raise SettingsError(f"{where}: {err.reason}") from None
        elif value is not None and not isinstance(value, (bool, int, float)):
            raise SettingsError(f"{where}: must be a number, a string, true/false or null, "
                                f"got {shown(value)}")
        if key in WRAPPER_OPTIONS or key == "seed":
            try:
                checks.integer(value, key, low=0 if key == "seed" else 1,
                               high=checks.INT64_MAX if key == "seed" else MAX_POP)
            except BadValue as err:
                raise SettingsError(f"{where}: {err.reason}") from None
        out[key] = value
    return out


def _checked_policy(settings: ClusterSettings, policy: str, name: str) -> Policy:
    """The policy made with the options and tried on a small problem (without POP, whose
    options are checked as numbers); a failure names the option to blame. A trial that
    fails the same way without any option is no fault of the options (a policy the trial
    does not suit), and lets them pass."""
    options = dict(settings.policy_options)
    failure = _try(policy, options)
    if failure is None or (failure.made and failure == _try(policy, {})):
        return settings.policy(policy)
    key = _culprit(policy, options, failure.why)
    where = f"policy_options.{key}" if key else "policy_options"
    said = failure.why if policy in failure.why else f"{policy}: {failure.why}"
    raise SettingsError(f"{name}: {where}: {said}")


class _Failure(NamedTuple):
    """Why a policy failed: ``made`` if it was made and failed to solve the trial."""

    made: bool
    why: str


def _try(policy: str, options: Mapping[str, Any]) -> _Failure | None:
    """How ``policy`` with ``options`` fails to be made or to solve ``_trial``; None when
    it solves it. The trial's Infeasible is no fault of an option (a small budget)."""
    inner = {k: v for k, v in options.items() if k not in WRAPPER_OPTIONS}
    try:
        made = get_policy(policy, **inner)
    except Exception as err:   # noqa: BLE001 - a door: whatever a bad value raises
        return _Failure(False, _line(err) or type(err).__name__)
    try:
        made.solve(_trial(made.traits.needs_pairs))
    except Infeasible:
        return None
    except Exception as err:   # noqa: BLE001
        return _Failure(True, _line(err) or type(err).__name__)
    return None


def _culprit(policy: str, options: Mapping[str, Any], why: str) -> str | None:
    """The option to blame for the failure ``why``: the first whose value alone fails
    otherwise than the policy with no options does, or else the one option it names."""
    baseline = _try(policy, {})
    for key, value in options.items():
        alone = _try(policy, {key: value})
        if alone is not None and alone != baseline:
            return key
    named = [k for k in policy_options(policy)
             if re.search(rf"(?<![A-Za-z_]){re.escape(k)}(?![A-Za-z_])", why)]
    return named[0] if len(named) == 1 else None


def _trial(pairs: bool) -> Problem:
    """Two one-GPU jobs on two priced GPUs (co-located too, for a policy that needs
    pairs): what ``_try`` solves."""
    jobs = [{"id": str(i), "throughputs": {"trial": 1.0}, "remaining_steps": 100.0}
            for i in range(2)]
    data: dict[str, Any] = {"cluster": {"trial": 2}, "prices": {"trial": 1.0}, "jobs": jobs}
    if pairs:
        data["pairs"] = [{"jobs": ["0", "1"], "throughputs": {"trial": [0.6, 0.6]}}]
    return Problem.from_dict(data)


# ---- prices -----------------------------------------------------------------------------

def _prices(raw: Any, base: Path, name: str):
    """(static prices, trace, trace path) of ``prices``."""
    if raw is None:
        return {}, None, None
    if isinstance(raw, str):
        raw = {TRACE_KEY: raw}
    if not isinstance(raw, Mapping):
        raise SettingsError(f"{name}: prices must be a mapping of worker type to $/GPU-hour, "
                            f"or a price trace file, got {type(raw).__name__}")
    static, trace, path = {}, None, None
    for key, value in raw.items():
        if key == TRACE_KEY and isinstance(value, str):
            path = _path(value, base, f"{name}: prices.{TRACE_KEY}")
            try:
                trace = PriceTrace.load(path)
            except PriceTraceError as err:
                raise SettingsError(f"{name}: prices.{TRACE_KEY}: {_line(err)}") from None
            continue
        try:
            worker_type = checks.text(key, "worker type", empty=False)
        except BadValue as err:
            raise SettingsError(f"{name}: prices: {err}") from None
        try:
            static[worker_type] = checks.price(value, f"prices.{worker_type}")
        except BadValue as err:
            raise SettingsError(f"{name}: {err}") from None
    return static, trace, path


def _path(value: str, base: Path, where: str) -> Path:
    """``value`` as an absolute path, relative ones from ``base`` (as config.py's paths)."""
    try:
        return absolute_path(value, base)
    except FileError as err:
        raise SettingsError(f"{where}: {err}") from None


def _key(key: Any) -> str:
    """An option's name as an error shows it: as it is when it is short plain text."""
    return key if isinstance(key, str) and _plain(key) else shown(key)


def _plain(key: str) -> bool:
    return bool(key) and len(key) <= checks.SHOWN_CHARS and not any(
        c < " " or c == "\x7f" for c in key)


def _line(err: BaseException) -> str:
    """An error's first line, cut to a readable length."""
    lines = str(err).splitlines()
    return lines[0][:300] if lines else ""
