"""The single name -> factory map of policies (STYLE.md §3: one registry).

Names follow Gavel's so its users can switch (DESIGN.md, Policy names).
"""

from __future__ import annotations

from functools import partial
from typing import Callable

from .base import Policy
from .errors import UnknownPolicy
from .fairness import MaxMinFairness

REGISTRY: dict[str, Callable[..., Policy]] = {
    "max_min_fairness": partial(MaxMinFairness, agnostic=True),
    "max_min_fairness_perf": MaxMinFairness,
    "max_min_fairness_packed": partial(MaxMinFairness, packed=True),
}


def policy_names() -> list[str]:
    return sorted(REGISTRY)


def get_policy(name: str, **options) -> Policy:
    """Make the policy registered as ``name``. ``partitions=k`` (k > 1) wraps it in POP."""
    if name not in REGISTRY:
        raise UnknownPolicy(f"unknown policy {name!r}; known: {', '.join(policy_names())}")
    partitions = options.pop("partitions", 1)
    policy = REGISTRY[name](name, **options)
    if partitions and partitions > 1:
        from .partition import Partitioned
        policy = Partitioned(policy, partitions=partitions, seed=options.get("seed", 0))
    return policy
