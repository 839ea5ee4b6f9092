"""AlloX's matching over queue levels (policies/queue_levels.py) against the matching it
replaces: jobs to every (GPU, position) slot, by scipy's assignment solver."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linear_sum_assignment

from policies.queue_levels import level_count, match_levels


def slot_matching_cost(times: np.ndarray, gpus: list[int],
                       positions: int | None = None) -> float:
    """The least total completion time over every (GPU, position) slot: AlloX's matching
    as its paper states it, with as many positions as there are jobs (or ``positions``)."""
    per_gpu = times[:, [t for t, n in enumerate(gpus) for _ in range(n)]]
    positions = positions or times.shape[0]
    cost = np.concatenate([k * per_gpu for k in range(1, positions + 1)], axis=1)
    cost = np.where(np.isfinite(cost), cost, 1e18)
    rows, cols = linear_sum_assignment(cost)
    return float(cost[rows, cols].sum())


def level_cost(times: np.ndarray, gpus: list[int]) -> tuple[float, object]:
    matched = match_levels(times, np.array(gpus))
    at = matched.level_of >= 0
    level = matched.level_of[at]
    cost = matched.depth[level] * times[np.flatnonzero(at), matched.type_of[level]]
    return float(cost.sum()), matched


@st.composite
def matchings(draw):
    types = draw(st.integers(1, 3))
    gpus = draw(st.lists(st.integers(1, 3), min_size=types, max_size=types))
    jobs = draw(st.integers(1, 10))
    # whole times on some draws, so that many matchings tie
    values = st.integers(1, 20).map(float) if draw(st.booleans()) else st.floats(0.1, 50.0)
    times = np.array(draw(st.lists(st.lists(values, min_size=types, max_size=types),
                                   min_size=jobs, max_size=jobs)))
    for job in range(jobs):   # a type a job cannot run on, but never every type
        if types > 1 and draw(st.booleans()):
            times[job, draw(st.integers(0, types - 1))] = np.inf
    return times, gpus


@settings(max_examples=150, deadline=None)
@given(matchings())
def test_the_level_matching_costs_what_the_slot_matching_does(case):
    times, gpus = case
    cost, matched = level_cost(times, gpus)
    assert np.isclose(cost, slot_matching_cost(times, gpus), rtol=1e-9)
    assert (matched.level_of >= 0).all()
    assert np.isfinite(times[np.arange(len(times)), matched.type_of[matched.level_of]]).all()
    held = np.bincount(matched.level_of, minlength=matched.depth.size)
    assert (held <= np.array(gpus)[matched.type_of]).all()          # a level per GPU
    for t in range(len(gpus)):                                      # nested levels
        counts = held[np.argsort(matched.depth + 1e6 * (matched.type_of != t))]
        counts = counts[: int((matched.type_of == t).sum())]
        assert (np.diff(counts) <= 0).all()


def test_a_fast_type_s_queue_goes_as_deep_as_its_jobs_need():
    """One fast GPU beside nine slow ones: the best matching queues every job on the fast
    one, 30 deep. The matching this replaces stopped at 2 x ceil(jobs / GPUs) + 1 = 7
    positions a GPU, and its best within them cost 8.3 times as much."""
    jobs = 30
    times = np.column_stack([1.0 + 0.01 * np.arange(jobs), np.full(jobs, 100.0)])
    cost, matched = level_cost(times, [1, 9])
    assert np.isclose(cost, slot_matching_cost(times, [1, 9]))
    assert (matched.type_of[matched.level_of] == 0).all()
    assert matched.depth[matched.level_of].max() == 30             # one job a level
    assert slot_matching_cost(times, [1, 9], positions=7) > 8 * cost   # (8.29x)


def test_a_job_that_runs_on_no_type_of_the_cluster_is_left_out():
    times = np.array([[1.0, np.inf], [np.inf, np.inf], [2.0, 3.0]])
    matched = match_levels(times, np.array([1, 0]))                 # no GPU of the 2nd type
    assert matched.level_of[1] == -1 and (matched.level_of[[0, 2]] >= 0).all()
    assert set(matched.type_of.tolist()) == {0}
    assert level_count(2, np.array([1, 0])) == 2


def test_no_jobs_match_to_nothing():
    matched = match_levels(np.zeros((0, 2)), np.array([2, 2]))
    assert matched.level_of.size == 0 and matched.depth.size == 0
