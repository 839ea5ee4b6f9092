"""Mixed-type policies (policies/mixed.py, VirtualFlow §6.5.2): configurations in the Problem
JSON, no oversubscription, equality with the single-type policy where mixing cannot help,
hand-worked gains, and the LP restated independently for scipy's ``linprog``."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from policies import Problem, ProblemError, get_policy
from policies.jobs import Configuration, configuration_name, parse_configuration_name

from .conftest import TYPES, problems

SETTINGS = {"max_examples": 25, "deadline": None,
            "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}


@st.composite
def mixed_problems(draw, max_jobs=6):
    """``conftest.problems`` with random two-type configurations on some jobs."""
    problem = draw(problems(max_jobs=max_jobs))
    jobs = []
    for job in problem.jobs:
        configs = []
        for a, b in itertools.combinations(TYPES, 2):
            if draw(st.booleans()):
                gpus = {a: draw(st.integers(1, 4)), b: draw(st.integers(1, 4))}
                configs.append(Configuration(gpus, draw(st.integers(1, 800)) / 4))
        jobs.append(Job_with(job, configs))
    return Problem(cluster=problem.cluster, jobs=tuple(jobs))


def Job_with(job, configs):
    from dataclasses import replace
    return replace(job, configurations=tuple(configs))


def _load(problem: Problem, allocation) -> dict[str, float]:
    """Workers of each real type the allocation keeps busy on average."""
    sf = {job.id: job.scale_factor for job in problem.jobs}
    load = dict.fromkeys(problem.cluster, 0.0)
    for key, row in allocation.allocation.items():
        for label, x in row.items():
            if label in problem.cluster:
                load[label] += sf[key] * x
            else:
                for t, count in parse_configuration_name(label).items():
                    load[t] += count * x
    return load


@pytest.mark.parametrize("name", ["max_min_fairness_mixed", "finish_time_fairness_mixed"])
@settings(**SETTINGS)
@given(problem=mixed_problems())
def test_no_type_is_oversubscribed(name, problem):
    allocation = get_policy(name).solve(problem)
    for t, used in _load(problem, allocation).items():
        assert used <= problem.cluster[t] + 1e-6, (t, used)
    for key, row in allocation.allocation.items():
        assert all(x >= 0 for x in row.values())
        assert sum(row.values()) <= 1 + 1e-6, key
        job = problem.job(key)
        named = {c.name for c in job.configurations}
        assert set(row) - set(problem.cluster) <= named


@settings(**SETTINGS)
@given(problem=problems(max_jobs=8))
def test_without_configurations_equals_perf(problem):
    mixed = get_policy("max_min_fairness_mixed").solve(problem)
    perf = get_policy("max_min_fairness_perf").solve(problem)
    assert mixed.allocation == perf.allocation
    assert mixed.objective == perf.objective


def _one_job(config_throughput: float) -> Problem:
    return Problem.from_dict({
        "cluster": {"v100": 1, "k80": 1},
        "jobs": [{"id": "0", "throughputs": {"v100": 10.0, "k80": 4.0}, "remaining_steps": 100,
                  "configurations": [{"gpus": {"v100": 1, "k80": 1},
                                      "throughput": config_throughput}]}]})


def test_mixing_strictly_helps_by_hand():
    """One job, 1 V100 + 1 K80: alone on the V100 it makes 10 steps/s, split across both
    12. X^equal gives it half of each type, 7 steps/s, so the single-type optimum is 10/7
    and the mixed one 12/7, with all its time on the configuration."""
    problem = _one_job(12.0)
    perf = get_policy("max_min_fairness_perf").solve(problem)
    mixed = get_policy("max_min_fairness_mixed").solve(problem)
    assert perf.objective == pytest.approx(10 / 7, rel=1e-6)
    assert mixed.objective == pytest.approx(12 / 7, rel=1e-6)
    assert mixed.allocation["0"]["k80:1+v100:1"] == pytest.approx(1.0, abs=1e-6)
    assert mixed.allocation["0"]["v100"] == pytest.approx(0.0, abs=1e-6)


def test_two_jobs_by_hand():
    """1 V100 + 2 K80, two jobs making 10 (V100) and 4 (K80) steps/s; job 0 also makes 16
    on 1 V100 + 2 K80. Single-type: each job half V100, half K80, 7 steps/s = 7/6 of its
    X^equal throughput (1/3 V100 + 2/3 K80 = 6). Mixed: job 0 spends 1/3 on the
    configuration and 2/3 on a K80 (16/3 + 8/3 = 8), job 1 2/3 on the V100 and 1/3 on a
    K80 (20/3 + 4/3 = 8): V100 1/3 + 2/3 = 1, K80 2/3 + 2/3 + 1/3 = 5/3 <= 2; 8/6 = 4/3."""
    problem = Problem.from_dict({
        "cluster": {"v100": 1, "k80": 2},
        "jobs": [{"id": "0", "throughputs": {"v100": 10.0, "k80": 4.0},
                  "configurations": [{"gpus": {"v100": 1, "k80": 2}, "throughput": 16.0}]},
                 {"id": "1", "throughputs": {"v100": 10.0, "k80": 4.0}}]})
    assert get_policy("max_min_fairness_perf").solve(problem).objective == pytest.approx(7 / 6)
    mixed = get_policy("max_min_fairness_mixed").solve(problem)
    assert mixed.objective == pytest.approx(4 / 3, rel=1e-6)
    assert mixed.allocation["0"]["k80:2+v100:1"] > 0.3


@pytest.mark.parametrize("base", ["max_min_fairness", "finish_time_fairness"])
def test_mixing_cannot_help_gives_the_single_type_allocation(base):
    """The configuration is slower than the V100 alone and uses it too: never worth it."""
    problem = _one_job(9.0)
    mixed = get_policy(f"{base}_mixed").solve(problem)
    perf = get_policy(f"{base}_perf").solve(problem)
    assert set(mixed.allocation["0"]) == {"v100", "k80"}  # the configuration got no time
    for t in problem.cluster:
        assert mixed.allocation["0"][t] == pytest.approx(perf.allocation["0"][t], abs=1e-6)
    assert mixed.objective == pytest.approx(perf.objective, rel=1e-6)


def _linprog_max_min(problem: Problem) -> float | None:
    """Max-min fairness with configurations (thesis §5.4.1, VirtualFlow §6.5.2), written
    from the equations over one variable per (job, type) and (job, configuration)."""
    types = list(problem.cluster)
    W = np.array([problem.cluster[t] for t in types], dtype=float)
    variables = []  # (job index, throughput, {type: workers})
    for i, job in enumerate(problem.jobs):
        single = [t for t in types
                  if job.throughputs.get(t, 0.0) > 0 and job.scale_factor <= problem.cluster[t]]
        for t in single:
            variables.append((i, job.throughputs[t], {t: job.scale_factor}))
        for c in job.configurations if single else ():  # no normaliser without a type
            if all(n <= problem.cluster[t] for t, n in c.gpus.items()):
                variables.append((i, c.throughput, dict(c.gpus)))
    m, k = len(problem.jobs), len(variables)
    if not variables:
        return None
    share = W / max(m, W.sum())
    runnable = []
    for i, job in enumerate(problem.jobs):
        T = np.array([job.throughputs.get(t, 0.0) if job.scale_factor <= problem.cluster[t]
                      else 0.0 for t in types])
        if T.max() > 0:
            runnable.append((i, job.scale_factor / job.weight / (T @ share)))
    if not runnable:
        return None
    A, b = [], []
    for i, coef in runnable:  # t - coef * throughput_i <= 0
        A.append([-coef * thr if j == i else 0.0 for j, thr, _ in variables] + [1.0])
        b.append(0.0)
    for i in range(m):
        A.append([1.0 if j == i else 0.0 for j, _, _ in variables] + [0.0])
        b.append(1.0)
    for jt, t in enumerate(types):
        A.append([use.get(t, 0) for _, _, use in variables] + [0.0])
        b.append(W[jt])
    c = np.zeros(k + 1)
    c[-1] = -1.0
    result = linprog(c, A_ub=np.array(A), b_ub=np.array(b),
                     bounds=[(0, None)] * k + [(None, None)], method="highs")
    assert result.status == 0
    return -result.fun


@settings(**SETTINGS)
@given(problem=mixed_problems(max_jobs=5))
def test_max_min_mixed_matches_linprog(problem):
    allocation = get_policy("max_min_fairness_mixed").solve(problem)
    expected = _linprog_max_min(problem)
    if expected is None:  # no job can run anywhere
        assert allocation.objective is None
    else:
        assert allocation.objective == pytest.approx(expected, rel=1e-5, abs=1e-7)


# ---- the configurations field of the Problem JSON -------------------------------------

def _job_with(configurations) -> dict:
    return {"cluster": {"v100": 2, "k80": 2},
            "jobs": [{"id": "0", "throughputs": {"v100": 1.0},
                      "configurations": configurations}]}


@pytest.mark.parametrize("configurations, message", [
    ([{"gpus": {"tpu": 1}, "throughput": 1.0}], "unknown worker type 'tpu'"),
    ([{"gpus": {"v100": 0, "k80": 1}, "throughput": 1.0}], "gpus.v100: must be >= 1"),
    ([{"gpus": {"v100": 1.5}, "throughput": 1.0}], "must be a whole number"),
    ([{"gpus": {"v100": 1, "k80": 1}, "throughput": 0.0}], "throughput: must be > 0"),
    ([{"gpus": {"v100": 1, "k80": 1}, "throughput": -2}], "throughput: must be > 0"),
    ([{"gpus": {}, "throughput": 1.0}], "at least one worker type"),
    ([{"gpus": {"v100": 1}}], "needs 'gpus' and 'throughput'"),
    ([{"gpus": {"v100": 1}, "throughput": 1, "speed": 2}], "unknown field 'speed'"),
    ({"gpus": {"v100": 1}}, "configurations: must be a list"),
    ([{"gpus": {"v100": 1, "k80": 1}, "throughput": 1.0},
      {"gpus": {"k80": 1, "v100": 1}, "throughput": 2.0}], "listed twice"),
])
def test_bad_configurations_name_the_field(configurations, message):
    with pytest.raises(ProblemError, match="jobs\\[0\\].configurations") as err:
        Problem.from_dict(_job_with(configurations))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_configurations_round_trip_and_names():
    data = _job_with([{"gpus": {"v100": 1, "k80": 2}, "throughput": 3.5}])
    problem = Problem.from_dict(data)
    config = problem.jobs[0].configurations[0]
    assert config.name == "k80:2+v100:1" == configuration_name({"v100": 1, "k80": 2})
    assert parse_configuration_name(config.name) == {"k80": 2, "v100": 1}
    assert Problem.from_dict(problem.to_dict()) == problem
    with pytest.raises(ProblemError, match="configuration name 'v100'"):
        parse_configuration_name("v100")
