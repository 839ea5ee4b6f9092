"""The jump's search (policies/water_filling_jump.py, thesis §5.4.3): an LP's prices
refute only floors that no allocation meets (and each job's bound in them is at most what
its level costs), they refute the infeasible floors their own LP was solved at, and the
search they guide ends on the state the search without them ends on, with fewer LPs."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from policies import Entity, Job, Problem, get_policy
from policies.errors import Infeasible
from policies.fairness import max_min_rows
from policies.lp import maximise_level
from policies.water_filling import own_caps
from policies.water_filling_caps import entity_caps, with_caps
from policies.water_filling_jump import last_feasible
from policies.water_filling_live import LiveSteps
from tests.policies.conftest import level_model, problems
from tests.policies.test_water_filling_live import NAME, fifo_phases

SETTINGS = {"max_examples": 60, "deadline": None,
            "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}
# A floor the prices refute may still be met to within the LP's own tolerance, no more.
MET = 1e-6


@st.composite
def capped(draw) -> Problem:
    """A random problem (conftest.problems), its jobs in up to three entities, some with a
    GPU cap: the capacity rows a refutation prices are then types and entities."""
    problem = draw(problems(max_jobs=9))
    count = draw(st.integers(1, 3))
    entities = {f"e{k}": Entity(f"e{k}", policy="fairness",
                                max_gpus=draw(st.none() | st.integers(1, 4)))
                for k in range(count)}
    jobs = [Job(j.id, j.throughputs, scale_factor=j.scale_factor, weight=j.weight,
                entity=f"e{draw(st.integers(0, count - 1))}") for j in problem.jobs]
    return Problem(cluster=problem.cluster, jobs=jobs, entities=entities)


def rows(problem: Problem):
    """(U, A, b, e): the water-filling LP of ``problem`` with its entities' GPU caps."""
    cols, U = level_model(problem)
    return (U, *with_caps(*max_min_rows(cols, U), entity_caps(problem, cols)))


def rise(problem: Problem, floor: np.ndarray) -> float:
    """How far every job can rise above ``floor`` at once in the LP of every column (the
    plain method's): >= 0 exactly when some allocation meets ``floor``; -inf when even
    the floors of jobs that cannot rise cannot be met."""
    U, A, b, e = rows(problem)
    b = b.copy()
    b[:U.shape[0]] = -floor
    try:
        return maximise_level(A, b, e, "CLARABEL", "check", precise=True).t
    except Infeasible:
        return -np.inf


@settings(**SETTINGS)
@given(problem=st.one_of(problems(max_jobs=9), capped()), data=st.data())
def test_prices_refute_only_floors_that_no_allocation_meets(problem, data):
    """Solve the pruned LP at random floors (most of them beyond the small clusters drawn),
    over every column or only some (as if the others were dead), take its prices, and
    check every floor they refute by the LP of every column: along the ray through the
    LP's floors, and through other random floors (where the jobs the LP left out, at level
    0 and not rising, have levels). And the floors an LP over every column found
    infeasible are refuted by its own prices."""
    U, A, b, e = rows(problem)
    if U.shape[0] == 0:     # no job can run anywhere
        return
    caps = own_caps(U)

    def shares():
        return np.array(data.draw(st.lists(st.floats(0.0, 1.0), min_size=caps.size,
                                           max_size=caps.size)))
    share, other = shares(), shares()
    live = np.array(data.draw(st.lists(st.booleans(), min_size=A.shape[1],
                                       max_size=A.shape[1])))   # the LP over some columns
    live |= data.draw(st.booleans())
    step = LiveSteps(A, b, e, U, live, "CLARABEL", "test")
    at = caps * share
    rising = np.asarray(data.draw(st.lists(st.booleans(), min_size=caps.size,
                                           max_size=caps.size)), dtype=float)
    try:
        t = step(at, rising if rising.any() else np.ones(caps.size))[0]
    except Infeasible:
        t = -np.inf
    refutation = step.refutation()
    if refutation is None:      # the LP priced no capacity: nothing to refute with
        return
    if t < -MET * max(caps.max(), 1.0) and live.all():
        assert refutation(at)
    rays = [np.minimum(at * scale, caps) for scale in (0.0, 0.5, 0.9, 0.99, 1.0, 1.01, 1.1, 2)]
    for floor in rays + [caps * other * scale for scale in (0.25, 0.5, 1.0)]:
        if refutation(floor):
            assert rise(problem, floor) < MET * max(floor.max(), 1.0), floor


@dataclass
class Boundary:
    """A stand-in refutation: it proves infeasible every state from ``first`` on."""
    first: int


@settings(max_examples=300, deadline=None)
@given(last=st.integers(0, 600), states=st.integers(1, 700),
       slack=st.none() | st.integers(0, 40), loose_when_infeasible=st.booleans())
def test_the_search_ends_on_the_last_feasible_state(last, states, slack,
                                                    loose_when_infeasible):
    """Over ``states`` event states of which the first ``last`` are feasible (an LP's
    answer), the search returns ``last`` whatever the refutations (sound ones: none of a
    feasible state), only ever a state a probe found feasible, and with refutations that
    are tight it needs a handful of probes."""
    last = min(last, states)
    probed = []

    def probe(j: int):
        probed.append(j)
        feasible = j <= last and j <= states
        if slack is None or j > states:
            return feasible, None
        return feasible, Boundary(last + 1 + (slack if feasible or loose_when_infeasible
                                              else 0))

    def refuted(j: int, refutation: Boundary) -> bool:
        return j > states or j >= refutation.first

    good = last_feasible(probe, refuted)
    assert good == last
    assert good == 0 or good in probed
    plain = int(2 * np.log2(last + 2)) + 4
    assert len(probed) <= plain, probed
    if slack == 0:
        assert len(probed) <= np.log(last + 2) / np.log(4) + 3, probed


def teams(n: int) -> Problem:
    """``fifo_phases``' two FIFO entities beside a fairness entity that holds a third of
    the jobs: the 20-team plan of benchmarks/policy_scale.py in small."""
    phases = fifo_phases(n)
    entities = {**phases.entities, "fair": Entity("fair", weight=2.0, policy="fairness")}
    jobs = [Job(job.id, job.throughputs, entity="fair" if i % 3 == 2 else job.entity)
            for i, job in enumerate(phases.jobs)]
    return Problem(cluster=phases.cluster, jobs=jobs, entities=entities)


def test_prices_spare_lps_and_change_nothing(monkeypatch):
    """With FIFO teams beside a fairness team the prices spare some of the jumps' LPs, and
    the levels are those of the search without them, to the bit (the same last feasible
    state, so the same LP from it)."""
    problem = teams(600)
    solves = []
    real = LiveSteps.__call__
    monkeypatch.setattr(LiveSteps, "__call__",
                        lambda step, floor, w: solves.append(1) or real(step, floor, w))
    levels = get_policy(NAME)._levels(problem)
    with_prices = len(solves)
    solves.clear()
    monkeypatch.setattr(LiveSteps, "refutation", lambda step: None)
    reference = get_policy(NAME)._levels(problem)
    assert with_prices < len(solves), (with_prices, len(solves))  # 11 against 16
    np.testing.assert_array_equal(levels, reference)


def least_cost(rate, cost, level):
    """The least cost of ``level`` for one job (rates ``rate``, costs ``cost``, time at most
    1), in exact rationals: the least over the LP's vertices, which hold at most two
    columns (a float LP solver accepts a level short by its tolerance, and at a near tie
    that is worth more than the bound's own rounding)."""
    rate = [Fraction(r) for r in rate]
    cost = [Fraction(c) for c in cost]
    level = Fraction(level)
    found = [Fraction(0)] if level <= 0 else []
    for j, (r, c) in enumerate(zip(rate, cost)):
        if r >= level:
            found.append(c * level / r)
        for i in range(j):
            if min(r, rate[i]) <= level <= max(r, rate[i]) and r != rate[i]:
                x = (level - rate[i]) / (r - rate[i])
                found.append(c * x + cost[i] * (1 - x))
    return min(found)


@settings(max_examples=200, deadline=None)
@example(rates=[1.0], costs=[1.0, 0.0, 0.0, 1.0], tie=0.0, share=5.960464477539063e-08)
@example(rates=[0.01, 0.010000000000000002], costs=[0.0, 1.0, 0.0, 1.0], tie=0.0,
         share=0.0)      # (rates a rounding apart: a near tie the rates make themselves)
@given(rates=st.lists(st.floats(0.01, 100.0), min_size=1, max_size=4),
       costs=st.lists(st.floats(0.0, 10.0), min_size=4, max_size=4),
       tie=st.sampled_from([0.0, 1e-15, 1e-12, 1e-9, 1e-7]), share=st.floats(0.0, 1.0))
def test_the_bound_at_a_jobs_cap_never_exceeds_what_its_level_costs(rates, costs, tie,
                                                                    share):
    """``at_cap``'s bound for one job (columns of ``rates``, one of them a near tie of the
    fastest) is at most the least its level can cost with its time at most 1 (exact, by
    ``least_cost``), at every level up to its cap, and exact at the cap without a near
    tie: no column slower than the cap by less than ``NEAR_CAP``, which counts among the
    fastest (``tie`` makes one; rates drawn a rounding apart make one too)."""
    from policies.water_filling_jump import NEAR_CAP, at_cap

    rate = np.array(rates + [max(rates) * (1 - tie)])
    cost = np.array(costs[:rate.size - 1] + [costs[-1]])
    owner = np.zeros(rate.size, dtype=int)
    cap = np.array([rate.max()])
    lam, mu = at_cap(rate, cost, owner, cap)
    level = cap[0] * share
    least = float(least_cost(rate, cost, level))
    assert lam[0] * level - mu[0] <= least + 1e-9 * max(1.0, least), (lam, mu, least)
    near_tie = ((rate < cap[0]) & (rate >= cap[0] * (1 - NEAR_CAP))).any()
    if not near_tie:
        at_top = cost[rate >= cap[0]].min()
        assert lam[0] * cap[0] - mu[0] == pytest.approx(at_top, rel=1e-9, abs=1e-12)
