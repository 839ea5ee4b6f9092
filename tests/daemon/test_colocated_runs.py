"""A co-located pair on the scheduler (thesis §5.3.1): each member's RunJob names the other
(the worker runs them at once and paces each at the pair's rate: ``tests/workers/daemon/
test_colocated.py``), and a pair run's steps/s is not taken for its job's throughput alone
on the type (its partner slowed it). The real executor on a hand-moved clock
(``test_round_aligned.Scheduler``) with a space-sharing policy and one GPU."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from gavelsched.core import Period
from gavelsched.daemon.accounting import PAIR_SHARE
from gavelsched.daemon.snapshot import build_snapshot
from gavelsched.daemon.view import Shares
from gavelsched.rpc import pb
from policies import pair_key

from .test_restart_keeps_runs import Restarted
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


def test_a_pair_runs_samples_plan_the_pair_not_its_jobs(packed):
    a, b = packed.submit(), packed.submit()
    packed.at(1.0)
    for job in (a, b):
        packed.init(job)
    packed.t = 1.0 + 5.0
    made = {}
    for job in (a, b):        # a tenth of the planned rate: were it taken, the row would move
        rate = next(r.expected_steps_per_s for r in packed.sent.runs if r.job_id == job)
        made[job] = max(2, int(0.1 * rate * 4.0))
        assert packed.x.processes.durable_steps(job, made[job], packed.gen(job), seconds=4.0)
    assert packed.x.progress.online.measured == {}
    assert packed.store.throughputs() == {}
    # the pair's own rates (thesis §5.3.3), each run's first sample over the 5 s since its
    # InitJob: before, the daemon planned every pair on the table's whatever its runs made
    assert packed.x.core.pair_throughputs(pair_key(a, b)) == {
        "v100": pytest.approx((made[a] / 5.0, made[b] / 5.0))}


def test_a_restarted_scheduler_plans_a_pair_on_what_it_was_measured_at(tmp_path):
    first = Scheduler(tmp_path, restart_rule="gavel", policy="max_min_fairness_packed")
    a, b = first.submit(), first.submit()
    first.at(1.0)
    for job in (a, b):
        first.init(job)
    first.t = 6.0
    for job in (a, b):           # 8 steps in the 5 s since InitJob: 1.6 steps/s each
        assert first.x.processes.durable_steps(job, 8, first.gen(job), seconds=4.0)
    assert first.x.core.pair_throughputs(pair_key(a, b)) == {"v100": (1.6, 1.6)}
    first.close()
    again = Scheduler(tmp_path, restart_rule="gavel", policy="max_min_fairness_packed", t=7.0)
    try:            # (admitted as it starts, with the allocation period it takes on)
        assert again.x.core.pair_throughputs(pair_key(a, b)) == {"v100": (1.6, 1.6)}
        again.at(8.0)
        assert again.x.core.pair_throughputs(pair_key(a, b)) == {"v100": (1.6, 1.6)}
    finally:
        again.close()


def _restarted_with_a_pair(tmp_path):
    """A scheduler under the packed policy that placed jobs a and b as a pair on its one
    GPU, then a new one on its state at 7 s: (the new one, the old runs, a, b, the pair's
    X before the restart)."""
    first = Scheduler(tmp_path, restart_rule="gavel", policy="max_min_fairness_packed")
    a, b = first.submit(), first.submit()
    first.at(1.0)
    runs = list(first.sent.runs)
    for run in runs:
        first.init(run.job_id)
    paired = first.x.core.allocation.share(pair_key(a, b), "v100")
    assert paired > 0.99
    first.close()
    return Restarted(tmp_path, 7.0), runs, first.server, a, b, paired


def _listed(runs):
    return [pb.RunningJob(job_id=run.job_id, generation=run.generation, round=run.round,
                          gpus=list(run.gpus)) for run in runs]


def test_a_restarted_scheduler_keeps_a_pairs_time_and_its_runs_in_place(tmp_path):
    # before, the period file kept single jobs only: the restarted scheduler's X gave the
    # pair's jobs 0 alone and the pair nothing, its period was not stale, and it ran job
    # 0 alone (job 1 never) until the next reset event; and an orphan was kept in place
    # only when it ran alone
    again, runs, server, a, b, paired = _restarted_with_a_pair(tmp_path)
    try:
        assert again.x.core.allocation.share(pair_key(a, b), "v100") == paired
        assert not again.x.core.period_state().stale
        again.register(server, 1, _listed(runs))
        again.at(8.0)
        assert again.x.driver.in_flight.resolved is None
        assert again.x.driver.in_flight.batch.keys == (pair_key(a, b),)
        sent = {r.job_id: r for r in again.sent.runs}          # (the pair's extensions)
        assert set(sent) == {a, b} and again.sent.kills == []
        assert (sent[a].colocated_job_id, sent[b].colocated_job_id) == (b, a)
        for run in runs:                  # each member's renewal: its run goes on
            assert sent[run.job_id].generation == run.generation
            assert again.renew(run.job_id, run.generation, run.round, 10, 5.0).round >= 0
    finally:
        again.close()


def test_a_restarted_pair_whose_runs_are_not_both_found_is_launched_again_together(tmp_path):
    again, runs, server, a, b, _ = _restarted_with_a_pair(tmp_path)
    try:
        again.register(server, 1, _listed(runs[:1]))     # (one run only: not kept)
        again.at(8.0)
        found = runs[0]
        assert again.renew(found.job_id, found.generation, found.round, 10, 5.0).round < 0
        again.x.processes.round_report(pb.RoundReportRequest(
            server_id=server, job_id=found.job_id, steps=10, seconds=1.0,
            generation=found.generation))
        again.at(8.5)
        sent = {r.job_id: r for r in again.sent.runs}
        assert set(sent) == {a, b} and sent[a].gpus == sent[b].gpus
        assert (sent[a].colocated_job_id, sent[b].colocated_job_id) == (b, a)
    finally:
        again.close()


def test_a_pair_on_one_gpu_shows_it_for_both_jobs_and_counts_it_once(packed):
    # before, the pair's second job showed 0/1 GPUs and no allocation while it ran: the
    # GPU went to one run only, and a pair's time to neither job
    a, b = packed.submit(), packed.submit()
    packed.at(1.0)
    for job in (a, b):
        packed.init(job)
    view = packed.x.view(packed.x.now())
    assert [(view.runs[j].gpus, view.runs[j].shared_with) for j in (a, b)] == [(1, b), (1, a)]
    assert "GPUs 1 busy of 1" in view.summary()
    status = build_snapshot(view).status()
    shown = {j.id: j for j in status.jobs}
    assert [(shown[j].gpus, shown[j].shared_with) for j in (a, b)] == [(1, b), (1, a)]
    allocation = packed.x.core.allocation
    paired = allocation.share(pair_key(a, b), "v100")
    assert paired > 0
    for job in (a, b):                   # its time in the pair is its own
        x, _ = view.shares[job]
        assert x["v100"] == pytest.approx(allocation.share(job, "v100") + paired)


def test_the_last_periods_received_shares_count_a_pairs_time_for_both_jobs():
    # while a new period is younger than a round, status shows the last closed one's
    core = SimpleNamespace(shares=lambda now: {"a": ({}, {}), "b": ({}, {})},
                           counted_since_s=9.0, config=SimpleNamespace(round_seconds=5.0))
    shares = Shares(core)
    shares.closed([Period(0.0, 10.0, ("v100",), ("a", "b", "a+b"),
                          np.array([[0.2], [0.0], [0.8]]), np.array([[2.0], [0.0], [8.0]]))])
    assert shares.at(10.0) == {"a": ({}, {"v100": 1.0}), "b": ({}, {"v100": 0.8})}


def test_each_job_of_a_pair_is_metered_half_of_the_gpus_time(packed):
    a, b = packed.submit(), packed.submit()
    packed.at(1.0)
    for job in (a, b):
        packed.init(job)
    packed.t = 6.0
    for job in (a, b):
        packed.exited(job, 50)
    rows = {row[0]: row for row in packed.store.usage()}
    assert {job: rows[job][-1] for job in (a, b)} == {a: PAIR_SHARE, b: PAIR_SHARE}
    report = packed.x.calls.usage(pb.UsageRequest(by="user"))
    assert report.gpu_hours == pytest.approx(5.0 / 3600, rel=0.05)   # one GPU for 5 s
