"""The single name -> factory map of policies (docs/style.md §3: one registry).

Names follow Gavel's so its users can switch (docs/design.md, Policy names). ``_perf`` means
heterogeneity-aware, the plain name is the heterogeneity-agnostic baseline, and ``_packed``
adds space sharing over the problem's ``pairs``. What a policy *is* (agnostic, needs pairs,
backfills, ...) is not read from its name: each class declares its ``Traits``
(policies/traits.py), and ``get_policy`` accepts exactly the options they declare.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from types import MappingProxyType

from .base import Policy
from .baselines import AlloX, Gandiva, Isolated
from .errors import PolicyError, ProblemError, UnknownPolicy
from .fairness import MaxMinFairness
from .finish_time import FinishTimeFairness
from .makespan import MinTotalDuration
from .mixed import FinishTimeFairnessMixed, MaxMinFairnessMixed
from .ordering import GreedyOrdered, OrderedThroughput, shortest_rank
from .problem_json import whole_number
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
    "max_min_fairness_mixed": MaxMinFairnessMixed,
    "finish_time_fairness_mixed": FinishTimeFairnessMixed,
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

# Options of the POP wrapper (``policies.partition``), accepted by every policy, and the
# most of either: far past any use, and under what a process pool's semaphore can count.
WRAPPER_OPTIONS = {
    "partitions": "POP: split into this many random sub-problems solved independently",
    "processes": "POP: solve the sub-problems in this many worker processes",
}
MAX_POP = 4096


class UnknownOption(UnknownPolicy):
    """An option the policy does not declare (``Traits.options``)."""


def policy_names() -> list[str]:
    return sorted(REGISTRY)


def policy_class(name: str) -> type[Policy]:
    """The class registered as ``name`` (its ``TRAITS`` are known before construction)."""
    factory = _factory(name)
    while isinstance(factory, partial):
        factory = factory.func
    return factory


def policy_options(name: str) -> dict[str, str]:
    """Option name -> meaning of every option ``get_policy(name, ...)`` accepts."""
    return {**policy_class(name).TRAITS.options, **WRAPPER_OPTIONS}


def get_policy(name: str, **options) -> Policy:
    """Make the policy registered as ``name``, with ``options`` among those it declares
    (``policy_options``); an unknown one raises ``UnknownOption`` naming it and the accepted
    ones. ``partitions=k`` (k > 1) wraps it in POP, solving the k sub-problems in
    ``processes`` worker processes (``seed`` then also seeds the split)."""
    accepted = policy_options(name)
    made_with = MappingProxyType(dict(options))
    partitions = options.pop("partitions", 1)
    processes = options.pop("processes", 1)
    for option, value in (("partitions", partitions), ("processes", processes)):
        whole_number(value, f"policy {name!r}: option {option}", 1, MAX_POP)
    pop = partitions > 1
    if pop:
        accepted.setdefault("seed", "POP: seeds the random split")
    for option in options:
        if option not in accepted:
            raise UnknownOption(f"policy {name!r}: unknown option {option!r}; accepted: "
                                f"{', '.join(sorted(accepted))}")
    seed = options.get("seed", 0)
    if pop:
        whole_number(seed, f"policy {name!r}: option seed", 0)
    if "seed" not in policy_class(name).TRAITS.options:
        options.pop("seed", None)
    try:
        policy = REGISTRY[name](name, **options)
    except PolicyError:
        raise
    except (TypeError, ValueError) as err:  # a declared option given a value of a bad type
        raise ProblemError(f"policy {name!r}: bad option value ({err}); options: "
                           f"{', '.join(f'{k}=' + repr(v) for k, v in options.items())}") from None
    if pop:
        from .partition import Partitioned
        policy = Partitioned(policy, partitions=partitions, seed=seed, processes=processes)
    policy.made_with = made_with
    return policy


def _factory(name: str) -> Callable[..., Policy]:
    if name not in REGISTRY:
        raise UnknownPolicy(f"unknown policy {name!r}; known: {', '.join(policy_names())}")
    return REGISTRY[name]
