"""The core's additions for the daemon (thesis §5.3.3, §5.6): restored progress on submit,
durable progress reported outside ``end_round``, and per-job online throughputs."""

from __future__ import annotations

import pytest

from gavelsched.core import CoreConfig, CoreError, JobSpec, Report, SchedulerCore
from gavelsched.mechanism import ClusterView
from policies import get_policy

R = 10.0
RATES = {"fast": {"v100": 10.0, "k80": 2.0}}


class Table:
    def get(self, worker_type, job_type, scale_factor=1):
        return RATES.get(job_type, {}).get(worker_type, 0.0)

    def pair(self, worker_type, a, b):
        return None


def make_core(counts=None):
    view = ClusterView.build(counts or {"v100": 1, "k80": 1})
    return SchedulerCore(get_policy("max_min_fairness_perf"), view, Table(),
                         CoreConfig(round_seconds=R, min_resolve_interval_s=0.0))


def test_submit_with_steps_done_starts_from_them():
    core = make_core()
    core.submit(JobSpec("a", "fast", 1, 1000), 0.0, steps_done=400)
    core.start_round(0.0)
    assert core.remaining_steps("a") == 600


def test_submit_rejects_steps_done_out_of_range():
    core = make_core()
    with pytest.raises(CoreError, match="steps_done"):
        core.submit(JobSpec("a", "fast", 1, 10), 0.0, steps_done=10)


def test_add_progress_counts_and_completes():
    core = make_core()
    core.submit(JobSpec("a", "fast", 1, 100), 0.0)
    core.start_round(0.0)
    core.end_round((), R)
    assert core.add_progress("a", 40, R).completed == ()
    assert core.remaining_steps("a") == 60
    assert core.add_progress("a", 60, R).completed == ("a",)
    assert "a" not in core.active_jobs


def test_add_progress_mid_round_then_end_round():
    core = make_core()
    core.submit(JobSpec("a", "fast", 1, 100), 0.0)
    core.submit(JobSpec("b", "fast", 1, 100), 0.0)
    rnd = core.start_round(0.0)
    assert set(rnd.batch.keys) == {"a", "b"}
    assert core.add_progress("a", 100, 1.0).completed == ("a",)
    out = core.end_round((), R)
    assert out.completed == ()
    assert core.active_jobs == ("b",)


def test_set_job_throughputs_replaces_priors_and_marks_stale():
    core = make_core()
    core.submit(JobSpec("a", "fast", 1, 10_000), 0.0)
    core.start_round(0.0)
    core.end_round((), R)
    core.set_job_throughputs("a", {"v100": 1.0}, R)
    rnd = core.start_round(R)
    assert rnd.resolved is not None  # the measurement made the allocation stale
    problem_job = core._problem(R).jobs[0]
    assert problem_job.throughputs == {"v100": 1.0, "k80": 2.0}
    # the lease follows the measured rate: floor(1.0 x R) steps on a v100
    task = rnd.tasks[0]
    assert task.steps == ((int(R * 1.0),) if task.worker_type == "v100" else (int(R * 2.0),))


def test_measured_throughputs_survive_a_new_worker_type():
    core = make_core({"v100": 1})
    core.submit(JobSpec("a", "fast", 1, 10_000), 0.0)
    core.start_round(0.0)
    core.end_round((), R)
    core.set_job_throughputs("a", {"v100": 3.0}, R)
    core.add_workers("k80", 1, R)
    assert core._problem(R).jobs[0].throughputs == {"v100": 3.0, "k80": 2.0}


def test_shares_report_allocation_and_received_fraction():
    core = make_core()
    core.submit(JobSpec("a", "fast", 1, 10_000), 0.0)
    rnd = core.start_round(0.0)
    assert len(rnd.batch) == 1
    core.end_round([Report("a", (0,), R)], R)
    x, got = core.shares(R)["a"]
    assert sum(x.values()) == pytest.approx(1.0)
    assert sum(got.values()) == pytest.approx(1.0)  # it held a worker the whole period
