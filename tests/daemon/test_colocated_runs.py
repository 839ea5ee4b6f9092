"""A co-located pair on the scheduler (thesis §5.3.1): each member's RunJob names the other
(the worker runs them at once and paces each at the pair's rate: ``tests/workers/daemon/
test_colocated.py``), and a pair run's steps/s is not taken for its job's throughput alone
on the type (its partner slowed it). The real executor on a hand-moved clock
(``test_round_aligned.Scheduler``) with a space-sharing policy and one GPU."""

from __future__ import annotations

import pytest

from .test_round_aligned import Scheduler


@pytest.fixture
def packed(tmp_path):
    s = Scheduler(tmp_path, restart_rule="gavel", policy="max_min_fairness_packed")
    yield s
    s.close()


def test_the_runjobs_of_a_pair_name_each_other(packed):
    a, b = packed.submit(), packed.submit()
    packed.at(1.0)
    sent = {r.job_id: r for r in packed.sent.runs}
    assert set(sent) == {a, b} and sent[a].gpus == sent[b].gpus
    assert (sent[a].colocated_job_id, sent[b].colocated_job_id) == (b, a)
    assert sent[a].colocated_job_type == sent[b].job_type == "A3C"


def test_a_job_alone_names_no_partner(tmp_path):
    sched = Scheduler(tmp_path, restart_rule="gavel")
    try:
        sched.submit()
        sched.at(1.0)
        (run,) = sched.sent.runs
        assert (run.colocated_job_id, run.colocated_job_type) == ("", "")
    finally:
        sched.close()


def test_a_pair_runs_samples_are_not_its_jobs_throughput(packed):
    a, b = packed.submit(), packed.submit()
    packed.at(1.0)
    for job in (a, b):
        packed.init(job)
    packed.t = 1.0 + 5.0
    for job in (a, b):        # a tenth of the planned rate: were it taken, the row would move
        rate = next(r.expected_steps_per_s for r in packed.sent.runs if r.job_id == job)
        assert packed.x.processes.durable_steps(job, max(2, int(0.1 * rate * 4.0)),
                                                packed.gen(job), seconds=4.0)
    assert packed.x.progress.online.measured == {}
    assert packed.store.throughputs() == {}
