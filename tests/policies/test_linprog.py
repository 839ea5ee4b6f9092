"""Each LP policy's objective against an independent formulation solved by scipy's
``linprog`` (HiGHS). The formulations below are written from the thesis's equations
(§5.3.1, §5.4.1, §5.4.2, §6.4) over a dense X, sharing no code with ``policies``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from policies import Problem, get_policy

from .conftest import problems

SETTINGS = {"max_examples": 30, "deadline": None,
                "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}
REL = 1e-6


class Dense:
    """X flattened row-major (jobs x types), optionally followed by pair entries and extra
    scalar variables; builds the constraint rows (5.1)-(5.3)."""

    def __init__(self, problem: Problem, *, agnostic=False, pairs=False, extra=1):
        self.types = list(problem.cluster)
        self.m, self.n = len(problem.jobs), len(self.types)
        T = np.array([[j.throughputs.get(t, 0.0) for t in self.types] for j in problem.jobs])
        self.sf = np.array([j.scale_factor for j in problem.jobs], dtype=float)
        self.W = np.array([problem.cluster[t] for t in self.types], dtype=float)
        fits = self.sf[:, None] <= self.W[None, :]
        T[~fits] = 0.0
        if agnostic:  # the mean on every type big enough, usable or not (columns.py)
            mean = T.sum(1) / np.maximum((T > 0).sum(1), 1)
            T = np.where(fits & (mean > 0)[:, None], mean[:, None], 0.0)
        self.T = T
        ids = {j.id: i for i, j in enumerate(problem.jobs)}
        self.pairs = []  # (a, b, type, ta, tb)
        if pairs:
            for p in problem.pairs:
                a, b = ids[p.jobs[0]], ids[p.jobs[1]]
                for j, t in enumerate(self.types):
                    ta, tb = p.throughputs.get(t, (0.0, 0.0))
                    if ta > 0 and tb > 0 and T[a, j] > 0 and T[b, j] > 0 \
                            and ta / T[a, j] + tb / T[b, j] > 1:
                        self.pairs.append((a, b, j, ta, tb))
        self.nx = self.m * self.n + len(self.pairs)
        self.nv = self.nx + extra
        # throughput(m, X) as a matrix over the variables
        self.thr = np.zeros((self.m, self.nv))
        for i in range(self.m):
            self.thr[i, i * self.n:(i + 1) * self.n] = T[i]
        for k, (a, b, j, ta, tb) in enumerate(self.pairs):
            self.thr[a, self.m * self.n + k] = ta
            self.thr[b, self.m * self.n + k] = tb

    def bounds(self):
        b = [(0, 1 if self.T[i, j] > 0 else 0) for i in range(self.m) for j in range(self.n)]
        return b + [(0, 1)] * len(self.pairs) + [(None, None)] * (self.nv - self.nx)

    def base(self):
        rows, rhs = [], []
        for i in range(self.m):  # Σ_j X_ij (+ pairs with i) <= 1
            r = np.zeros(self.nv)
            r[i * self.n:(i + 1) * self.n] = 1
            for k, (a, b, *_rest) in enumerate(self.pairs):
                if i in (a, b):
                    r[self.m * self.n + k] = 1
            rows.append(r)
            rhs.append(1)
        for j in range(self.n):  # Σ_i X_ij sf_i <= W_j
            r = np.zeros(self.nv)
            r[j:self.m * self.n:self.n] = self.sf
            for k, (a, _b, jj, *_rest) in enumerate(self.pairs):
                if jj == j:
                    r[self.m * self.n + k] = self.sf[a]
            rows.append(r)
            rhs.append(self.W[j])
        return rows, rhs

    def runnable(self):
        return self.T.max(1) > 0


def approx(expected):
    return None if expected is None else pytest.approx(expected, rel=REL)


def solve(c, A, b, bounds):
    # Tight tolerances: HiGHS's defaults (1e-7, absolute) leave optima with large step
    # counts a few 1e-6 off, more than these tests allow.
    res = linprog(c, A_ub=np.array(A), b_ub=np.array(b), bounds=bounds, method="highs",
                  options={"primal_feasibility_tolerance": 1e-10,
                           "dual_feasibility_tolerance": 1e-10})
    assert res.status == 0, res.message
    return res


def max_min(problem, *, agnostic=False, pairs=False):
    d = Dense(problem, agnostic=agnostic, pairs=pairs)
    share = d.W / max(d.m, d.W.sum())
    w = np.array([j.weight for j in problem.jobs])
    A, b = d.base()
    if not d.runnable().any():
        return None
    for i in np.nonzero(d.runnable())[0]:
        r = -d.thr[i] * d.sf[i] / (w[i] * (d.T[i] @ share))
        r[-1] = 1  # t - u_i <= 0
        A.append(r)
        b.append(0)
    c = np.zeros(d.nv)
    c[-1] = -1
    return -solve(c, A, b, d.bounds()).fun


def makespan(problem, *, agnostic=False, pairs=False, budget=None):
    d = Dense(problem, agnostic=agnostic, pairs=pairs)
    s = np.array([j.remaining_steps for j in problem.jobs])
    A, b = d.base()
    if not (d.runnable() & (s > 0)).any():
        return None  # nothing to finish: no makespan
    for i in np.nonzero(d.runnable() & (s > 0))[0]:
        r = -d.thr[i].copy()
        r[-1] = s[i]  # λ s_i - throughput_i <= 0
        A.append(r)
        b.append(0)
    if budget is not None:
        price = np.array([problem.prices[t] for t in d.types]) / 3600
        r = np.zeros(d.nv)
        for i in range(d.m):
            r[i * d.n:(i + 1) * d.n] = price * d.sf[i]
        r[-1] = -budget
        A.append(r)
        b.append(0)
    bounds = d.bounds()
    bounds[-1] = (0, None)
    c = np.zeros(d.nv)
    c[-1] = -1
    return 1 / -solve(c, A, b, bounds).fun


def weighted_sum(problem, coef_fn, *, slos=False):
    d = Dense(problem, extra=0)
    A, b = d.base()
    if not d.runnable().any():
        return None
    fastest = d.T.max(1)
    c = np.zeros(d.nv)
    for i in np.nonzero(d.runnable())[0]:
        for j in range(d.n):
            c[i * d.n + j] = -coef_fn(i, j, d.T[i, j] / fastest[i], d)
    if slos:
        for i, job in enumerate(problem.jobs):
            if job.slo_s is not None and job.remaining_steps > 0:
                A.append(-d.thr[i])
                b.append(-job.remaining_steps / (job.slo_s - job.elapsed_s))
    return -solve(c, A, b, d.bounds()).fun


@pytest.mark.parametrize("name,agnostic,pairs", [
    ("max_min_fairness", True, False), ("max_min_fairness_perf", False, False),
    ("max_min_fairness_packed", False, True)])
@settings(**SETTINGS)
@given(problem=problems(pairs=True))
def test_max_min_fairness(name, agnostic, pairs, problem):
    ours = get_policy(name).solve(problem).objective
    assert ours == approx(max_min(problem, agnostic=agnostic, pairs=pairs))


@settings(**SETTINGS)
@given(problem=problems(pairs=False))
def test_water_filling_first_level(problem):
    ours = get_policy("max_min_fairness_water_filling_perf").solve(problem).objective
    expected = max_min(problem)
    assert ours == (None if expected is None else pytest.approx(expected, rel=1e-5))


@pytest.mark.parametrize("name,agnostic,pairs", [
    ("min_total_duration", True, False), ("min_total_duration_perf", False, False),
    ("min_total_duration_packed", False, True)])
@settings(**SETTINGS)
@given(problem=problems(pairs=True))
def test_min_total_duration(name, agnostic, pairs, problem):
    ours = get_policy(name).solve(problem).objective
    assert ours == approx(makespan(problem, agnostic=agnostic, pairs=pairs))


@settings(**SETTINGS)
@given(problem=problems(pairs=False), slack=st.floats(1.01, 3.0))
def test_min_makespan_with_budget(problem, slack):
    """§6.4.3: a budget between the cheapest possible cost of the work and ``slack`` times it."""
    if makespan(problem) is None:
        return
    d = Dense(problem)
    price = np.array([problem.prices[t] for t in d.types]) / 3600
    s = np.array([j.remaining_steps for j in problem.jobs])
    with np.errstate(divide="ignore"):
        per_step = np.where(d.T > 0, price[None, :] * d.sf[:, None] / d.T, np.inf).min(1)
    cheapest = (per_step * s)[d.runnable()].sum()
    budget = slack * cheapest
    ours = get_policy("min_makespan_with_budget", budget=budget).solve(problem).objective
    assert ours == approx(makespan(problem, budget=budget))


GAIN = {  # §6.4.1: steps/s; normalize="fastest": over the job's fastest throughput
    "none": lambda i, j, norm, d: d.T[i, j],
    "fastest": lambda i, j, norm, d: norm,
}


@pytest.mark.parametrize("normalize", sorted(GAIN))
@settings(**SETTINGS)
@given(problem=problems(pairs=False))
def test_max_sum_throughput(normalize, problem):
    ours = get_policy("max_sum_throughput_perf", normalize=normalize).solve(problem).objective
    assert ours == approx(weighted_sum(problem, GAIN[normalize]))


def per_dollar(problem, normalize="none", cost_unit="job"):
    """§6.4.2 column by column: throughput per dollar-hour of the column (k workers of a job
    of scale factor k, or one worker with cost_unit="worker", as Gavel)."""
    prices = [problem.prices[t] for t in problem.cluster]
    gain = GAIN[normalize]

    def coef(i, j, norm, d):
        workers = d.sf[i] if cost_unit == "job" else 1.0
        return gain(i, j, norm, d) / (prices[j] * workers)
    return coef


@pytest.mark.parametrize("normalize,cost_unit", [("none", "job"), ("fastest", "job")])
@settings(**SETTINGS)
@given(problem=problems(pairs=False))
def test_min_cost(normalize, cost_unit, problem):
    ours = get_policy("max_sum_throughput_normalized_by_cost_perf", normalize=normalize,
                      cost_unit=cost_unit).solve(problem).objective
    assert ours == approx(weighted_sum(problem, per_dollar(problem, normalize, cost_unit)))


@settings(**SETTINGS)
@given(problem=problems(pairs=False))
def test_min_cost_with_slos(problem):
    # generous SLOs (50x the best-case time) so that most examples are feasible
    jobs = [j.__class__(**{**j.__dict__, "slo_s": j.elapsed_s + 50 * j.remaining_steps
                           / max(j.throughputs.values())}) for j in problem.jobs]
    problem = problem.with_jobs(jobs)
    try:
        expected = weighted_sum(problem, per_dollar(problem), slos=True)
        if expected is None:  # no job can run, yet every job has an SLO
            raise AssertionError("infeasible")
    except AssertionError:  # infeasible for linprog too: our policy must say so
        with pytest.raises(Exception, match="SLO"):
            get_policy("max_sum_throughput_normalized_by_cost_perf_SLOs").solve(problem)
        return
    ours = get_policy("max_sum_throughput_normalized_by_cost_perf_SLOs").solve(problem).objective
    assert ours == approx(expected)


@settings(**SETTINGS)
@given(problem=problems(pairs=False))
def test_fifo_lp(problem):
    """§5.4.2 FIFO: maximise Σ_m throughput/throughput^fastest · (M - m)."""
    m = len(problem.jobs)
    ours = get_policy("fifo_packed").solve(problem.with_jobs(problem.jobs)).objective
    assert ours == approx(weighted_sum(problem, lambda i, j, norm, d: norm * (m - i)))
