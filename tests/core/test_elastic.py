"""Elastic jobs (issue #10; Varuna §4, morphing): a job with ``min_scale_factor`` also
gets single-type configurations of fewer GPUs (``"v100:2"``), priced from the table or the
scaling model (issue #32), and the mixed policies, the planner and the simulator place them like
any configuration. Real cvxpy/HiGHS solves through the real core."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gavelsched.cli import main
from gavelsched.core import CoreConfig, JobSpec, RoundReport, SchedulerCore
from gavelsched.core.configurations import Configurations, elastic_counts
from gavelsched.mechanism import ClusterView
from policies import get_policy
from simulator.engine import SimulationError, simulate
from traces import ThroughputTable, TraceJob
from traces.errors import TraceError
from traces.formats import read_trace, write_trace
from traces.scaling import table_rate

TABLE = ThroughputTable(solo={
    "v100": {("net", 1): 8.0, ("net", 2): 14.4, ("net", 4): 25.0, ("net", 8): 44.0},
    "k80": {("net", 1): 2.0, ("net", 2): 3.9, ("net", 4): 7.6},
})
POLICIES = ("max_min_fairness_mixed", "finish_time_fairness_mixed")


def _core(policy: str, counts: dict[str, int]) -> SchedulerCore:
    p = get_policy(policy)
    return SchedulerCore(p, ClusterView.build(counts), TABLE,
                         CoreConfig.for_policy(p, round_seconds=100.0))


def _rounds(core: SchedulerCore, n: int):
    """``n`` rounds, each reporting its full lease; yields every round."""
    now = 0.0
    for _ in range(n):
        rnd = core.start_round(now)
        yield rnd
        now += 100.0
        core.end_round(RoundReport(steps=rnd.batch.steps,
                                   seconds=np.full(len(rnd.batch), 100.0)), now)


def test_counts_and_rates():
    """Issue #32: every count up to 8 (then multiples of 4 up to 32, then powers of two),
    priced by the scaling model (``traces/scaling.py``) where the table has no rate: step time
    linear in 1/n between the neighbouring counts, the fitted curve past the top (never
    linear extrapolation), nothing beyond twice the largest count measured."""
    assert elastic_counts(4, 2) == (2, 3)
    assert elastic_counts(8, 1) == (1, 2, 3, 4, 5, 6, 7)
    assert elastic_counts(8, 3) == (3, 4, 5, 6, 7)
    assert elastic_counts(4, 4) == ()
    assert elastic_counts(64, 1) == (1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 28, 32)
    assert elastic_counts(128, 40) == (40, 64)
    assert table_rate(TABLE, "v100", "net", 2) == 14.4                  # the table's
    t2, t4 = 1 / 14.4, 1 / 25.0
    assert table_rate(TABLE, "v100", "net", 3) == pytest.approx(
        1 / (t2 + (t4 - t2) * (1 / 3 - 1 / 2) / (1 / 4 - 1 / 2)))
    past = table_rate(TABLE, "k80", "net", 6)                           # past the top
    assert 7.6 < past < 7.6 * 6 / 4
    assert table_rate(TABLE, "k80", "net", 9) == 0.0                    # past 2 x 4
    assert table_rate(TABLE, "v100", "other", 2) == 0.0
    options = Configurations(TABLE).elastic("net", 8, 3, {"v100": 8, "k80": 3})
    names = ["v100:3", "v100:4", "v100:5", "v100:6", "v100:7", "k80:3"]
    assert {o.configuration.name: o.configuration.throughput for o in options} == \
        pytest.approx({name: table_rate(TABLE, name[:-2], "net", int(name[-1]))
                       for name in names})
    assert all(o.split is None for o in options)


def test_min_scale_factor_is_checked():
    with pytest.raises(ValueError, match=r"min_scale_factor must be between 1 and "
                                         r"scale_factor \(4\), got 5"):
        JobSpec("a", "net", 4, 10, min_scale_factor=5)
    with pytest.raises(ValueError, match="got 0"):
        JobSpec("a", "net", 4, 10, min_scale_factor=0)
    assert not JobSpec("a", "net", 4, 10, min_scale_factor=4).elastic
    assert JobSpec("a", "net", 4, 10, min_scale_factor=2).elastic


@pytest.mark.parametrize("policy", POLICIES)
def test_an_elastic_job_runs_on_two_rather_than_waiting(policy):
    """v100 x 4: a 2-GPU job and a 4-GPU job. Not elastic, the 4-GPU job and the 2-GPU job
    never run in the same round (4 + 2 > 4); elastic (min 2), both run from the first round,
    it on ``v100:2``, and no round hands out more GPUs than there are."""
    rigid = _core(policy, {"v100": 4})
    rigid.submit(JobSpec("a", "net", 2, 100_000), 0.0)
    rigid.submit(JobSpec("b", "net", 4, 100_000), 0.0)
    for rnd in _rounds(rigid, 4):
        assert len(rnd.tasks) == 1
    core = _core(policy, {"v100": 4})
    core.submit(JobSpec("a", "net", 2, 100_000), 0.0)
    core.submit(JobSpec("b", "net", 4, 100_000, min_scale_factor=2), 0.0)
    seen = []
    for i, rnd in enumerate(_rounds(core, 6)):
        gpus = rnd.batch.gpus_by_type().sum(axis=0)
        assert gpus[0] <= 4
        workers = [w for t in rnd.tasks for w in t.workers]
        assert len(workers) == len(set(workers))                # nothing held twice
        tasks = {t.key: t for t in rnd.tasks}
        if i == 0:
            assert set(tasks) == {"a", "b"}
            b = tasks["b"]
            assert b.worker_type == b.configuration == "v100:2"
            assert len(b.workers) == 2 and b.worker_types == ("v100", "v100")
            assert b.split is None and b.throughputs[0] == 14.4
            assert b.steps[0] == 1440
        seen += [(t.key, len(t.workers)) for t in rnd.tasks]
    assert ("b", 2) in seen
    assert core.remaining_steps("b") < 100_000 - 1440      # progress on the column counts


def test_a_non_elastic_job_is_unaffected():
    """A job whose minimum is its scale factor is not elastic: the same problem, columns and
    allocation as with no minimum; the mixed policy then reaches max_min_fairness_perf's level;
    under a policy that reads no configurations an elastic job runs on its scale factor."""
    def allocate(policy, b_min):
        core = _core(policy, {"v100": 4, "k80": 4})
        for job in (JobSpec("a", "net", 2, 5000), JobSpec("b", "net", 4, 9000,
                                                          min_scale_factor=b_min),
                    JobSpec("c", "net", 1, 7000)):
            core.submit(job, 0.0)
        rnd = core.start_round(0.0)
        assert all(t.configuration is None for t in rnd.tasks)
        assert core._problem(0.0).jobs[1].configurations == ()
        return rnd.resolved

    with_min, without = (allocate("max_min_fairness_mixed", m) for m in (4, None))
    assert with_min.allocation == without.allocation
    plain = allocate("max_min_fairness_perf", 4)
    assert with_min.objective == pytest.approx(plain.objective, rel=1e-6)
    core = _core("max_min_fairness", {"v100": 4})
    core.submit(JobSpec("b", "net", 4, 9000, min_scale_factor=2), 0.0)
    assert set(core.start_round(0.0).resolved.allocation["b"]) == {"v100"}


def test_trace_field_and_simulate(tmp_path):
    jobs = [TraceJob("net", 4, 3000, 0.0, min_scale_factor=2), TraceJob("net", 2, 3000, 0.0)]
    path = tmp_path / "t.jsonl"
    write_trace(path, jobs)
    assert json.loads(path.read_text().splitlines()[0])["min_scale_factor"] == 2
    assert [job for _, job in read_trace(path)] == jobs
    path.write_text('{"job_type": "net", "scale_factor": 2, "total_steps": 5, '
                    '"arrival_s": 0, "min_scale_factor": 3}\n')
    with pytest.raises(TraceError, match=r"min_scale_factor.*between 1 and scale_factor "
                                         r"\(2\), got 3"):
        read_trace(path)
    # an elastic job must still fit its scale factor on some type (the fairness
    # normaliser is its throughput there; core/configurations.py)
    with pytest.raises(SimulationError, match="cannot run"):
        simulate(jobs[:1], TABLE, {"v100": 2}, "max_min_fairness_mixed")
    # on v100 x 4 next to a 2-GPU job it finishes sooner elastic than not
    rigid = simulate([TraceJob("net", 4, 3000, 0.0), jobs[1]], TABLE, {"v100": 4},
                     "max_min_fairness_mixed")
    elastic = simulate(jobs, TABLE, {"v100": 4}, "max_min_fairness_mixed")
    assert elastic.completed == rigid.completed == 2
    assert _jct(elastic, "0") < _jct(rigid, "0")


def _jct(result, job_id: str) -> float:
    (job,) = [j for j in result.jobs if j.id == job_id]
    return job.completion_s - job.arrival_s


def test_simulate_cli_reads_the_field(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    write_trace(path, [TraceJob("Transformer (batch size 16)", 4, 2000, 0.0,
                                min_scale_factor=2),
                       TraceJob("Transformer (batch size 16)", 2, 2000, 0.0)])
    assert main(["simulate", "--trace", str(path), "--cluster", "v100=4",
                 "--policy", "max_min_fairness_mixed", "--json", str(tmp_path / "r.json")]) == 0
    jobs = json.loads((tmp_path / "r.json").read_text())["jobs"]
    assert [j["completion_s"] is not None for j in jobs] == [True, True]
