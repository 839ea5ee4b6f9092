"""The single name -> factory map of policies (STYLE.md §3: one registry).

Names follow Gavel's so its users can switch (DESIGN.md, Policy names). ``_perf`` means
heterogeneity-aware, the plain name is the heterogeneity-agnostic baseline, and ``_packed``
adds space sharing over the problem's ``pairs``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from .base import Policy
from .baselines import AlloX, Gandiva, Isolated
from .errors import UnknownPolicy
from .fairness import MaxMinFairness
from .finish_time import FinishTimeFairness
from .makespan import MinTotalDuration
from .ordering import GreedyOrdered, OrderedThroughput, shortest_rank
from .throughput import MaxSumThroughput
from .water_filling import WaterFilling


def _family(cls, base: str, **extra) -> dict[str, Callable[..., Policy]]:
    """The agnostic, ``_perf`` and ``_packed`` members of one policy family."""
    return {
        base: partial(cls, agnostic=True, **extra),
        f"{base}_perf": partial(cls, **extra),
        f"{base}_packed": partial(cls, packed=True, **extra),
    }


REGISTRY: dict[str, Callable[..., Policy]] = {
    **_family(MaxMinFairness, "max_min_fairness"),
    **_family(WaterFilling, "max_min_fairness_water_filling"),
    **_family(FinishTimeFairness, "finish_time_fairness"),
    **_family(MinTotalDuration, "min_total_duration"),
    "min_makespan_with_budget": partial(MinTotalDuration, require_budget=True),
    "fifo": GreedyOrdered,
    "fifo_perf": partial(GreedyOrdered, fastest=True),
    "fifo_packed": partial(OrderedThroughput, packed=True),
    "shortest_job_first_perf": partial(GreedyOrdered, fastest=True, rank=shortest_rank),
    "max_sum_throughput_perf": MaxSumThroughput,
    "max_sum_throughput_normalized_by_cost_perf": partial(MaxSumThroughput, cost=True),
    "max_sum_throughput_normalized_by_cost_perf_SLOs": partial(MaxSumThroughput, cost=True,
                                                               slos=True),
    "isolated": Isolated,
    "gandiva": Gandiva,
    "allox": AlloX,
}

# Policies whose problems must list co-located pairs (``Problem.pairs``).
NEEDS_PAIRS = frozenset(name for name in REGISTRY if name.endswith("_packed")) | {"gandiva"}


def policy_names() -> list[str]:
    return sorted(REGISTRY)


def get_policy(name: str, **options) -> Policy:
    """Make the policy registered as ``name``. ``partitions=k`` (k > 1) wraps it in POP,
    solving the k sub-problems in ``processes`` worker processes."""
    if name not in REGISTRY:
        raise UnknownPolicy(f"unknown policy {name!r}; known: {', '.join(policy_names())}")
    partitions = options.pop("partitions", 1)
    processes = options.pop("processes", 1)
    seed = options.get("seed", 0)
    try:
        policy = REGISTRY[name](name, **options)
    except TypeError as err:
        raise UnknownPolicy(f"policy {name!r}: bad option ({err})") from None
    if partitions and partitions > 1:
        from .partition import Partitioned
        policy = Partitioned(policy, partitions=partitions, seed=seed, processes=processes)
    return policy
