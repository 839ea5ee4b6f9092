"""What the scheduler credits each task of the round in flight at the next plan
(``RunTable.held_s``; thesis §5.5: a job's priority is its allocation over the time it
received): the round, start-up included, as the simulator counts it; nothing while its run
has not started up and waits on its GPU for another job's run that overran.

The real executor on a hand-moved clock (``test_round_aligned.Scheduler``), one GPU, Gavel's
restart rule (every round dealt afresh by priority)."""

from __future__ import annotations

import pytest

from .test_round_aligned import R, Scheduler


@pytest.fixture
def gavel(tmp_path):
    s = Scheduler(tmp_path, restart_rule="gavel")
    yield s
    s.close()


def _credits(sched, rounds: range, keys) -> list[dict[str, float]]:
    """Per round in ``rounds``: what ``held_s`` gives each of ``keys`` just before that
    round's plan; each round is then planned and started."""
    lead = sched.x.config.plan_lead
    got = []
    for k in rounds:
        sched.t = 1.0 + k * R - lead - 0.01
        got.append(dict(zip(keys, sched.x.runs.held_s(list(keys)))))
        sched.at(1.0 + k * R - lead)
        sched.at(1.0 + k * R)
    return got


def test_a_run_extended_while_it_waits_for_the_gpu_is_credited_nothing(gavel):
    """Round 0's run never exits (its save overran), so round 1's fresh run of another job
    waits on the worker, and round 2 extends it while it still waits. Neither round is
    credited to it, so it keeps the GPU's turn until it runs, where crediting the
    extension gave the turn to the third job before the second ever ran (the test failure
    of ``test_slow_startup``, under load)."""
    jobs = [gavel.submit() for _ in range(3)]
    gavel.at(1.0)
    (first,) = gavel.sent.runs
    gavel.init(first.job_id)                       # it starts up, then never exits
    credits = _credits(gavel, range(1, 5), jobs)
    second = next(r.job_id for r in gavel.sent.runs if r.job_id != first.job_id)
    waits = [r for r in gavel.sent.runs if r.job_id == second]
    assert [r.lease.extended for r in waits] == [False, True, True, True]
    assert credits[0][first.job_id] == R           # it held the GPU in round 0
    assert all(c[second] == 0.0 for c in credits)  # queued behind it in rounds 1-3
    assert {r.job_id for r in gavel.sent.runs} == {first.job_id, second}


def test_a_waiting_run_is_credited_once_it_has_started_up(gavel):
    """The same, but the first run exits in round 2 and the second starts up: round 2,
    in which it ran, is credited to it."""
    jobs = [gavel.submit() for _ in range(3)]
    gavel.at(1.0)
    (first,) = gavel.sent.runs
    gavel.init(first.job_id)
    _credits(gavel, range(1, 3), jobs)             # rounds 1 and 2: the second job waits
    second = gavel.sent.runs[-1].job_id
    assert second != first.job_id and gavel.sent.runs[-1].lease.extended
    gavel.t = 1.0 + 2 * R + 1.0
    gavel.exited(first.job_id, 100)                # the GPU is freed
    gavel.t = 1.0 + 2 * R + 3.0
    gavel.init(second)
    (credit,) = _credits(gavel, range(3, 4), jobs)
    assert credit[second] == R


def test_a_fresh_pair_on_one_gpu_is_credited_its_round(tmp_path):
    """Two jobs that share a GPU (a space-sharing policy) are one task on the same worker:
    neither waits for the other, and their first round is credited (it was not: each
    counted the other as the run it waited for)."""
    sched = Scheduler(tmp_path, restart_rule="gavel", policy="max_min_fairness_packed")
    try:
        a, b = sched.submit(), sched.submit()
        sched.at(1.0)
        assert sorted(r.job_id for r in sched.sent.runs) == sorted([a, b])
        key = "+".join(sorted([a, b]))
        assert _credits(sched, range(1, 2), [key]) == [{key: R}]
    finally:
        sched.close()
