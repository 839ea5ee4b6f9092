"""The daemon's round rules as one record (thesis §5.5-5.6): what a replay of the daemon
must run by, and the one place each rule is stated.

The daemon builds ``DaemonRules`` from its config (``DaemonConfig.rules``), runs its core
on ``core_config`` and publishes the rules in every ``Status`` (``published``); a replay
(``simulator/twin.py``: ``status --eta``, ``predict``, the benchmarks) reads them back
(``of_status``) and gets the same core config, and the simulator's config from them
(``simulator.twin.sim_config``). Pure: no clock, no I/O.

The lease floor (``batch.MIN_LEASE_FRACTION``, beside ``worth_launching``, which decides
launches by it): a fresh run always gets that fraction of a round after its start-up
(``gavelsched/daemon/runs.py``), so a replay charges a longer start-up the share of its
GPUs' time it costs, always under a round (``startup_charge``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from policies import Policy
from traces.types import ThroughputTable

from .batch import MIN_LEASE_FRACTION, startup_charge
from .config import CoreConfig
from .core import SchedulerCore
from .driver import RoundDriver, config_for
from .restarts import RESTART_RULES
from .type_order import fastest_first
from .waves import MAX_WAVE_SLOPE, wave_factor

__all__ = ["MIN_LEASE_FRACTION", "DaemonRules", "startup_charge"]


# An idle daemon plans its first round this long after the job that woke it, so that jobs
# submitted together (one RPC after another) are planned together.
ARRIVAL_GRACE_S = 0.5


@dataclass(frozen=True)
class DaemonRules:
    """How the daemon runs rounds.

    - ``round_seconds``: round length; rounds last exactly this (wall-clock rounds);
    - ``resolve``, ``min_resolve_interval_s``: the re-solve rule and its interval
      (``CoreConfig``; None: the core's default);
    - ``refill_freed``, ``refill_until``: GPUs freed mid-round go to waiting jobs, in the
      first ``refill_until`` of a round (until the next round is planned);
    - ``plan_lead_s``: each round is planned this long before the last one ends;
    - ``startup_s``: mean start-up of a fresh run per job type, as measured; a replay
      charges ``startup_charges`` (capped by the lease floor);
    - ``exit_s``: mean seconds from a job's last step to its run's exit (the process's
      teardown), per job type, as measured: a refill of its GPUs, placed at the last
      step, starts up that much later (``SimConfig.exit_s``);
    - ``arrival_grace_s``: an idle daemon plans this long after the arrival that woke it
      (``RoundDriver.first_plan_at``);
    - ``restart_rule``: ``CoreConfig.restart_rule`` (``core/restarts.py``);
    - ``startup_wave_slope``, ``machines``: a launch's start-up grows with the processes
      its round starts at once on its machine (``core/waves.py``), by this slope, over
      this many machines; with a slope, ``startup_s`` is each type's start-up alone;
    - ``type_order``: the order the daemon serves the types' queues in (its core's
      ``CoreConfig.type_order``); empty: fastest first over the table and rows a replay
      has (``core_config``);
    - ``pair_partners``: ``CoreConfig.pair_partners`` (0: every pair of jobs).
    """

    round_seconds: float
    resolve: str = "responsive"
    min_resolve_interval_s: float | None = None
    refill_freed: bool = True
    refill_until: float = 1.0
    plan_lead_s: float = 0.0
    startup_s: Mapping[str, float] = field(default_factory=dict)
    arrival_grace_s: float = ARRIVAL_GRACE_S
    restart_rule: str = "tenure"
    exit_s: Mapping[str, float] = field(default_factory=dict)
    startup_wave_slope: float = 0.0
    machines: int = 1
    type_order: tuple[str, ...] = ()
    pair_partners: int = 0

    def __post_init__(self) -> None:
        if not 0.0 < self.round_seconds < math.inf:
            raise ValueError(f"round_seconds must be > 0, got {self.round_seconds}")
        if not 0.0 <= self.startup_wave_slope <= MAX_WAVE_SLOPE:
            raise ValueError(f"start-up wave slope must be in [0, {MAX_WAVE_SLOPE:g}], got "
                             f"{self.startup_wave_slope}")
        if self.machines < 1:
            raise ValueError(f"machines must be >= 1, got {self.machines}")
        if self.pair_partners < 0:
            raise ValueError(f"pair partners must be >= 0, got {self.pair_partners}")
        if not 0.0 <= self.plan_lead_s < self.round_seconds:
            raise ValueError(f"plan lead must be in [0, round_seconds), got {self.plan_lead_s}")
        object.__setattr__(self, "type_order", tuple(self.type_order))
        for name in ("startup_s", "exit_s"):
            object.__setattr__(self, name, MappingProxyType(
                {str(k): float(v) for k, v in getattr(self, name).items()}))

    @classmethod
    def of_status(cls, reply, startup_s: Mapping[str, float] | None = None,
                  exit_s: Mapping[str, float] | None = None, machines: int = 1) -> DaemonRules:
        """The rules a daemon's ``StatusResponse`` publishes (``published``), checked at
        the door: a refill fraction outside [0, 1], a plan lead outside [0, round), a wave
        slope outside [0, ``MAX_WAVE_SLOPE``] or a type order that names a type twice is
        read as none (an older daemon sends none), a negative partner count as 0 (every
        pair). ``startup_s`` and ``exit_s`` per job type (the Status carries each job's type
        means), the ``machines`` its alive workers are on."""
        refill = reply.refill_until if 0.0 <= reply.refill_until <= 1.0 else 0.0
        lead = reply.plan_lead_s if 0.0 <= reply.plan_lead_s < reply.round_seconds else 0.0
        interval = reply.min_resolve_interval_s
        slope, order = reply.startup_wave_slope, tuple(reply.type_order)
        return cls(reply.round_seconds, reply.resolve or "responsive",
                   interval if interval > 0 else None, refill > 0,
                   refill if refill > 0 else CoreConfig.refill_until, lead,
                   dict(startup_s or {}),
                   restart_rule=reply.restart_rule if reply.restart_rule in RESTART_RULES
                   else "tenure", exit_s=dict(exit_s or {}),
                   startup_wave_slope=slope if 0.0 <= slope <= MAX_WAVE_SLOPE else 0.0,
                   machines=max(1, machines),
                   type_order=order if len(set(order)) == len(order) else (),
                   pair_partners=max(0, reply.pair_partners))

    def published(self) -> dict:
        """The ``Status`` fields that carry the rules (``of_status`` reads them back);
        ``refill_until`` 0: no refills."""
        return {"resolve": self.resolve,
                "min_resolve_interval_s": self.min_resolve_interval_s or 0.0,
                "refill_until": self.refill_until if self.refill_freed else 0.0,
                "plan_lead_s": self.plan_lead_s, "restart_rule": self.restart_rule,
                "pair_partners": self.pair_partners}

    def core_config(self, policy: Policy, table: ThroughputTable, worker_types: Sequence[str],
                    rows: Sequence[Mapping[str, float]] = (), **more) -> CoreConfig:
        """The core's config under these rules: ``CoreConfig.for_policy`` with the worker
        types served in ``type_order``, else fastest first over ``table`` and ``rows`` (jobs'
        own steps/s per type, ``traces.TraceJob.throughputs``), a refused solve kept going
        as the daemon keeps it (``on_solve_error="keep"``: a job the policy names is dropped,
        else the last allocation stays), and ``more`` on top (seed, ...)."""
        overrides = {"on_solve_error": "keep", "round_seconds": self.round_seconds,
                     "resolve": self.resolve,
                     "refill_freed": self.refill_freed, "refill_until": self.refill_until,
                     "restart_rule": self.restart_rule, "pair_partners": self.pair_partners,
                     "type_order": self.type_order
                     or fastest_first(table, tuple(worker_types), rows)}
        if self.min_resolve_interval_s is not None:
            overrides["min_resolve_interval_s"] = self.min_resolve_interval_s
        return config_for(policy, table, worker_types, **{**overrides, **more})

    def driver(self, core: SchedulerCore) -> RoundDriver:
        """The round driver of a core under these rules: their plan lead and arrival
        grace."""
        return RoundDriver(core, plan_lead_s=self.plan_lead_s,
                           arrival_grace_s=self.arrival_grace_s)

    def startup_charge(self, startup_s: float) -> float:
        """``startup_charge`` in rounds of this length."""
        return startup_charge(startup_s, self.round_seconds)

    def wave_factor(self, processes: float) -> float:
        """What a start-up alone is multiplied by when a round starts ``processes`` at once
        over the cluster's machines (``core/waves.py``; evenly spread)."""
        return wave_factor(self.startup_wave_slope, processes / self.machines)

    def startup_charges(self) -> dict[str, float]:
        """The start-up a fresh run of each job type is charged (capped: the lease floor)."""
        return {t: self.startup_charge(s) for t, s in self.startup_s.items() if s > 0}
