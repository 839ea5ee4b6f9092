"""The scheduler daemon's cluster YAML (issue #8, DESIGN.md CLI contract).

Required: ``listen`` (host:port), ``policy``, ``round_seconds``, ``state_dir``. Optional:
``auth_token_file``, ``tls`` {``cert``, ``key``, ``ca``}, ``metrics_listen`` (host:port),
``throughputs`` (a table file, native or Gavel JSON; default: the catalog's table),
``expected_workers`` (GPUs to wait for before the first round, default 1),
``checkpoint_dir`` (shared storage; default ``state_dir/checkpoints``),
``heartbeat_seconds`` (default 2; a worker silent for 3 x this is failed),
``plan_lead_seconds`` (how long before a round ends the next one is planned, thesis §5.6;
default 30% of the round: the iterator asks for its renewal at 75% of its lease and must
find the plan made), ``workers_tls`` (true: reach workers over TLS, verified with
``tls.ca``; default false), ``min_resolve_interval_s`` (default: Gavel's
1920 s scaled by round_seconds / 360 s), ``seed``.

An unknown key, a missing one or a bad value raises ``ConfigError`` naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..rpc.security import TlsFiles

REQUIRED = ("listen", "policy", "round_seconds", "state_dir")
OPTIONAL = ("auth_token_file", "tls", "metrics_listen", "throughputs", "expected_workers",
            "checkpoint_dir", "heartbeat_seconds", "plan_lead_seconds",
            "min_resolve_interval_s", "seed", "workers_tls")
TLS_KEYS = ("cert", "key", "ca")
PLAN_LEAD_FRACTION = 0.3


class ConfigError(ValueError):
    """A cluster YAML that cannot be used; the message names the key."""


@dataclass(frozen=True)
class DaemonConfig:
    listen: str
    policy: str
    round_seconds: float
    state_dir: Path
    auth_token_file: Path | None = None
    tls: TlsFiles | None = None
    metrics_listen: str | None = None
    throughputs: Path | None = None
    expected_workers: int = 1
    checkpoint_dir: Path | None = None
    heartbeat_seconds: float = 2.0
    plan_lead_seconds: float | None = None
    min_resolve_interval_s: float | None = None
    seed: int = 0
    workers_tls: bool = False

    @property
    def checkpoints(self) -> Path:
        return self.checkpoint_dir or self.state_dir / "checkpoints"

    @property
    def plan_lead(self) -> float:
        if self.plan_lead_seconds is not None:
            return min(self.plan_lead_seconds, 0.9 * self.round_seconds)
        return PLAN_LEAD_FRACTION * self.round_seconds

    @property
    def resolve_interval(self) -> float:
        if self.min_resolve_interval_s is not None:
            return self.min_resolve_interval_s
        return 1920.0 * self.round_seconds / 360.0


def load_config(path: str | Path) -> DaemonConfig:
    """Read and check a cluster YAML file."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise ConfigError(f"{path}: {err.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}: bad YAML{where}: {getattr(err, 'problem', err)}") from None
    return parse_config(data, base=path.parent, name=str(path))


def parse_config(data: Any, *, base: Path = Path("."), name: str = "config") -> DaemonConfig:
    """Check a parsed YAML mapping; relative paths are taken from ``base``."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{name}: expected a mapping of keys, got {type(data).__name__}")
    for key in data:
        if key not in REQUIRED + OPTIONAL:
            raise ConfigError(f"{name}: unknown key {key!r}; known: "
                              f"{', '.join(REQUIRED + OPTIONAL)}")
    for key in REQUIRED:
        if key not in data or data[key] is None:
            raise ConfigError(f"{name}: missing key {key!r}")

    def path_of(key: str, value: Any) -> Path:
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{name}: {key} must be a path, got {value!r}")
        p = Path(value).expanduser()
        return p if p.is_absolute() else base / p

    def number(key: str, low: float, *, integer: bool = False) -> Any:
        value = data[key]
        ok = isinstance(value, int) if integer else isinstance(value, (int, float))
        if isinstance(value, bool) or not ok or not value >= low:
            kind = "an integer" if integer else "a number"
            raise ConfigError(f"{name}: {key} must be {kind} >= {low}, got {value!r}")
        return int(value) if integer else float(value)

    kw: dict[str, Any] = {}
    for key in ("listen", "metrics_listen"):
        if data.get(key) is not None:
            kw[key] = _address(name, key, data[key])
    policy = data["policy"]
    if not isinstance(policy, str):
        raise ConfigError(f"{name}: policy must be a policy name, got {policy!r}")
    from policies import UnknownPolicy, get_policy
    try:
        get_policy(policy)
    except UnknownPolicy as err:
        raise ConfigError(f"{name}: policy: {str(err).splitlines()[0]}") from None
    kw["policy"] = policy
    kw["round_seconds"] = number("round_seconds", 0.1)
    kw["state_dir"] = path_of("state_dir", data["state_dir"])
    for key in ("auth_token_file", "throughputs", "checkpoint_dir"):
        if data.get(key) is not None:
            kw[key] = path_of(key, data[key])
    if data.get("expected_workers") is not None:
        kw["expected_workers"] = number("expected_workers", 0, integer=True)
    if data.get("seed") is not None:
        kw["seed"] = number("seed", 0, integer=True)
    for key in ("heartbeat_seconds", "plan_lead_seconds", "min_resolve_interval_s"):
        if data.get(key) is not None:
            kw[key] = number(key, 0.05 if key == "heartbeat_seconds" else 0.0)
    if data.get("workers_tls") is not None:
        if not isinstance(data["workers_tls"], bool):
            raise ConfigError(f"{name}: workers_tls must be true or false, "
                              f"got {data['workers_tls']!r}")
        kw["workers_tls"] = data["workers_tls"]
    if data.get("tls") is not None:
        tls = data["tls"]
        if not isinstance(tls, Mapping):
            raise ConfigError(f"{name}: tls must be a mapping with cert, key, ca")
        for key in tls:
            if key not in TLS_KEYS:
                raise ConfigError(f"{name}: unknown key 'tls.{key}'; known: cert, key, ca")
        if ("cert" in tls) != ("key" in tls):
            raise ConfigError(f"{name}: tls.cert and tls.key go together")
        kw["tls"] = TlsFiles(**{k: path_of(f"tls.{k}", v) for k, v in tls.items()})
    return DaemonConfig(**kw)


def _address(name: str, key: str, value: Any) -> str:
    if isinstance(value, str) and ":" in value:
        host, _, port = value.rpartition(":")
        if host and port.isdigit() and 0 <= int(port) < 65536:
            return value
    raise ConfigError(f"{name}: {key} must be host:port, got {value!r}")
