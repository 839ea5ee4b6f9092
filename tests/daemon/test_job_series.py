"""The per-job Prometheus series, capped (``gavelsched/daemon/metrics.py``, the cluster
YAML's ``metrics_job_series``; issue #30): at most that many jobs have series of their own,
those holding GPUs first, then the others in submission order, and
``gavelsched_job_series_omitted`` counts the rest. Read from the real executor's picture
and a real scrape of ``/metrics``."""

from __future__ import annotations

from gavelsched.daemon.config import METRICS_JOB_SERIES, load_config
from gavelsched.daemon.forecast import Forecast
from gavelsched.daemon.metrics import DaemonMetrics

from .test_round_aligned import Scheduler
from .test_usage_metrics import families


def jobs_of(samples) -> list[str]:
    return sorted({s.labels["job"] for s in samples}, key=lambda j: int(j))


def test_past_the_cap_the_jobs_holding_gpus_keep_their_series(tmp_path):
    s = Scheduler(tmp_path)               # one GPU: one of five jobs runs
    try:
        jobs = [s.submit() for _ in range(5)]
        s.at(1.0)
        (running,) = [r.job_id for r in s.sent.runs]
        view = s.x.picture.view(s.t)
        assert len(view.shares) == 5
        metrics = DaemonMetrics(job_series=2)
        metrics.on_state(view)
        later = [j for j in jobs if j != running]
        metrics.watch_forecasts(lambda: Forecast(s.t, {j: 100.0 for j in later},
                                                 {j: 200.0 for j in jobs}), 0.0)
        got = families(metrics)
    finally:
        s.close()
    keep = sorted([running, later[0]], key=int)
    assert jobs_of(got["gavelsched_job_allocation"]) == keep
    assert jobs_of(got["gavelsched_job_received_share"]) == keep
    assert jobs_of(got["gavelsched_job_gpus"]) == [running]
    assert jobs_of(got["gavelsched_job_eta_finish_timestamp_seconds"]) == keep
    assert jobs_of(got["gavelsched_job_eta_start_timestamp_seconds"]) == later[:2]
    assert [x.value for x in got["gavelsched_job_series_omitted"]] == [3.0]


def test_under_the_cap_every_job_has_its_series(tmp_path):
    s = Scheduler(tmp_path)
    try:
        jobs = [s.submit() for _ in range(3)]
        s.at(1.0)
        metrics = DaemonMetrics()
        metrics.on_state(s.x.picture.view(s.t))
        got = families(metrics)
    finally:
        s.close()
    assert jobs_of(got["gavelsched_job_allocation"]) == jobs
    assert [x.value for x in got["gavelsched_job_series_omitted"]] == [0.0]


def test_the_cap_is_a_key_of_the_cluster_yaml(tmp_path):
    base = {"listen": "127.0.0.1:0", "policy": "max_min_fairness_perf",
            "round_seconds": 30, "state_dir": str(tmp_path)}
    path = tmp_path / "cluster.yaml"
    path.write_text("\n".join(f"{k}: {v}" for k, v in base.items()))
    assert load_config(path).metrics_job_series == METRICS_JOB_SERIES
    path.write_text(path.read_text() + "\nmetrics_job_series: 0")
    assert load_config(path).metrics_job_series == 0


def test_a_cap_of_zero_leaves_every_job_out(tmp_path):
    s = Scheduler(tmp_path)
    try:
        jobs = [s.submit() for _ in range(3)]
        s.at(1.0)
        metrics = DaemonMetrics(job_series=0)
        metrics.on_state(s.x.picture.view(s.t))
        got = families(metrics)
    finally:
        s.close()
    for name in ("gavelsched_job_allocation", "gavelsched_job_received_share",
                 "gavelsched_job_gpus"):
        assert got.get(name, []) == [], name
    assert [x.value for x in got["gavelsched_job_series_omitted"]] == [float(len(jobs))]
    assert sum(x.value for x in got["gavelsched_jobs"]) == len(jobs)   # (by state: still there)
