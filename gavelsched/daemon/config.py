"""The scheduler daemon's cluster YAML (issue #8, docs/design.md CLI contract).

Required: ``listen`` (host:port), ``policy``, ``round_seconds``, ``state_dir``. Optional:
``auth_token_file``, ``tls`` {``cert``, ``key``, ``ca``}, ``metrics_listen`` (host:port),
``throughputs`` (a table file, native or Gavel JSON; default: the catalog's table),
``expected_workers`` (GPUs to wait for before the first round, default 1),
``checkpoint_dir`` (shared storage; default ``state_dir/checkpoints``),
``state_dir_min_free_mb`` (below this much free on the state_dir's disk, submissions are
refused and running jobs go on; default 256; 0: no reserve; ``room.py``),
``checkpoint_retention_s`` (how long the checkpoints of a job that ended, done, failed
or cancelled, are kept; default a day; 0 keeps them forever; ``retention.py``),
``ended_jobs_kept_s`` (how long a job that ended stays in the scheduler's memory: in
``status --all``, ``history`` and the dashboard, and read back at a restart; then it is
only in the store, where ``history JOB``, ``logs`` and ``after`` still find it, as
Slurm's ``MinJobAge``; default a day; 0 keeps every job in memory; ``retention.py``),
``ended_jobs_stored_s`` (how long a job that ended stays in the store, with its history,
usage and hosts: then it is deleted, as slurmdbd's ``PurgeJobAfter``; default 0: for
ever; at least ``ended_jobs_kept_s`` and ``checkpoint_retention_s``; ``purge.py``),
``metrics_job_series`` (the most jobs with Prometheus series of their own, those holding
GPUs first; default 5,000; 0: none; ``metrics.py``),
``health_listen`` (host:port of a plain gRPC health service without token or TLS, for
probes such as Kubernetes' ``grpc:`` probe; beyond loopback only with ``insecure``),
``heartbeat_seconds`` (default 2; a worker silent for 3 x this, and as much more as
heartbeats take to reach the scheduler, is failed: ``health``),
``plan_lead_seconds`` (how long before a round ends the next one is planned, thesis §5.6;
default 30% of the round: the iterator asks for its renewal at 75% of its lease and must
find the plan made), ``workers_tls`` (true: reach workers over TLS, verified with
``tls.ca``; default false), ``resolve`` (``responsive``, the
default: a change re-solves the policy at the next round boundary while the last solve took
under a tenth of a round; ``gavel``: at most once per ``min_resolve_interval_s``;
``gavelsched/core/resolving.py``), ``min_resolve_interval_s`` (default: Gavel's 1920 s
scaled by round_seconds / 360 s; with ``responsive``, only after an expensive solve),
``refill_freed`` (default true: a GPU freed mid-round, by a job that finished or failed,
goes to a waiting job for the rest of the round, ``SchedulerCore.place_freed``; false
leaves it idle until the round ends, as Gavel does), ``eta`` (default true: the scheduler
predicts every unfinished job's start and finish, replaying its state in the simulator in a
child process after each round's start, arrival and end, ``forecast.py``; false: none),
``dashboard_listen`` (host:port of the read-only web dashboard, ``dashboard.py``: it
asks for the token; beyond loopback only with ``insecure`` and ``auth_token_file``),
``restart_rule`` (``tenure``, the default: a fresh run keeps its GPUs for twice its
measured restart, start-up plus save, is preferred until that restart is at most a fifth of
the time it held them, and keeps them to its end when its job is within 30 restarts of it,
so that short rounds never thrash; ``gavel``: every round is dealt afresh;
``core/restarts.py``),
``pair_partners`` (space-sharing policies: each job's best partners the policy is offered,
with the pairs an allocation gave time, thesis §5.3.1; fewer each beyond 5,000 jobs,
``core.problem.PARTNER_CHOICES``; default 16, ``PAIR_PARTNERS``: every pair of 20,000 jobs
would be 200 million; 0: every pair, as Gavel),
``job_calls_per_round`` (the RenewLease and ReportSteps calls one job may make in a burst,
and again over each round; default 32, ``budgets.CALLS_PER_ROUND``; 0: no limit),
``user_calls_per_second`` (the client calls a user, not an admin, may make a second on
average, 20 s of them at once; default 5, ``budgets.USER_CALLS_PER_SECOND``; 0: no limit),
``gil_switch_ms`` (the scheduler process's GIL switch interval, ``sys.setswitchinterval``,
in 0.1..100 ms; default 1 ms, Python's own is 5 ms: ``GIL_SWITCH_MS``),
``seed``, ``insecure`` (true: as ``gavelsched scheduler --insecure``; default false);
``entities``, ``policy_options`` and ``prices`` (``settings.py``: a hierarchical policy's
teams with their weights, inner policies and GPU caps, the policy's options, $/GPU-hour per
type or a price trace) and ``users_file`` (``users.py``: each user's role, entities and
token hash; it needs ``auth_token_file``, the daemon token of the workers). These five, and
the two budgets of calls, are what ``gavelsched reload`` and SIGHUP re-read
(``RELOADABLE``).

Every path is made absolute here, once: a relative one is taken from the config file's
folder (docs/design.md, Safety rules), so the daemon and the workers it sends paths to
agree whatever their working directories. An unknown key, a missing one or a bad value
raises ``ConfigError`` naming the key. The metrics and health endpoints have no auth, so
one beyond loopback is refused unless ``insecure`` (docs/design.md, Safety rules: nothing
listens beyond loopback without authentication unless ``--insecure`` says so).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from functools import cached_property
from pathlib import Path
from typing import Any


from traces import checks
from traces.checks import MAX_SECONDS, MIN_ROUND_SECONDS, BadValue, shown

from ..rpc.security import TlsFiles, host_of, is_loopback
from .budgets import CALLS_PER_ROUND, USER_CALLS_PER_SECOND
from .files import FileError, absolute_path, parse_yaml
from .room import MIN_FREE_MB
from .settings import SETTINGS_KEYS, ClusterSettings, SettingsError, parse_settings

REQUIRED = ("listen", "policy", "round_seconds", "state_dir")
OPTIONAL = ("auth_token_file", "tls", "metrics_listen", "throughputs", "expected_workers",
            "checkpoint_dir", "checkpoint_retention_s", "ended_jobs_kept_s",
            "ended_jobs_stored_s", "health_listen", "heartbeat_seconds", "plan_lead_seconds",
            "min_resolve_interval_s", "resolve", "seed", "workers_tls", "insecure",
            "dashboard_listen", "refill_freed", "users_file", "eta", "restart_rule",
            "metrics_job_series", "gil_switch_ms", "pair_partners", "job_calls_per_round",
            "user_calls_per_second", "state_dir_min_free_mb", *SETTINGS_KEYS)
TLS_KEYS = ("cert", "key", "ca")
RESOLVE_MODES = ("responsive", "gavel")        # gavelsched/core/resolving.py
RESTART_RULES = ("tenure", "gavel")            # gavelsched/core/restarts.py
PLAN_LEAD_FRACTION = 0.3
DAY_S = 86400.0
# Partners per job a space-sharing policy is offered (``CoreConfig.pair_partners``): with
# 16, 200 jobs' average JCT came within 0.4% of every pair's under max-min fairness,
# finish-time fairness and Gandiva; with 8, finish-time fairness's was 12% above
# (BENCHMARKS.md, "Space sharing at production size").
PAIR_PARTNERS = 16
METRICS_JOB_SERIES = 5_000      # the most jobs with Prometheus series of their own (metrics.py)
# The scheduler process's GIL switch interval (``sys.setswitchinterval``; Python's default
# is 5 ms), set by ``gavelsched scheduler``. A thread that lets go of the GIL (a sqlite
# call, a lock, gRPC's poll for the next call) waits up to an interval to get it back from
# a busy one (a plan, a Status built for 50,000 jobs): at 5 ms gRPC's one polling thread
# took in ~200 calls a second, and the executor's events waited on their own store writes.
# At 2,048 GPUs and 50,000 jobs heartbeats were answered seconds late and live servers
# failed (BENCHMARKS.md, "The daemon at scale", point 9; ``benchmarks/gil_handoff.py``).
GIL_SWITCH_MS = 1.0
GIL_SWITCH_RANGE_MS = (0.1, 100.0)


# The keys ``gavelsched reload`` (and SIGHUP) put in force; others change at a restart. A
# budget of calls is a limit an operator tunes while the cluster runs, and a restart at
# 50,000 jobs costs a round of its own (BENCHMARKS.md, "Faults at scale").
RELOADABLE = ("users_file", "job_calls_per_round", "user_calls_per_second", *SETTINGS_KEYS)


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
    metrics_job_series: int = METRICS_JOB_SERIES
    throughputs: Path | None = None
    expected_workers: int = 1
    checkpoint_dir: Path | None = None
    state_dir_min_free_mb: int = MIN_FREE_MB
    checkpoint_retention_s: float = DAY_S
    ended_jobs_kept_s: float = DAY_S
    ended_jobs_stored_s: float = 0.0
    health_listen: str | None = None
    heartbeat_seconds: float = 2.0
    plan_lead_seconds: float | None = None
    min_resolve_interval_s: float | None = None
    resolve: str = "responsive"
    restart_rule: str = "tenure"
    pair_partners: int = PAIR_PARTNERS
    refill_freed: bool = True
    seed: int = 0
    workers_tls: bool = False
    insecure: bool = False
    dashboard_listen: str | None = None
    users_file: Path | None = None
    eta: bool = True
    gil_switch_ms: float = GIL_SWITCH_MS
    job_calls_per_round: int = CALLS_PER_ROUND
    user_calls_per_second: float = USER_CALLS_PER_SECOND
    settings: ClusterSettings = ClusterSettings()

    def changed_from(self, old: DaemonConfig) -> list[str]:
        """The fields other than ``settings`` (all of it reloadable) whose values differ
        from ``old``'s."""
        return [f.name for f in fields(self) if f.name != "settings"
                and getattr(self, f.name) != getattr(old, f.name)]

    def with_fixed(self, old: DaemonConfig) -> DaemonConfig:
        """This config's reloadable fields over ``old``'s others (what a restart would
        change stays as it runs)."""
        return replace(old, users_file=self.users_file, settings=self.settings,
                       job_calls_per_round=self.job_calls_per_round,
                       user_calls_per_second=self.user_calls_per_second)

    @property
    def checkpoints(self) -> Path:
        return self.checkpoint_dir or self.state_dir / "checkpoints"

    @property
    def plan_lead(self) -> float:
        if self.plan_lead_seconds is not None:
            return min(self.plan_lead_seconds, 0.9 * self.round_seconds)
        return PLAN_LEAD_FRACTION * self.round_seconds

    @property
    def refill_until(self) -> float:
        """The fraction of a round in which freed GPUs are refilled: until the next round
        is planned (``CoreConfig.refill_until``)."""
        return 1.0 - self.plan_lead / self.round_seconds

    @property
    def resolve_interval(self) -> float:
        if self.min_resolve_interval_s is not None:
            return self.min_resolve_interval_s
        return 1920.0 * self.round_seconds / 360.0

    @cached_property
    def rules(self):
        """The round rules this daemon runs by, as one record (``core/rules.py``): its core's
        config, what its ``Status`` publishes for replays, and what a replay runs by."""
        from ..core.rules import DaemonRules
        return DaemonRules(self.round_seconds, self.resolve, self.resolve_interval,
                           self.refill_freed, self.refill_until, self.plan_lead,
                           restart_rule=self.restart_rule, pair_partners=self.pair_partners)

    @property
    def metrics_exposed(self) -> bool:
        """``/metrics`` (which has no auth) listens beyond loopback."""
        return _exposed(self.metrics_listen)

    @property
    def health_exposed(self) -> bool:
        """The plain health service (no auth) listens beyond loopback."""
        return _exposed(self.health_listen)


def _exposed(address: str | None) -> bool:
    return address is not None and not is_loopback(host_of(address))


def load_config(path: str | Path, *, insecure: bool = False) -> DaemonConfig:
    """Read and check a cluster YAML file; ``insecure``: ``--insecure`` was given (as the
    key ``insecure: true``)."""
    path = Path(path)
    try:
        data = parse_yaml(path.read_bytes())
    except OSError as err:
        raise ConfigError(f"{path}: {err.strerror}") from None
    except FileError as err:
        raise ConfigError(f"{path}: {err}") from None
    return parse_config(data, base=path.absolute().parent, name=str(path), insecure=insecure)


def parse_config(data: Any, *, base: str | Path = ".", name: str = "config",
                 insecure: bool = False) -> DaemonConfig:
    """Check a parsed YAML mapping; relative paths are taken from ``base`` (made absolute
    against the working directory), so every path of the result is absolute. Every value
    is checked here, once (docs/design.md, Safety rules): finite numbers in range, integers
    within 64 bits, paths and addresses as text without control characters. ``insecure``
    (``--insecure``) or the key ``insecure: true`` allows ``metrics_listen`` and
    ``health_listen`` beyond loopback."""
    base = Path(base).absolute()
    if not isinstance(data, Mapping):
        raise ConfigError(f"{name}: expected a mapping of keys, got {type(data).__name__}")
    for key in data:
        if key not in REQUIRED + OPTIONAL:
            raise ConfigError(f"{name}: unknown key {shown(key)}; known: "
                              f"{', '.join(REQUIRED + OPTIONAL)}")
    for key in REQUIRED:
        if key not in data or data[key] is None:
            raise ConfigError(f"{name}: missing key {key!r}")

    def path_of(key: str, value: Any) -> Path:
        try:
            return absolute_path(value, base)
        except FileError as err:
            raise ConfigError(f"{name}: {key} {err}") from None

    def number(key: str, low: float, *, integer: bool = False) -> Any:
        try:
            if integer:
                return checks.integer(data[key], key, low=int(low))
            return checks.number(data[key], key, low=low, high=MAX_SECONDS)
        except BadValue as err:
            kind = "an integer" if integer else "a number"
            high = checks.INT64_MAX if integer else f"{MAX_SECONDS:g}"
            raise ConfigError(f"{name}: {key} must be {kind} >= {low} and <= {high}, got "
                              f"{shown(err.value)}") from None

    kw: dict[str, Any] = {}
    for key in ("listen", "metrics_listen", "health_listen", "dashboard_listen"):
        if data.get(key) is not None:
            kw[key] = _address(name, key, data[key])
    policy = data["policy"]
    if not isinstance(policy, str):
        raise ConfigError(f"{name}: policy must be a policy name, got {shown(policy)}")
    from policies import UnknownPolicy, policy_class
    try:
        policy_class(policy)       # (made with its options by ``parse_settings``)
    except UnknownPolicy as err:
        raise ConfigError(f"{name}: policy: {str(err).splitlines()[0]}") from None
    kw["policy"] = policy
    kw["round_seconds"] = number("round_seconds", MIN_ROUND_SECONDS)
    kw["state_dir"] = path_of("state_dir", data["state_dir"])
    for key in ("auth_token_file", "throughputs", "checkpoint_dir", "users_file"):
        if data.get(key) is not None:
            kw[key] = path_of(key, data[key])
    if data.get("expected_workers") is not None:
        kw["expected_workers"] = number("expected_workers", 0, integer=True)
    if data.get("seed") is not None:
        kw["seed"] = number("seed", 0, integer=True)
    if data.get("pair_partners") is not None:
        try:
            kw["pair_partners"] = checks.integer(data["pair_partners"], "pair_partners", low=0,
                                                 high=checks.INT32_MAX)
        except BadValue as err:
            raise ConfigError(f"{name}: pair_partners must be an integer >= 0 (0: every "
                              f"pair) and <= {checks.INT32_MAX}, got {shown(err.value)}") from None
    for key in ("metrics_job_series", "job_calls_per_round", "state_dir_min_free_mb"):
        if data.get(key) is not None:
            kw[key] = number(key, 0, integer=True)
    if data.get("gil_switch_ms") is not None:
        low, high = GIL_SWITCH_RANGE_MS
        try:
            kw["gil_switch_ms"] = checks.number(data["gil_switch_ms"], "gil_switch_ms",
                                                low=low, high=high)
        except BadValue as err:
            raise ConfigError(f"{name}: gil_switch_ms must be a number of milliseconds in "
                              f"{low:g}..{high:g}, got {shown(err.value)}") from None
    for key in ("heartbeat_seconds", "plan_lead_seconds", "min_resolve_interval_s",
                "checkpoint_retention_s", "ended_jobs_kept_s", "ended_jobs_stored_s",
                "user_calls_per_second"):
        if data.get(key) is not None:
            kw[key] = number(key, 0.05 if key == "heartbeat_seconds" else 0.0)
    if data.get("resolve") is not None:
        if not isinstance(data["resolve"], str) or data["resolve"] not in RESOLVE_MODES:
            raise ConfigError(f"{name}: resolve must be responsive or gavel, got "
                              f"{shown(data['resolve'])}")
        kw["resolve"] = data["resolve"]
    if data.get("restart_rule") is not None:
        if data["restart_rule"] not in RESTART_RULES:
            raise ConfigError(f"{name}: restart_rule must be tenure or gavel, got "
                              f"{shown(data['restart_rule'])}")
        kw["restart_rule"] = data["restart_rule"]
    for key in ("workers_tls", "insecure", "refill_freed", "eta"):
        if data.get(key) is not None:
            if not isinstance(data[key], bool):
                raise ConfigError(f"{name}: {key} must be true or false, got {shown(data[key])}")
            kw[key] = data[key]
    kw["insecure"] = kw.get("insecure", False) or insecure
    if "users_file" in kw and "auth_token_file" not in kw:
        raise ConfigError(f"{name}: users_file needs auth_token_file (the token the workers "
                          f"and the jobs they launch use)")
    try:
        kw["settings"] = parse_settings(data, policy=policy, base=base, name=name)
    except SettingsError as err:
        raise ConfigError(str(err)) from None
    if data.get("tls") is not None:
        tls = data["tls"]
        if not isinstance(tls, Mapping):
            raise ConfigError(f"{name}: tls must be a mapping with cert, key, ca")
        for key in tls:
            if key not in TLS_KEYS:
                raise ConfigError(f"{name}: unknown key {shown(f'tls.{key}')}; known: cert, key, ca")
        if ("cert" in tls) != ("key" in tls):
            raise ConfigError(f"{name}: tls.cert and tls.key go together")
        kw["tls"] = TlsFiles(**{k: path_of(f"tls.{k}", v) for k, v in tls.items()})
    config = DaemonConfig(**kw)
    _check_stored(name, config)
    for key, what in (("metrics_listen", "/metrics"), ("health_listen", "the health service")):
        address = getattr(config, key)
        if _exposed(address) and not config.insecure:
            port = address.rpartition(":")[2]
            raise ConfigError(f"{name}: {key} {address} is beyond loopback and {what} has "
                              f"no auth: bind it to 127.0.0.1:{port}, or set insecure: true "
                              f"(or pass --insecure) to expose it")
    address = config.dashboard_listen
    if _exposed(address) and not (config.insecure and config.auth_token_file):
        port = address.rpartition(":")[2]
        raise ConfigError(f"{name}: dashboard_listen {address} is beyond loopback and the "
                          f"dashboard is plain HTTP: bind it to 127.0.0.1:{port}, or set "
                          f"insecure: true (or pass --insecure) and auth_token_file to "
                          f"expose it")
    return config


def _check_stored(name: str, config: DaemonConfig) -> None:
    """A job is deleted from the store only after it left memory and its checkpoints went
    (else a job in memory would have no row, and a folder no job to be timed by)."""
    stored = config.ended_jobs_stored_s
    for key in ("ended_jobs_kept_s", "checkpoint_retention_s"):
        kept = getattr(config, key)
        if stored > 0 and (kept <= 0 or kept > stored):
            raise ConfigError(f"{name}: ended_jobs_stored_s {stored:g} must be at least "
                              f"{key} ({'0: for ever' if kept <= 0 else f'{kept:g}'}): a job "
                              f"leaves the store last")


def _address(name: str, key: str, value: Any) -> str:
    """``host:port``: a host without spaces or control characters, a port of ASCII digits
    in 0..65535 (``"²".isdigit()`` is true, so ``isdigit`` alone is not enough)."""
    if isinstance(value, str) and ":" in value:
        host, _, port = value.rpartition(":")
        if (host and not any(c <= " " or c == "\x7f" for c in host)
                and re.fullmatch(r"[0-9]{1,5}", port) and int(port) < 65536):
            return value
    raise ConfigError(f"{name}: {key} must be host:port, got {shown(value)}")
