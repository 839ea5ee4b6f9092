"""``CoreConfig``: the named knobs of the scheduler core, Gavel's behaviour by default.

Every default below reproduces Gavel's simulator (``scheduler/scheduler.py`` of
stanford-futuredata/gavel); each field says what it changes. The one exception,
``restart_rule``, differs from Gavel only for jobs whose restarts cost time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from policies import Policy, Traits

from .resolving import RESOLVE_MODES
from .restarts import RESTART_RULES

# Which jobs may run on several worker types at once (``CoreConfig.mixed_jobs``).
MIXED_JOBS = ("flagged", "all")


@dataclass(frozen=True)
class CoreConfig:
    """Scheduler-core semantics.

    - ``round_seconds``: length of a round (Gavel ``time_per_iteration``, 360 s); a job's
      lease for a round is floor(throughput x round_seconds) steps, capped at what is left.
    - ``min_resolve_interval_s``: a reset event (arrival, completion, worker join or failure,
      price change) re-solves the policy at the next round boundary, but at most once every
      this many seconds (Gavel ``minimum_time_between_allocation_resets``, 1920 s). A
      re-solve at time 0 does not start the interval (Gavel's ``last_reset_time == 0``).
    - ``resolve``: ``"gavel"`` (the interval above always applies) or ``"responsive"``
      (re-solve at the next boundary after any reset event while the last solve took under
      ``cheap_solve_fraction`` x ``round_seconds``; the interval applies after an expensive
      one). See ``resolving``.
    - ``resolve_period_s``: also re-solve this often with no event (None: never).
    - ``whole_step_leases``: a micro-task's lease is floor(throughput x round_seconds)
      steps (Gavel), so it ends a little before the round; False leases the exact
      fractional amount.
    - ``reset_received_on_resolve``: a re-solve starts a new period: received times go
      back to the seed and deficits absorb the old period (Gavel). False keeps counting
      received time since admission (and deficits stay 0). Under the restart rule, once
      some job's restart costs time, a re-solve resets only when the period has lasted
      ``min_resolve_interval_s`` (``restarts``).
    - ``received_seed_s``: seconds of received time every combination starts each period
      with on every type, so fractions are never 0/0 (Gavel: round_seconds / 2; None means
      that).
    - ``type_order``: order in which per-type queues are served (Gavel: v100, p100, k80);
      types not listed follow in cluster order.
    - ``shuffle_type_order``: shuffle that order every round with the core's seeded RNG
      (Gavel does this for heterogeneity-agnostic policies: ``Traits.shuffles_type_order``).
    - ``global_queue``: one priority queue across types (Gavel ``enable_global_queue``).
    - ``backfill``: workers nobody with priority wants go to priority-0 combinations, by
      deficit (Gavel; off when the policy declares ``backfill=False``).
    - ``hold_unallocated``: a job admitted after the last re-solve competes with priority 0
      and, when picked, keeps its workers idle for the round (Gavel). False skips it.
    - ``refill_freed``: workers freed mid-round (a job finished or failed) go to waiting
      jobs for the rest of the round, by the same priorities, with leases that end with
      the round (``SchedulerCore.place_freed``; issue #18: no GPU idle while a job waits).
      Gavel leaves them idle until the round ends (False).
    - ``refill_until``: refills are made in the first this fraction of a round only (0.7:
      the scheduler daemon plans the next round 30% of a round before it ends, and a GPU
      freed after that waits for that plan).
    - ``pairs``: list co-located pairs in the Problem (policies that declare ``needs_pairs``).
    - ``pair_partners``: with ``pairs``, 0 lists every pair of jobs (Gavel's: n²/2 of
      them); K > 0 each job's K best partners (fewer beyond ``problem.PARTNER_CHOICES``
      choices in all) and the pairs an allocation gave time (``problem.chosen_partners``):
      O(n K) pairs at production size.
    - ``isolated_time``: track Themis t^isolated for finish-time fairness: at each
      re-solve, the steps made since the previous one over the isolated throughput then
      (Gavel's FinishTimeFairness policy); False passes None (the policy then uses the
      elapsed time). On when the policy declares ``isolated_time``.
    - ``configurations``: give mixed-capable jobs configurations of several worker types
      at once (VirtualFlow §5, ``gavelsched/core/configurations.py``), and elastic jobs
      (``JobSpec.min_scale_factor``) their smaller GPU counts of one type, in the Problem,
      and let the planner place them. On when the policy reads ``configurations``
      (``policies/mixed.py``).
    - ``mixed_jobs``: which jobs are mixed-capable: ``"flagged"`` (``JobSpec.mixed``, the
      trace's ``mixed`` field) or ``"all"`` (every job: data-parallel jobs with virtual
      nodes can all split their batch).
    - ``restart_rule``: ``"tenure"``: a fresh run keeps its GPUs until its restart
      (``JobSpec.restart_s``) is done and it stepped as long, is preferred until its
      restart is at most ``restart_share`` of the time it held them, keeps them to its
      end when its job is close to done, and the policy plans on throughputs net of
      restarts (``core/restarts.py``; issue #32:
      short rounds with real restart costs thrashed). ``"gavel"``: every round is dealt
      afresh by priority and restarts are the executor's business (Gavel). Jobs whose
      restart costs nothing are scheduled alike under both.
    - ``restart_share``: under ``"tenure"``, a run is preferred in its column until its
      restart is at most this share of the time it held its workers, in (0, 0.5].
    - ``finish_restarts``: under ``"tenure"``, a run whose job would end within this
      many restarts keeps its workers to the end (0: never).
    - ``seed``: seeds the core's own RNG (type-order shuffles).
    - ``on_solve_error``: ``"raise"`` or ``"keep"`` (keep the last allocation and retry at
      the next boundary).
    """

    round_seconds: float = 360.0
    min_resolve_interval_s: float = 1920.0
    resolve: str = "gavel"
    cheap_solve_fraction: float = 0.1
    resolve_period_s: float | None = None
    whole_step_leases: bool = True
    reset_received_on_resolve: bool = True
    received_seed_s: float | None = None
    type_order: tuple[str, ...] = ()
    shuffle_type_order: bool = False
    global_queue: bool = False
    backfill: bool = True
    hold_unallocated: bool = True
    refill_freed: bool = False
    refill_until: float = 0.7
    pairs: bool = False
    pair_partners: int = 0
    isolated_time: bool = False
    configurations: bool = False
    mixed_jobs: str = "flagged"
    restart_rule: str = "tenure"
    restart_share: float = 0.2
    finish_restarts: float = 30.0
    seed: int = 0
    on_solve_error: str = "raise"

    def __post_init__(self) -> None:
        if not 0 < self.round_seconds < math.inf:
            raise ValueError(f"round_seconds must be finite and > 0, got {self.round_seconds}")
        if not self.min_resolve_interval_s >= 0:       # (NaN too)
            raise ValueError(
                f"min_resolve_interval_s must be >= 0, got {self.min_resolve_interval_s}")
        if self.resolve not in RESOLVE_MODES:
            raise ValueError(f"resolve must be one of {', '.join(RESOLVE_MODES)}, "
                             f"got {self.resolve!r}")
        if not 0 <= self.refill_until <= 1:
            raise ValueError(f"refill_until must be in [0, 1], got {self.refill_until}")
        if not 0 <= self.cheap_solve_fraction <= 1:
            raise ValueError(f"cheap_solve_fraction must be in [0, 1], "
                             f"got {self.cheap_solve_fraction}")
        if self.resolve_period_s is not None and not self.resolve_period_s > 0:
            raise ValueError(f"resolve_period_s must be > 0, got {self.resolve_period_s}")
        if not (isinstance(self.pair_partners, int) and self.pair_partners >= 0):
            raise ValueError(f"pair_partners must be an int >= 0, got {self.pair_partners!r}")
        if self.on_solve_error not in ("raise", "keep"):
            raise ValueError(f"on_solve_error must be 'raise' or 'keep', "
                             f"got {self.on_solve_error!r}")
        if self.restart_rule not in RESTART_RULES:
            raise ValueError(f"restart_rule must be one of {', '.join(RESTART_RULES)}, "
                             f"got {self.restart_rule!r}")
        if not 0.0 < self.restart_share <= 0.5:
            raise ValueError(f"restart_share must be in (0, 0.5], got {self.restart_share}")
        if not 0.0 <= self.finish_restarts < math.inf:
            raise ValueError(f"finish_restarts must be finite and >= 0, "
                             f"got {self.finish_restarts}")
        if self.mixed_jobs not in MIXED_JOBS:
            raise ValueError(f"mixed_jobs must be one of {', '.join(MIXED_JOBS)}, "
                             f"got {self.mixed_jobs!r}")
        object.__setattr__(self, "type_order", tuple(self.type_order))

    @property
    def seed_seconds(self) -> float:
        if self.received_seed_s is not None:
            return self.received_seed_s
        return self.round_seconds / 2.0

    @classmethod
    def for_policy(cls, policy: Policy, **overrides) -> CoreConfig:
        """The config a core running ``policy`` needs: ``for_traits(policy.traits)``."""
        if not isinstance(policy, Policy):
            raise TypeError(f"CoreConfig.for_policy takes a Policy (its traits say what it "
                            f"needs), not {type(policy).__name__} {policy!r}")
        return cls.for_traits(policy.traits, **overrides)

    @classmethod
    def for_traits(cls, traits: Traits, **overrides) -> CoreConfig:
        """Gavel's per-policy mechanism rules, read from what the policy declares
        (policies/traits.py), never from its name; ``overrides`` win:

        - ``shuffle_type_order``: heterogeneity-agnostic policies (Gavel: neither 'Perf'
          nor 'Packing' in the class name, so not Gandiva);
        - ``backfill``: off for policies whose queue order or cost saving idle workers
          would undo (FIFO, shortest job first, the cost policies);
        - ``pairs``: space-sharing policies get co-located pairs in their Problem;
        - ``isolated_time``: finish-time fairness gets Themis t^isolated (Gavel keeps it
          in the policy);
        - ``configurations``: policies that read job configurations get them (mixed types).
        """
        rules = {
            "shuffle_type_order": traits.shuffles_type_order,
            "backfill": traits.backfill,
            "pairs": traits.needs_pairs,
            "isolated_time": traits.isolated_time,
            "configurations": "configurations" in traits.reads,
        }
        rules.update(overrides)
        return cls(**rules)

    def but(self, **changes) -> CoreConfig:
        return replace(self, **changes)

