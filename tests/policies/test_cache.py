"""policies/cache.py: a cache bounded by estimated bytes, evicting least recently used."""

from __future__ import annotations

import numpy as np
import pytest

from policies import Job, Problem, get_policy
from policies.cache import DEFAULT_BUDGET, ByteBudgetCache


def test_budget_holds_and_least_recently_used_goes_first():
    cache: ByteBudgetCache[str] = ByteBudgetCache(budget=100)
    made = []

    def make(key):
        return lambda: made.append(key) or key

    for key in "abc":
        cache.get(key, make(key), lambda _: 40)
        assert cache.info().bytes <= 100
    assert cache.info().entries == 2  # "a" evicted to make room for "c"
    cache.get("b", make("b"), lambda _: 40)  # a hit: "b" becomes most recent
    cache.get("d", make("d"), lambda _: 40)  # evicts "c", the least recently used
    assert made == ["a", "b", "c", "d"]
    cache.get("b", make("b"), lambda _: 40)
    cache.get("c", make("c"), lambda _: 40)
    assert made == ["a", "b", "c", "d", "c"]
    info = cache.info()
    assert info.bytes <= info.budget == 100 and info.hits == 2


def test_an_entry_larger_than_the_budget_is_returned_but_not_kept():
    cache: ByteBudgetCache[int] = ByteBudgetCache(budget=10)
    assert cache.get("big", lambda: 7, lambda _: 11) == 7
    assert cache.info().entries == 0 and cache.info().bytes == 0


def test_shrinking_the_budget_evicts():
    cache: ByteBudgetCache[int] = ByteBudgetCache(budget=100)
    for k in range(5):
        cache.get(k, lambda k=k: k, lambda _: 20)
    cache.resize(45)
    assert cache.info().entries == 2 and cache.info().bytes == 40
    with pytest.raises(ValueError, match="budget must be >= 0 bytes, got -1"):
        cache.resize(-1)


def test_compiled_max_min_programs_stay_within_the_byte_budget():
    """Problems of many shapes through the cvxpy backend: the compiled programs kept never
    exceed the budget, whatever their number."""
    from policies.fairness import COMPILED

    COMPILED.clear()
    COMPILED.resize(600_000)
    try:
        policy = get_policy("max_min_fairness_perf", backend="cvxpy")
        rng = np.random.default_rng(0)
        for n in range(2, 14):  # every n is a new shape
            jobs = [Job(str(i), {"v100": float(rng.uniform(1, 9)), "k80": 1.0})
                    for i in range(n)]
            policy.solve(Problem(cluster={"v100": 2, "k80": 2}, jobs=jobs))
            info = COMPILED.info()
            assert info.bytes <= info.budget
        assert 0 < info.entries < 12 and info.misses == 12
    finally:
        COMPILED.resize(DEFAULT_BUDGET)
        COMPILED.clear()
