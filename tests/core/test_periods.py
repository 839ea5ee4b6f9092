"""``periods.install``: an allocation's X rows into the core's rows, the same whether it
names single jobs only (read all at once) or pairs too (key by key), and the planner's sort
key made from them (``Rows.tie``)."""

from __future__ import annotations

from types import MappingProxyType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gavelsched.core.periods import close_period, install
from gavelsched.core.rows import Rows
from gavelsched.mechanism.selection import tie_break
from policies import Allocation

TYPES = ("v100", "p100", "k80")


def _rows(jobs: int) -> Rows:
    """Rows of ``jobs`` single jobs and the pair of the first two."""
    rows = Rows(len(TYPES))
    rows.add_many([(str(i), (str(i),), 1, np.ones(len(TYPES))) for i in range(jobs)], 0.0)
    rows.add_many([("0+1", ("0", "1"), 1, np.ones((len(TYPES), 2)))], 0.0)
    return rows


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 6), st.integers(0, 2**31 - 1), st.booleans(), st.booleans())
def test_install_sets_x_of_the_keys_it_covers(jobs, seed, with_pair, all_types):
    rng = np.random.default_rng(seed)
    rows = _rows(jobs)
    given_keys = [str(i) for i in range(jobs) if rng.random() < 0.7]
    given_keys += ["0+1", "7+8"] if with_pair else []     # "7+8": jobs not in the core
    allocation = {}
    for key in given_keys:
        named = TYPES if all_types else [t for t in TYPES if rng.random() < 0.6]
        allocation[key] = MappingProxyType({t: float(rng.random()) for t in named})
    rows.allocation[:] = 7.0
    install(Allocation("p", allocation), rows, dict.fromkeys(map(str, range(jobs))), TYPES,
            lookups=None, seed=0.0)
    want = np.zeros((len(rows), len(TYPES)))
    for key, row in allocation.items():
        if key in rows:
            want[rows.index[key]] = [row.get(t, 0.0) for t in TYPES]
    assert rows.allocation.tobytes() == want.tobytes()
    assert rows.allocated.tolist() == [key in allocation for key in rows.keys]
    # the planner's sort key, made with X (the planner reads it instead of making it)
    assert rows.tie.tobytes() == tie_break(want).tobytes()


@pytest.mark.parametrize("policy", ["max_min_fairness_perf", "max_min_fairness_packed"])
def test_the_kept_sort_key_is_the_one_x_makes_at_every_plan(monkeypatch, policy):
    """``Rows.tie`` stays ``tie_break(X)`` through arrivals, finishes, re-solves and the pair
    rows a packing policy adds: every plan of a simulation is handed the key that X
    would make."""
    import gavelsched.core.core as core_module
    from simulator import simulate
    from traces.catalog import default_table
    from traces.generator import generate_trace

    plan_round, plans = core_module.plan_round, []

    def checked(demand, *args, **kwargs):
        # (equal as the sort compares them: a row added since X holds 0.0 where X makes -0.0)
        assert np.array_equal(demand.tie_break, tie_break(demand.allocation))
        plans.append(len(demand.keys))
        return plan_round(demand, *args, **kwargs)

    monkeypatch.setattr(core_module, "plan_round", checked)
    table = default_table()
    result = simulate(generate_trace(40, 8.0, table=table, seed=1), table,
                      {"v100": 3, "p100": 3, "k80": 3}, policy)
    assert result.resolves > 1 and len(plans) == result.rounds and max(plans) > 1


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 8), st.integers(0, 2**31 - 1))
def test_an_allocation_written_as_a_matrix_installs_as_its_rows(jobs, seed):
    """A policy's allocation whose rows are one matrix (``MatrixRows``, the max-min LP's)
    installs the same X as its rows read one by one; a ``replace`` of its rows leaves the
    matrix behind."""
    from dataclasses import replace

    from policies import Job, Problem, get_policy

    rng = np.random.default_rng(seed)
    problem = Problem(cluster={t: int(rng.integers(1, 4)) for t in TYPES}, jobs=tuple(
        Job(id=str(i), throughputs={t: float(rng.integers(1, 9)) for t in TYPES},
            scale_factor=1) for i in range(jobs)))
    allocation = get_policy("max_min_fairness_perf").solve(problem)
    keys, X = allocation.matrix(TYPES)
    assert keys == tuple(allocation.allocation) and not X.flags.writeable
    assert X.tobytes() == np.array([[allocation.share(k, t) for t in TYPES]
                                    for k in keys]).tobytes()
    assert allocation.matrix(TYPES[::-1]) is None              # over other types: none
    assert replace(allocation, allocation={}).matrix(TYPES) is None
    by_matrix, by_rows = _rows(jobs), _rows(jobs)
    install(allocation, by_matrix, dict.fromkeys(map(str, range(jobs))), TYPES, None, 0.0)
    install(Allocation("p", {k: dict(v) for k, v in allocation.allocation.items()}), by_rows,
            dict.fromkeys(map(str, range(jobs))), TYPES, None, 0.0)
    for name in ("allocation", "allocated", "tie"):
        assert getattr(by_matrix, name).tobytes() == getattr(by_rows, name).tobytes(), name


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(0, 2**31 - 1), st.sampled_from(["in order", "shuffled",
                                                                       "some"]))
def test_an_allocation_installs_the_same_whether_it_covers_every_row_or_some(jobs, seed, covers):
    """Rows of single jobs only: X covering every row in their order (written whole, the
    simulator's case), in another order, or only some rows, all install the same X, and
    rows it does not cover lose last period's X."""
    rng = np.random.default_rng(seed)
    rows = Rows(len(TYPES))
    rows.add_many([(str(i), (str(i),), 1, np.ones(len(TYPES))) for i in range(jobs)], 0.0)
    keys = [str(i) for i in range(jobs)]
    if covers == "shuffled":
        keys = [keys[i] for i in rng.permutation(jobs)]
    elif covers == "some":
        keys = [k for k in keys if rng.random() < 0.5]
    allocation = {k: MappingProxyType({t: float(rng.random()) for t in TYPES}) for k in keys}
    rows.allocation[:], rows.allocated[:] = 7.0, True      # last period's
    install(Allocation("p", allocation), rows, dict.fromkeys(map(str, range(jobs))), TYPES,
            lookups=None, seed=0.0)
    want = np.array([[allocation[k][t] for t in TYPES] if k in allocation else [0.0] * 3
                     for k in rows.keys])
    assert rows.allocation.tobytes() == want.tobytes()
    assert rows.allocated.tolist() == [k in allocation for k in rows.keys]
    assert rows.tie.tobytes() == tie_break(want).tobytes()


@given(st.integers(2, 6), st.integers(0, 2**31 - 1), st.booleans())
def test_a_closed_period_holds_the_rows_x_covered(jobs, seed, every):
    """``close_period``: the period holds, row by row, the X in force and the seconds
    received (seed removed) of the rows X covered, whether it covered all or some; each
    deficit absorbs X * elapsed - received, and received times go back to the seed."""
    rng = np.random.default_rng(seed)
    rows = _rows(jobs)
    rows.allocation[:] = rng.random(rows.allocation.shape)
    rows.allocated[:] = True if every else rng.random(len(rows)) < 0.5
    rows.received[:] = 5.0 + rng.random(rows.received.shape)
    allocation, received = rows.allocation.copy(), rows.received.copy()
    period = close_period(rows, 10.0, 30.0, TYPES, 5.0)
    mask = rows.allocated
    assert rows.deficit.tobytes() == (allocation * 20.0 - (received - 5.0)).tobytes()
    assert (rows.received == 5.0).all()
    if not mask.any():
        assert period is None
        return
    assert period.keys == tuple(k for k, m in zip(rows.keys, mask.tolist()) if m)
    assert period.allocation.tobytes() == allocation[mask].tobytes()
    assert period.received.tobytes() == (received - 5.0)[mask].tobytes()
    assert (period.start_s, period.end_s, period.types) == (10.0, 30.0, TYPES)
    rows.allocation[:] = -1.0        # the period keeps its own copy
    assert period.allocation.tobytes() == allocation[mask].tobytes()
