"""``CoreConfig``: the named knobs of the scheduler core, Gavel's behaviour by default.

Every default below reproduces Gavel's simulator (``scheduler/scheduler.py`` of
stanford-futuredata/gavel); each field says what it changes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

# Heterogeneity-aware policies whose names carry no _perf/_packed suffix (Gavel's classes
# are Gandiva_Packing and AlloX_Perf).
AWARE_WITHOUT_SUFFIX = frozenset({"gandiva", "allox", "min_makespan_with_budget"})


@dataclass(frozen=True)
class CoreConfig:
    """Scheduler-core semantics.

    - ``round_seconds``: length of a round (Gavel ``time_per_iteration``, 360 s); a job's
      lease for a round is floor(throughput x round_seconds) steps, capped at what is left.
    - ``min_resolve_interval_s``: a reset event (arrival, completion, worker join or failure,
      price change) re-solves the policy at the next round boundary, but at most once every
      this many seconds (Gavel ``minimum_time_between_allocation_resets``, 1920 s). A
      re-solve at time 0 does not start the interval (Gavel's ``last_reset_time == 0``).
    - ``resolve_period_s``: also re-solve this often with no event (None: never).
    - ``whole_step_leases``: a micro-task's lease is floor(throughput x round_seconds)
      steps (Gavel), so it ends a little before the round; False leases the exact
      fractional amount.
    - ``reset_received_on_resolve``: a re-solve starts a new period: received times go
      back to the seed and deficits absorb the old period (Gavel). False keeps counting
      received time since admission (and deficits stay 0).
    - ``received_seed_s``: seconds of received time every combination starts each period
      with on every type, so fractions are never 0/0 (Gavel: round_seconds / 2; None means
      that).
    - ``type_order``: order in which per-type queues are served (Gavel: v100, p100, k80);
      types not listed follow in cluster order.
    - ``shuffle_type_order``: shuffle that order every round with the core's seeded RNG
      (Gavel does this for heterogeneity-agnostic policies).
    - ``global_queue``: one priority queue across types (Gavel ``enable_global_queue``).
    - ``backfill``: workers nobody with priority wants go to priority-0 combinations, by
      deficit (Gavel; off for FIFO, whose queue order must hold).
    - ``hold_unallocated``: a job admitted after the last re-solve competes with priority 0
      and, when picked, keeps its workers idle for the round (Gavel). False skips it.
    - ``pairs``: list co-located pairs in the Problem (space-sharing policies).
    - ``isolated_time``: track Themis t^isolated for finish-time fairness: at each
      re-solve, the steps made since the previous one over the isolated throughput then
      (Gavel's FinishTimeFairness policy); False passes None (the policy then uses the
      elapsed time). On by default for ``finish_time_fairness*``.
    - ``seed``: seeds the core's own RNG (type-order shuffles).
    - ``on_solve_error``: ``"raise"`` or ``"keep"`` (keep the last allocation and retry at
      the next boundary).
    """

    round_seconds: float = 360.0
    min_resolve_interval_s: float = 1920.0
    resolve_period_s: float | None = None
    whole_step_leases: bool = True
    reset_received_on_resolve: bool = True
    received_seed_s: float | None = None
    type_order: tuple[str, ...] = ()
    shuffle_type_order: bool = False
    global_queue: bool = False
    backfill: bool = True
    hold_unallocated: bool = True
    pairs: bool = False
    isolated_time: bool = False
    seed: int = 0
    on_solve_error: str = "raise"

    def __post_init__(self) -> None:
        if not self.round_seconds > 0:
            raise ValueError(f"round_seconds must be > 0, got {self.round_seconds}")
        if self.min_resolve_interval_s < 0:
            raise ValueError(
                f"min_resolve_interval_s must be >= 0, got {self.min_resolve_interval_s}")
        if self.resolve_period_s is not None and not self.resolve_period_s > 0:
            raise ValueError(f"resolve_period_s must be > 0, got {self.resolve_period_s}")
        if self.on_solve_error not in ("raise", "keep"):
            raise ValueError(f"on_solve_error must be 'raise' or 'keep', "
                             f"got {self.on_solve_error!r}")
        object.__setattr__(self, "type_order", tuple(self.type_order))

    @property
    def seed_seconds(self) -> float:
        if self.received_seed_s is not None:
            return self.received_seed_s
        return self.round_seconds / 2.0

    @classmethod
    def for_policy(cls, policy_name: str, **overrides) -> CoreConfig:
        """Gavel's per-policy mechanism rules, in one place:

        - heterogeneity-agnostic policies (no ``_perf``/``_packed`` in the name, and not
          gandiva, allox or min_makespan_with_budget) shuffle the type order every round
          (Gavel: no 'Perf' and no 'Packing' in the class name);
        - FIFO policies never run priority-0 jobs (Gavel: name starts with 'FIFO'), nor do
          the cost policies: backfilling an idle V100 with a job the policy put on a K80
          would undo the cost saving they exist for (chapter 6);
        - space-sharing policies (``_packed``, gandiva) get pairs in their Problem;
        - finish-time fairness gets Themis t^isolated (Gavel keeps it in the policy).
        """
        aware = ("_perf" in policy_name or "_packed" in policy_name
                 or policy_name in AWARE_WITHOUT_SUFFIX)
        rules = {
            "shuffle_type_order": not aware,
            "backfill": not (policy_name.startswith(("fifo", "max_sum_throughput_normalized_by_cost"))),
            "pairs": _needs_pairs(policy_name),
            "isolated_time": policy_name.startswith("finish_time_fairness"),
        }
        rules.update(overrides)
        return cls(**rules)

    def but(self, **changes) -> CoreConfig:
        return replace(self, **changes)


def _needs_pairs(policy_name: str) -> bool:
    try:
        from policies.registry import NEEDS_PAIRS
    except ImportError:  # pragma: no cover - older policies package
        return policy_name.endswith("_packed") or policy_name == "gandiva"
    return policy_name in NEEDS_PAIRS
