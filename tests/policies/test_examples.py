"""The thesis's own worked examples, as tests."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from policies import Entity, Job, Problem, get_policy

from .conftest import as_matrix, assert_valid, effective_throughput, table_6_1_throughputs


def test_section_5_4_1_worked_example():
    """§5.4.1: T = [[40,10],[12,4],[100,50]] on 1 V100 + 1 K80 gives
    X ≈ [[0.45, 0], [0.45, 0.09], [0.09, 0.91]]."""
    T = [(40.0, 10.0), (12.0, 4.0), (100.0, 50.0)]
    problem = Problem(cluster={"v100": 1, "k80": 1},
                      jobs=[Job(str(i), {"v100": v, "k80": k}) for i, (v, k) in enumerate(T)])
    allocation = get_policy("max_min_fairness_perf").solve(problem)
    X = as_matrix(problem, allocation)
    np.testing.assert_allclose(X, [[0.45, 0.0], [0.45, 0.09], [0.09, 0.91]], atol=0.01)
    # "Jobs receive about 10% higher throughput compared to an isolated allocation."
    isolated = get_policy("isolated").solve(problem)
    gain = [effective_throughput(problem, allocation)[j] / effective_throughput(problem, isolated)[j]
            for j in problem.job_ids]
    assert min(gain) == pytest.approx(1.09, abs=0.01)


def test_section_5_4_3_water_filling_example():
    """§5.4.3: 4 identical jobs (weights 3, 1, 1, 1) on 4 identical GPUs. Max-min alone
    guarantees job 1 a whole GPU and jobs 2-4 only a third each (any split of the rest is
    optimal); water filling gives every job a whole GPU."""
    jobs = [Job(str(i), {"gpu": 1.0}, weight=w) for i, w in enumerate([3.0, 1.0, 1.0, 1.0])]
    problem = Problem(cluster={"gpu": 4}, jobs=jobs)
    plain = get_policy("max_min_fairness_perf").solve(problem)
    assert plain.share("0", "gpu") == pytest.approx(1.0, abs=1e-6)
    assert plain.objective == pytest.approx(1 / 3, rel=1e-6)  # min_m X_m / w_m
    filled = get_policy("max_min_fairness_water_filling_perf").solve(problem)
    for j in "0123":
        assert filled.share(j, "gpu") == pytest.approx(1.0, abs=1e-6)


MODELS = ["ResNet-50", "A3C", "Transformer", "CycleGAN", "ResNet-18", "ResNet-50"]


def hierarchical_problem(num_jobs: int, inner: str) -> Problem:
    """Figures 5.12 and 5.13: 3 V100 + 3 P100 + 3 K80; jobs 0-5 belong to entity 0 (w=1),
    6-11 to entity 1 (w=2), 12-17 to entity 2 (w=3); ``num_jobs`` have arrived so far."""
    jobs = [Job(str(i), table_6_1_throughputs(MODELS[i % 6]), entity=f"e{i // 6}")
            for i in range(num_jobs)]
    entities = {f"e{k}": Entity(f"e{k}", weight=k + 1.0, policy=inner) for k in range(3)}
    return Problem(cluster={"v100": 3, "p100": 3, "k80": 3}, jobs=jobs, entities=entities)


def normalized(problem: Problem, allocation) -> dict[str, float]:
    """Effective throughput over throughput under X^equal: the quantity that is shared."""
    n = len(problem.jobs)
    share = {t: c / max(n, sum(problem.cluster.values())) for t, c in problem.cluster.items()}
    eff = effective_throughput(problem, allocation)
    return {j.id: eff[j.id] / sum(j.throughputs[t] * s for t, s in share.items())
            for j in problem.jobs}


def test_figure_5_12_fairness_across_and_within_entities():
    """Weighted fairness across entities, fairness inside: with all 18 jobs present every
    entity's jobs get equal normalised throughput and entities share 1:2:3."""
    problem = hierarchical_problem(18, "fairness")
    allocation = get_policy("max_min_fairness_water_filling_perf").solve(problem)
    assert_valid(problem, allocation)
    u = normalized(problem, allocation)
    per_entity = [[u[str(i)] for i in range(6 * k, 6 * k + 6)] for k in range(3)]
    for values in per_entity:
        assert max(values) == pytest.approx(min(values), rel=1e-4)
    totals = np.array([sum(v) for v in per_entity])
    np.testing.assert_allclose(totals / totals[0], [1.0, 2.0, 3.0], rtol=1e-4)


def test_figure_5_12_aware_beats_static_partition():
    """The heterogeneity-aware hierarchical policy gives more total normalised throughput
    than the agnostic one (the thesis measures about 17% on its jobs)."""
    problem = hierarchical_problem(18, "fairness")
    aware = normalized(problem, get_policy("max_min_fairness_water_filling_perf").solve(problem))
    agnostic = normalized(problem, get_policy("max_min_fairness_water_filling").solve(problem))
    assert sum(aware.values()) > 1.05 * sum(agnostic.values())


@pytest.mark.parametrize("num_jobs", [4, 8, 12, 18])
def test_figure_5_13_fifo_within_entities(num_jobs):
    """Weighted fairness across entities, FIFO inside: a later job of an entity gets time
    only once every earlier job of that entity runs all the time; with all jobs present the
    later jobs of entity 0 get no GPU time."""
    problem = hierarchical_problem(num_jobs, "fifo")
    allocation = get_policy("max_min_fairness_water_filling_perf").solve(problem)
    assert_valid(problem, allocation)
    for k in range(3):
        ids = [str(i) for i in range(6 * k, min(6 * k + 6, num_jobs))]
        times = [allocation.job_time(j) for j in ids]
        for before, after in itertools.pairwise(times):
            if after > 1e-6:
                assert before == pytest.approx(1.0, abs=1e-5)
    if num_jobs == 18:
        assert all(allocation.job_time(str(i)) < 1e-6 for i in range(2, 6))
