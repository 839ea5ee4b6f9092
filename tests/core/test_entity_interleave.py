"""Entities share each round as X does (``gavelsched/mechanism/shares.py``): a type's queue
interleaved by weighted-fair-queueing finish tags."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gavelsched.mechanism.shares import interleave


def test_two_teams_weighted_2_to_1_split_each_round_2_to_1():
    # team a's 3 jobs ask 2/3 of the GPU time each, team b's 1/3: the queue in priority
    # order puts b's 3 first (they had nothing yet); interleaved, 3 GPUs go a, b, a.
    entity = np.array([0, 0, 0, 1, 1, 1])
    x = np.array([[2 / 3], [2 / 3], [2 / 3], [1 / 3], [1 / 3], [1 / 3]])
    order = np.array([3, 4, 5, 0, 1, 2])
    ((j, got),) = interleave([(0, order)], entity, x, np.ones(6, dtype=int), np.zeros((6, 1)),
                             1.0)
    assert j == 0 and sorted(entity[got[:3]].tolist()) == [0, 0, 1]
    # within a team, its own priority order is kept
    assert [i for i in got.tolist() if entity[i] == 1] == [3, 4, 5]


def test_one_entity_and_entries_without_time_keep_their_order():
    order = np.array([2, 0, 1])
    assert interleave([(0, order)], np.zeros(3, dtype=int), np.ones((3, 1)),
                      np.ones(3, dtype=int), np.zeros((3, 1)), 1.0)[0][1].tolist() == [2, 0, 1]
    x = np.array([[0.5], [0.0], [0.5]])
    got = interleave([(0, order)], np.array([0, 1, 1]), x, np.ones(3, dtype=int),
                     np.zeros((3, 1)), 1.0)[0][1]
    assert got.tolist()[-1] == 1          # no time in X: after the others


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.floats(0.05, 1.0), st.sampled_from([1, 2])),
                min_size=2, max_size=24), st.randoms())
def test_every_prefix_of_the_interleaved_queue_splits_as_x_does(rows, rnd):
    """Along the interleaved queue, the entities' finish tags (GPUs taken over GPUs asked)
    never drift apart by more than one entry's worth (WFQ's fairness bound): whichever
    prefix a round's GPUs take, each entity has its X share of it up to one job."""
    entity = np.array([e for e, _, _ in rows])
    x = np.array([[f] for _, f, _ in rows])
    sf = np.array([s for _, _, s in rows])
    order = np.array(rnd.sample(range(len(rows)), len(rows)))
    got = interleave([(0, order)], entity, x, sf, np.zeros((len(rows), 1)), 1.0)[0][1]
    assert sorted(got.tolist()) == sorted(order.tolist())
    want = np.bincount(entity, weights=x[:, 0] * sf, minlength=3)
    active = np.flatnonzero(want > 0)
    left = np.bincount(entity, weights=sf.astype(float), minlength=3)
    taken = np.zeros(3)
    for i in got.tolist():
        taken[entity[i]] += sf[i]
        busy = [k for k in active if taken[k] < left[k]]      # entities with entries left
        if len(busy) > 1:
            tags = [taken[k] / want[k] for k in busy]
            assert max(tags) - min(tags) <= max(2.0 / want[k] for k in busy) + 1e-9


def rounds_of(weights: list[float], jobs_each: int, gpus: int, rounds: int) -> np.ndarray:
    """GPU-rounds each entity gets when every round takes the first ``gpus`` entries of
    the interleaved queue (unit jobs; received time carried from round to round)."""
    entity = np.repeat(np.arange(len(weights)), jobs_each)
    share = np.repeat(np.array(weights) / sum(weights) * gpus / jobs_each, jobs_each)
    x, received = share[:, None], np.zeros((len(entity), 1))
    got = np.zeros(len(weights))
    for _ in range(rounds):
        order = np.argsort(-x[:, 0] / np.maximum(received[:, 0], 1e-9), kind="stable")
        ((_, queue),) = interleave([(0, order)], entity, x, np.ones(len(entity), dtype=int),
                                   received, 1.0)
        taken = queue[:gpus]
        received[taken, 0] += 1.0
        np.add.at(got, entity[taken], 1.0)
    return got


def test_a_share_below_one_gpu_gets_its_gpu_every_few_rounds():
    """4:3:2:1 on 6 GPUs asks 2.4, 1.8, 1.2 and 0.6 GPUs: recomputed from nothing every
    round the split was 3, 2, 1, 0 and the last team starved; with what each received
    carried over, over 30 rounds each gets its share within a GPU-round."""
    got = rounds_of([4, 3, 2, 1], jobs_each=6, gpus=6, rounds=30)
    want = np.array([4, 3, 2, 1]) / 10 * 6 * 30
    assert np.all(np.abs(got - want) <= 1.0 + 1e-9), (got, want)
