"""Usage in Prometheus (``gavelsched/daemon/metrics.py``): ``gavelsched_gpu_seconds_total``
by entity, user and type and ``gavelsched_cost_dollars_total`` by entity and user, as a
scrape of the real ``/metrics`` reads them: each ended run adds its part, and at start the
store's runs set them, so a restart does not take them back to zero."""

from __future__ import annotations

import sqlite3
import urllib.request
from dataclasses import replace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gavelsched.daemon.accounting import UsageRun, usage_report
from gavelsched.daemon.meter import usage_run
from gavelsched.daemon.metrics import DaemonMetrics
from gavelsched.daemon.store import Store

from .test_round_aligned import Scheduler

T0 = 1_800_000_000.0


def run(job, user, entity, kind, gpus, seconds, price=0.0) -> UsageRun:
    return UsageRun(job, user, entity, kind, gpus, T0, T0 + seconds, price)


def families(metrics: DaemonMetrics) -> dict[str, list]:
    """A real scrape of ``/metrics`` served by ``metrics``: each family's samples."""
    port = metrics.serve("127.0.0.1:0")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
            text = reply.read().decode()
    finally:
        metrics.close()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def scrape(metrics: DaemonMetrics) -> dict[tuple, float]:
    """The usage samples of ``/metrics``: (name, sorted labels) -> value."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for samples in families(metrics).values() for s in samples
            if s.name in ("gavelsched_gpu_seconds_total", "gavelsched_cost_dollars_total")}


def gpu_s(entity, user, kind):
    return ("gavelsched_gpu_seconds_total",
            (("entity", entity), ("type", kind), ("user", user)))


def cost(entity, user):
    return ("gavelsched_cost_dollars_total", (("entity", entity), ("user", user)))


def test_each_ended_run_adds_its_gpu_seconds_and_cost():
    metrics = DaemonMetrics()
    metrics.on_usage(run("1", "ann", "vision", "v100", 4, 1800, 3.0))    # 2 GPU-h: $6
    metrics.on_usage(run("1", "ann", "vision", "v100", 4, 900, 3.0))     # 1 GPU-h: $3
    metrics.on_usage(run("1", "ann", "vision", "k80", 2, 3600, 0.5))     # 2 GPU-h: $1
    metrics.on_usage(run("2", "bob", "", "k80", 1, 60))                  # unpriced
    assert scrape(metrics) == {
        gpu_s("vision", "ann", "v100"): 4 * 2700.0, gpu_s("vision", "ann", "k80"): 7200.0,
        gpu_s("-", "bob", "k80"): 60.0,
        cost("vision", "ann"): 10.0, cost("-", "bob"): 0.0}


def test_a_restart_goes_on_from_the_stores_totals():
    stored = [run("1", "ann", "vision", "v100", 4, 3600, 2.0),
              run("2", "bob", "nlp", "v100", 1, 7200, 2.0),
              run("3", "bob", "nlp", "k80", 2, 1800, 1.0)]
    before = DaemonMetrics()
    for r in stored:
        before.on_usage(r)
    after = DaemonMetrics()                 # a new process: the counters start empty ...
    after.restore_usage(stored)             # ... and are set from the store's rows
    assert scrape(after) == scrape(before)
    # the same totals as `gavelsched usage` by entity
    totals = scrape(after)
    for line in usage_report(stored, "entity").lines:
        assert totals[cost(line.key, "ann" if line.key == "vision" else "bob")] == line.cost
    # a second restore sets them again instead of counting the runs twice; a run that
    # ends after it adds to them
    after.restore_usage(stored)
    after.on_usage(run("4", "ann", "vision", "v100", 1, 3600, 2.0))
    got = scrape(after)
    assert got[gpu_s("vision", "ann", "v100")] == 4 * 3600.0 + 3600.0
    assert got[cost("vision", "ann")] == 8.0 + 2.0
    assert got[cost("nlp", "bob")] == 4.0 + 1.0


def test_a_start_restores_from_the_stores_sums_what_its_rows_give(tmp_path):
    """A start sums the store's runs in SQLite (``Store.usage_sums``: a row per user,
    entity, type, price and share, not one per run): the same totals as every row's; a
    damaged row is counted as SQLite reads it, never failing the start."""
    store = Store(tmp_path)
    runs = [run("1", "ann", "vision", "v100", 4, 3600, 2.0), run("2", "bob", "", "v100", 1, 7200),
            run("3", "bob", "", "k80", 2, 1800, 1.0), run("5", "ann", "vision", "v100", 1, 60, 2.0),
            replace(run("4", "ann", "vision", "v100", 1, 600, 2.0), share=0.5)]
    for generation, r in enumerate(runs):
        store.add_usage((r.job_id, generation, r.user, r.entity, r.worker_type, r.gpus,
                         r.start_unix, r.end_unix, r.price, r.share))
    every, summed = DaemonMetrics(), DaemonMetrics()
    every.restore_usage(usage_run(row) for row in store.usage())
    summed.restore_usage(usage_run(row) for row in store.usage_sums())
    assert len(store.usage_sums()) == 4 and scrape(summed) == pytest.approx(scrape(every))
    with sqlite3.connect(store.path) as db:
        db.execute("UPDATE usage SET user=? WHERE job_id='2'", (b"\xff",))
    assert len(store.usage_sums()) == 3             # (its kind's totals left out, with a warning)
    store.close()


def test_the_other_series_are_still_there():
    names = set(families(DaemonMetrics()))
    assert {"gavelsched_jobs", "gavelsched_rounds", "gavelsched_round_duration_seconds",
            "gavelsched_policy_solve_seconds", "gavelsched_gpu_seconds",
            "gavelsched_cost_dollars"} <= names


def test_jobs_that_end_are_counted_by_their_final_state(tmp_path):
    """``gavelsched_jobs_ended_total{state}``: every job that ends, as it ends (the gauge
    of jobs by state counts only those in memory: ``retired``)."""
    metrics = DaemonMetrics()
    s = Scheduler(tmp_path, metrics=metrics)
    first, second = s.submit(), s.submit()
    s.x.cancel(first)
    s.x.cancel(second)
    s.x.cancel(second)                   # (already cancelled: not counted again)
    ended = {dict(labels)["state"]: value for (name, labels), value in ended_samples(metrics)}
    assert ended == {"done": 0.0, "failed": 0.0, "cancelled": 2.0}
    s.close()


def ended_samples(metrics: DaemonMetrics) -> list[tuple[tuple, float]]:
    return [((s.name, tuple(sorted(s.labels.items()))), s.value)
            for s in families(metrics)["gavelsched_jobs_ended"]
            if s.name == "gavelsched_jobs_ended_total"]
