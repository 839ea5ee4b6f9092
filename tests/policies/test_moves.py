"""Fewer moves for the same throughputs (``policies/moves.py``, issue #32): the
re-arranged allocation gives every job at least the effective throughput the policy gave
it, never oversubscribes a type or a job's time, keeps runs on their columns, and the core
applies it, with received times reset at most once per Gavel's interval, only under the
restart rule once a restart costs time."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gavelsched.core import CoreConfig
from policies.moves import fewer_moves
from policies import Allocation, Job, Problem, get_policy
from tests.core.test_core import R, Recording, finish, job, make_core


def effective(problem: Problem, allocation: Allocation) -> dict[str, float]:
    jobs = {j.id: j for j in problem.jobs}
    return {key: sum(x * jobs[key].throughputs.get(t, 0.0) for t, x in row.items())
            for key, row in allocation.allocation.items()}


def usage(problem: Problem, allocation: Allocation) -> dict[str, float]:
    jobs = {j.id: j for j in problem.jobs}
    used = {t: 0.0 for t in problem.cluster}
    for key, row in allocation.allocation.items():
        for t, x in row.items():
            used[t] += x * jobs[key].scale_factor
    return used


def spread() -> tuple[Problem, Allocation]:
    """Four identical jobs, as fast on either of two types of 2 GPUs, each given half of
    each: one optimum of many (an interior point's)."""
    problem = Problem(cluster={"v100": 2, "k80": 2},
                      jobs=tuple(Job(str(i), {"v100": 2.0, "k80": 2.0}) for i in range(4)))
    allocation = Allocation("test", {str(i): {"v100": 0.5, "k80": 0.5} for i in range(4)})
    return problem, allocation


def test_each_run_keeps_its_column_and_its_throughput():
    problem, allocation = spread()
    current = {"0": "v100", "1": "v100", "2": "k80", "3": "k80"}
    out = fewer_moves(problem, allocation, current)
    assert {key: set(row) for key, row in out.allocation.items()} == {
        key: {column} for key, column in current.items()}
    before, after = effective(problem, allocation), effective(problem, out)
    assert all(after[key] >= before[key] * (1 - 1e-6) for key in before)
    assert all(used <= problem.cluster[t] + 1e-9 for t, used in usage(problem, out).items())


def test_it_reads_the_jobs_as_arrays_and_makes_no_job_record():
    """Making a ``Job`` per job took 0.8 s of each re-solve at 100,000 jobs (issue #30):
    given a table whose records are made on demand, none is made, and the answer is the
    one the records give."""
    from policies.table import JobTable

    problem, allocation = spread()
    table = problem.table
    made = []

    def records():
        made.append(True)
        return table.records

    lazy = replace(problem, jobs=JobTable(table.ids, table.types, table.T, table.numbers,
                                          records, configured=False))
    current = {"0": "v100", "2": "k80"}
    out = fewer_moves(lazy, allocation, current)
    assert made == []
    assert out.allocation == fewer_moves(problem, allocation, current).allocation
    assert out.allocation != allocation.allocation         # (it did re-arrange)


def test_identical_jobs_are_dealt_so_that_most_hold_one_column():
    """Four identical jobs need all of one fast and one slow GPU (10 and 2 steps/s, 3
    each): no job can run on the slow one alone, so two of them pair it with the fast
    one and the other two hold the fast one only (an equal share would spread all four)."""
    problem = Problem(cluster={"v100": 1, "k80": 1},
                      jobs=tuple(Job(str(i), {"v100": 10.0, "k80": 2.0}) for i in range(4)))
    allocation = Allocation("test", {str(i): {"v100": 0.25, "k80": 0.25} for i in range(4)})
    out = fewer_moves(problem, allocation, {})
    assert sorted(len(row) for row in out.allocation.values()) == [1, 1, 2, 2]
    assert all(rate == pytest.approx(3.0) for rate in effective(problem, out).values())
    assert all(sum(row.values()) <= 1 + 1e-9 for row in out.allocation.values())
    assert usage(problem, out) == pytest.approx({"v100": 1.0, "k80": 1.0})


def test_columns_one_float_apart_are_dealt_without_dividing_by_zero():
    """Two types whose rates differ in the last bit (a table's equal rates through a
    scaling): 1/a - 1/b is 0, and the deal must take the slow one as the fast one."""
    slow = 3.568
    fast = float(np.nextafter(slow, 10.0))
    problem = Problem(cluster={"v100": 1, "p100": 1},
                      jobs=tuple(Job(str(i), {"v100": fast, "p100": slow}) for i in range(4)))
    allocation = Allocation("test", {str(i): {"v100": 0.25, "p100": 0.25} for i in range(4)})
    out = fewer_moves(problem, allocation, {})
    assert all(rate == pytest.approx(slow / 2) for rate in effective(problem, out).values())
    assert all(sum(row.values()) <= 1 + 1e-9 for row in out.allocation.values())


def test_a_job_is_never_moved_to_a_type_too_small_for_it():
    """Two 4-GPU jobs on v100s; the k80s are faster for them, and named as their current
    column, but hold at most 2-GPU jobs (``max_scale_factor``): as in the policies' own
    column model (``build_columns``), the jobs stay where they can run."""
    problem = Problem(cluster={"v100": 8, "k80": 8}, max_scale_factor={"k80": 2},
                      jobs=tuple(Job(str(i), {"v100": 2.0, "k80": 5.0}, scale_factor=4)
                                 for i in range(2)))
    allocation = Allocation("test", {str(i): {"v100": 1.0} for i in range(2)})
    out = fewer_moves(problem, allocation, {"0": "k80", "1": "k80"})
    assert {key: dict(row) for key, row in out.allocation.items()} == {
        "0": {"v100": pytest.approx(1.0)}, "1": {"v100": pytest.approx(1.0)}}


def test_a_pair_or_a_job_without_time_is_left_as_the_policy_gave_it():
    problem, allocation = spread()
    paired = Allocation("test", {**allocation.allocation, "0+1": {"v100": 0.1}})
    assert fewer_moves(problem, paired, {}) is paired
    idle = Allocation("test", {**allocation.allocation, "3": {}})
    out = fewer_moves(problem, idle, {"0": "k80"})
    assert out.allocation["3"] == {}
    assert sum(out.allocation["0"].values()) > 0


@st.composite
def problems(draw):
    types = ("v100", "p100", "k80")[:draw(st.integers(1, 3))]
    cluster = {t: draw(st.integers(1, 6)) for t in types}
    jobs = []
    for i in range(draw(st.integers(1, 10))):
        rates = {t: draw(st.sampled_from([0.0, 0.5, 1.0, 2.5, 7.0])) for t in types}
        if not any(rates.values()):
            rates[types[0]] = 1.0
        jobs.append(Job(str(i), rates, scale_factor=draw(st.sampled_from([1, 1, 2]))))
    problem = Problem(cluster=cluster, jobs=tuple(jobs))
    current = {j.id: draw(st.sampled_from(types)) for j in jobs
               if draw(st.booleans())}
    policy = draw(st.sampled_from(["max_min_fairness_perf", "finish_time_fairness_perf",
                                   "max_sum_throughput_perf"]))
    return problem, current, policy


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_fewer_moves_serves_every_job_as_well_within_the_cluster(case):
    problem, current, name = case
    allocation = get_policy(name).solve(problem)
    out = fewer_moves(problem, allocation, current)
    before, after = effective(problem, allocation), effective(problem, out)
    for key, rate in before.items():
        assert after[key] >= rate * (1 - 1e-6) - 1e-9, key
        assert sum(out.allocation[key].values()) <= 1 + 1e-9
    for t, used in usage(problem, out).items():
        assert used <= problem.cluster[t] * (1 + 1e-6) + 1e-9, t
    stay = lambda a: sum(a.allocation[k].get(c, 0.0) for k, c in current.items())  # noqa: E731
    assert stay(out) >= stay(allocation) - 1e-6        # the policy's own was a candidate


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(), st.booleans())
def test_jobs_share_a_columns_dictionary_exactly_when_theirs_are_the_same(case, mixed):
    # issue #30: made over the model's arrays, one per kind of job, where a dictionary a job
    # cost 3-4 s a re-solve at 100,000 jobs; each job's must be the one it had, in order
    from policies.columns import build_columns
    from policies.jobs import Configuration
    from policies.moves import _columns

    problem = case[0]
    if mixed and len(problem.worker_types) > 1:
        split = Configuration({problem.worker_types[0]: 1, problem.worker_types[1]: 1}, 3.0)
        problem = replace(problem, jobs=tuple(replace(j, configurations=(split,))
                                              for j in problem.jobs))
    cols = build_columns(problem, configurations=mixed)
    usage = cols.usage.tocsc()            # the per-job construction, from scipy's matrices
    gpus = [{cols.types[usage.indices[k]]: float(usage.data[k])
             for k in range(usage.indptr[c], usage.indptr[c + 1])}
            for c in range(cols.num_columns)]
    rate = cols.throughput
    want = [{cols.labels[cols.col_type[c]]: (float(r), gpus[c])
             for c, r in zip(rate.indices[rate.indptr[i]:rate.indptr[i + 1]],
                             rate.data[rate.indptr[i]:rate.indptr[i + 1]])}
            for i in range(cols.num_jobs)]
    class_of, classes = _columns(cols)                    # (by job row)
    assert len(class_of) == cols.num_jobs
    for i, columns in enumerate(want):
        got = classes[class_of[i]]
        assert list(got.items()) == list(columns.items()), cols.job_ids[i]
    assert len(classes) == len({tuple((c, r, tuple(g.items())) for c, (r, g) in d.items())
                                for d in want})


class Rearrangeable(Recording):
    """``Recording``'s equal share (every job spread over every type), declared
    rearrangeable."""

    TRAITS = Recording.TRAITS.but(rearrangeable=True)


def _core(policy, rule="tenure"):
    """Re-solves at every arrival (the daemon's), Gavel's interval of 1,920 s."""
    return make_core(policy, config=CoreConfig(restart_rule=rule, resolve="responsive",
                                               round_seconds=R))


@pytest.mark.parametrize("restart_s, rule, kept", [(120.0, "tenure", True),
                                                   (0.0, "tenure", False),
                                                   (120.0, "gavel", False)])
def test_the_core_re_arranges_and_keeps_received_time_only_when_restarts_cost(
        restart_s, rule, kept):
    core = _core(Rearrangeable(), rule)
    for i in range(4):
        core.submit(job(i, restart_s=restart_s), 0.0)
    rnd = core.start_round(0.0)
    columns = sum(len([x for x in row.values() if x > 0])
                  for row in core.allocation.allocation.values())
    assert (columns < 8) is kept                        # the equal share: 4 jobs x 2 types
    finish(core, rnd, R)
    core.submit(job(9, restart_s=restart_s), R)
    rnd = core.start_round(R)                           # an arrival: re-solved
    assert rnd.resolved is not None
    demand = core._demand()
    first = [demand.keys.index(str(i)) for i in range(4)]     # each ran round 0 (4 GPUs)
    received = demand.received[first].sum(axis=1)
    seed = core.config.seed_seconds * len(demand.types)
    if kept:
        assert (received >= seed + R - 1e-6).all()
    else:
        assert received == pytest.approx(np.full(4, seed))


def test_a_policy_that_is_not_rearrangeable_keeps_its_allocation():
    core = _core(Recording())
    for i in range(4):
        core.submit(job(i, restart_s=120.0), 0.0)
    core.start_round(0.0)
    assert all(len(row) == 2 for row in core.allocation.allocation.values())


def test_received_time_is_reset_once_per_interval_and_shares_never_exceed_one():
    """Under the restart rule, an arrival every other round re-solves, and received times
    go back to the seed only at the first re-solve after Gavel's 1,920 s."""
    core = _core(Rearrangeable())
    now, resets = 0.0, [0.0]
    for i in range(3):
        core.submit(job(i, restart_s=60.0, steps=10**7), now)
    for k in range(12):
        if k % 2:
            core.submit(job(10 + k, restart_s=60.0, steps=10**7), now)
        rnd = core.start_round(now)
        if core.counted_since_s != resets[-1]:
            resets.append(core.counted_since_s)
        now += R
        finish(core, rnd, now)
        for x, got in core.shares(now).values():
            assert sum(got.values()) <= 1 + 1e-9
    # re-solves at rounds 1, 3, ..., 11 (360 s each): the first 1,920 s after the start is
    # round 7's (2,520 s); the next would be 1,920 s after that, past the twelfth round
    assert resets == [0.0, 7 * R]


@pytest.mark.parametrize("failure", ["status", "raises"])
def test_an_lp_that_fails_leaves_the_policy_s_allocation(monkeypatch, caplog, failure):
    import types

    import scipy.optimize

    def linprog(*args, **kwargs):
        if failure == "raises":
            raise ValueError("array must not contain infs or NaNs")
        return types.SimpleNamespace(status=2, message="The problem is infeasible.")

    monkeypatch.setattr(scipy.optimize, "linprog", linprog)   # moves reads it at each call
    problem, allocation = spread()
    assert fewer_moves(problem, allocation, {"0": "k80"}) is allocation
    assert "the policy's allocation stands" in caplog.text
