"""Where each job stands against its SLO's deadline (its arrival plus its SLO, thesis
§5.7.3; ``gavelsched/daemon/statusjson.py: slo_status``), as an operator sees it: in
``status --json`` and the client's records, and counted in ``gavelsched_jobs_slo{status}``.
Read from a real executor's Status with the scheduler's ETAs, and a real scrape of
``/metrics``. The ``status`` tables: ``tests/cli/test_job_views.py``."""

from __future__ import annotations

import pytest

from gavelsched.client.status import ClusterStatus
from gavelsched.daemon.forecast import Forecast
from gavelsched.daemon.metrics import DaemonMetrics
from gavelsched.daemon.snapshot import build_snapshot
from gavelsched.daemon.statusjson import SLO_STATUSES, slo_status, status_dict
from gavelsched.rpc import pb

from .test_round_aligned import Scheduler
from .test_usage_metrics import families


@pytest.mark.parametrize("state, completed, eta, now, want", [
    ("done", 100.0, None, 500.0, "met"),          # on the deadline itself: met, as the
    ("done", 100.5, None, 500.0, "missed"),       # simulator counts a JCT over the SLO
    ("running", None, 90.0, 50.0, "on_track"),
    ("running", None, 100.0, 50.0, "on_track"),
    ("queued", None, 130.0, 50.0, "at_risk"),
    ("preempted", None, None, 50.0, "unknown"),   # no ETA (yet)
    ("queued", None, 90.0, 101.0, "missed"),      # past the deadline, whatever the ETA
    ("held", None, None, 101.0, "missed"),
    ("failed", None, None, 500.0, None),          # no deadline binds an ended job
    ("cancelled", None, None, 500.0, None),
])
def test_a_jobs_standing_against_a_deadline_at_100_s(state, completed, eta, now, want):
    assert slo_status(state, 100.0, completed, eta, now) == want
    assert slo_status(state, None, completed, eta, now) is None     # no SLO


def test_the_status_and_the_metrics_say_which_slos_are_at_risk(tmp_path):
    sched = Scheduler(tmp_path)                      # one v100
    try:
        ids = [sched.x.submit(pb.JobRequest(job_type="A3C", total_steps=100_000,
                                            workload="steps", slo_s=slo))
               for slo in (1000.0, 1000.0, 2.0, 1000.0, 0.0)]     # 0: none
        on_track, at_risk, missed, unknown, none = ids
        sched.t = 5.0                                # the third's deadline (2 s) has passed
        sched.x.picture.forecasts.latest = Forecast(
            5.0, {}, {on_track: 600.0, at_risk: 1600.0, missed: 3000.0, none: 9000.0})
        view = sched.x.view(sched.t)
        reply = build_snapshot(view).response
        metrics = DaemonMetrics()
        metrics.on_state(view)
        scraped = families(metrics)
    finally:
        sched.close()
    jobs = {j["id"]: j for j in status_dict(reply)["jobs"]}
    assert {i: jobs[i]["slo_status"] for i in ids} == {
        on_track: "on_track", at_risk: "at_risk", missed: "missed", unknown: "unknown",
        none: None}
    arrival = jobs[at_risk]["arrival_s"]
    assert jobs[at_risk]["slo_s"] == 1000.0
    assert jobs[at_risk]["deadline_s"] == pytest.approx(arrival + 1000.0)
    assert jobs[at_risk]["deadline_at"].endswith("Z")
    assert (jobs[none]["slo_s"], jobs[none]["deadline_s"], jobs[none]["deadline_at"]) == (
        None, None, None)
    status = ClusterStatus.from_pb(reply)            # the client's records: the same
    assert status.job(at_risk).slo_status == "at_risk"
    assert status.to_dict()["jobs"] == status_dict(reply)["jobs"]

    counts = {s.labels["status"]: s.value for s in scraped["gavelsched_jobs_slo"]}
    assert counts == {"missed": 1.0, "at_risk": 1.0, "unknown": 1.0, "on_track": 1.0,
                      "met": 0.0}
    assert set(counts) == set(SLO_STATUSES)
