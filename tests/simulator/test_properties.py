"""Whole-run invariants on random small traces."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator import PriceTrace, PriceTraceError, SimConfig, simulate
from traces import ThroughputTable, TraceJob

TABLE = ThroughputTable(solo={
    "v100": {("a", 1): 10.0, ("b", 1): 4.0, ("a", 2): 18.0, ("b", 2): 7.0, ("a", 4): 30.0},
    "p100": {("a", 1): 5.0, ("b", 1): 3.5, ("a", 2): 9.0, ("b", 2): 6.0, ("a", 4): 16.0},
    "k80": {("a", 1): 2.0, ("b", 1): 3.0, ("a", 2): 3.5, ("b", 2): 5.0},
})


@st.composite
def traces(draw):
    n = draw(st.integers(1, 8))
    jobs, t = [], 0.0
    for _ in range(n):
        t += draw(st.sampled_from([0.0, 10.0, 400.0, 3000.0]))
        kind = draw(st.sampled_from(["a", "b"]))
        sf = draw(st.sampled_from([1, 1, 2] + ([4] if kind == "a" else [])))
        jobs.append(TraceJob(kind, sf, draw(st.integers(1, 40_000)), t))
    return jobs


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces(), st.sampled_from(["max_min_fairness", "max_min_fairness_perf", "fifo"]),
       st.sampled_from([1, 2]))
def test_every_job_finishes_after_it_arrives_and_capacity_holds(jobs, policy, per_server):
    cluster = {"v100": 4, "p100": 2, "k80": 2}
    r = simulate(jobs, TABLE, cluster, policy, gpus_per_server=per_server,
                 sim=SimConfig(record_timeline=True))
    assert r.completed == len(jobs)
    for job, rec in zip(jobs, r.jobs):
        assert rec.completion_s >= job.arrival_s
        # No job beats running alone on its fastest type from the moment it arrived.
        fastest = max(TABLE.get(t, job.job_type, job.scale_factor) for t in cluster)
        assert rec.jct_s >= job.total_steps / fastest - 1e-6
    for busy in r.timeline.busy:
        assert all(b <= cluster[t] for b, t in zip(busy, r.timeline.types))
    assert 0.0 <= r.utilization <= 1.0 + 1e-9


def test_price_trace_files(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"v100": [[0, 2.0], [3600, 3.0]], "k80": [[100, 0.5]]}))
    trace = PriceTrace.load(path)
    assert trace.at(0.0, {"k80": 0.4}) == {"v100": 2.0, "k80": 0.4}
    assert trace.at(4000.0) == {"v100": 3.0, "k80": 0.5}
    bad = tmp_path / "bad.json"
    bad.write_text('{"v100": [[0, "cheap"]]}')
    with pytest.raises(PriceTraceError, match="v100"):
        PriceTrace.load(bad)
