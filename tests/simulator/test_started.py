"""When a job started (``Metrics.on_started``): the first round it made steps in, once it
was submitted; ``waiting`` says whether a submitted job has yet to start (the engine skips
the round's check when none has)."""

from __future__ import annotations

from simulator.metrics import Metrics


def test_a_job_starts_in_the_first_round_it_made_steps():
    metrics = Metrics("p", ("v100",))
    for job_id in "abc":
        metrics.on_arrival(job_id, "kind", 1, 0.0, None)
    assert not metrics.waiting
    metrics.on_submit("a")
    metrics.on_submit("b")
    assert metrics.waiting
    metrics.on_started(iter(["a"]), 10.0)
    metrics.on_started(iter(["a", "b"]), 20.0)
    assert not metrics.waiting
    metrics.on_started(iter(["a", "b"]), 30.0)
    assert [metrics.jobs[j].started_s for j in "abc"] == [10.0, 20.0, None]
