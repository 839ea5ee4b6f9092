"""SLOs on the live scheduler (thesis §6.4.3; ``policies/throughput.py``): in strict mode,
its default, the SLO policy admits jobs as a deadline scheduler does. A job whose SLO no
allocation meets, or which cannot be met with the SLOs planned before, is refused (failed
with the policy's one-line reason) and the others are planned; a deadline that passes
drops that SLO alone. Before, each of these failed every re-solve: the allocation in force
stayed, and the jobs that came after it got no time at all. A job whose SLO it could not
meet even alone on its fastest type is refused at submission, in one line. A cost
policy's server of a type priced nowhere is refused at registration, for the same reason.
A real executor on a hand-moved clock."""

from __future__ import annotations

import pytest

from gavelsched.daemon.submissions import SubmissionError
from gavelsched.rpc import pb
from traces import default_table

from .test_round_aligned import R, Scheduler

SLO = "max_sum_throughput_normalized_by_cost_perf_SLOs"
RATE = default_table().solo["v100"][("A3C", 1)]      # steps/s of A3C alone on a V100
STEPS = 10**6


def submit(s: Scheduler, share: float | None) -> str:
    """A3C whose SLO needs ``share`` of a V100 from now (None: no SLO)."""
    slo = 0.0 if share is None else STEPS / (share * RATE)
    return s.x.submit(pb.JobRequest(job_type="A3C", total_steps=STEPS, workload="steps",
                                    slo_s=slo))


def given(s: Scheduler, job_id: str) -> float:
    return s.x.view(s.t).shares[job_id][0].get("v100", 0.0)


def test_strict_mode_refuses_the_newest_job_whose_slo_cannot_be_met_and_plans_the_others(
        tmp_path):
    s = Scheduler(tmp_path, gpus=1, policy=SLO)
    try:
        first = submit(s, 0.6)
        s.at(1.0)
        assert given(s, first) >= 0.6 - 1e-6
        second = submit(s, 0.6)            # with the first, more than the one V100
        free = submit(s, None)
        s.at(R + 1)
        refused = s.x.jobs[second]
        assert refused.state == "failed"
        assert refused.reason.startswith(f"refused by the policy: {SLO}: SLOs cannot all be "
                                         f"met together")
        assert refused.reason.endswith(f": {second}")               # it is named
        assert given(s, first) >= 0.6 * (1 - 1e-6)                   # still its share
        assert given(s, free) > 0.0                                  # and the rest is used
    finally:
        s.close()


def test_a_job_whose_slo_is_beyond_reach_alone_is_refused_at_submission(tmp_path):
    s = Scheduler(tmp_path, gpus=1, policy=SLO)
    try:
        jobs = len(s.x.jobs)
        with pytest.raises(SubmissionError) as err:
            submit(s, 2.0)                 # twice what it makes alone on a V100
        assert str(err.value) == (
            f"slo_s: policy {SLO} refuses an SLO beyond reach: {STEPS} steps in "
            f"{STEPS / (2.0 * RATE):g} s need {2 * RATE:.4g} steps/s, and A3C x1 makes "
            f"{RATE:.4g} steps/s alone on its fastest type here, v100")
        assert len(s.x.jobs) == jobs       # nothing stored
        within = submit(s, 0.99)           # within reach: taken, and planned
        s.at(1.0)
        assert given(s, within) >= 0.99 - 1e-6
    finally:
        s.close()


def test_a_deadline_that_passes_drops_its_slo_and_holds_no_job_up(tmp_path, caplog):
    s = Scheduler(tmp_path, gpus=1, policy=SLO, min_resolve_interval_s=0.0)
    try:
        late = s.x.submit(pb.JobRequest(job_type="A3C", total_steps=int(0.5 * RATE * 2.5 * R),
                                        workload="steps", slo_s=2.5 * R))   # half a V100
        s.at(1.0)
        assert given(s, late) == pytest.approx(1.0)
        after = submit(s, None)            # an arrival: a re-solve, the SLO still met
        s.at(2 * R + 1)
        assert given(s, late) > 0.5
        third = submit(s, None)
        s.at(4 * R + 1)                    # re-solved past its deadline (25 s)
        assert f"dropping SLOs already lost: {late}" in caplog.text
        assert s.x.jobs[late].state not in ("failed", "cancelled")     # it runs on
        shares = [given(s, j) for j in (late, after, third)]
        assert sum(shares) == pytest.approx(1.0) and all(x > 0 for x in shares)
        assert "re-solve at" not in caplog.text                        # no solve failed
    finally:
        s.close()


def test_a_cost_policy_refuses_a_server_of_a_type_priced_nowhere(tmp_path):
    s = Scheduler(tmp_path, gpus=1, policy=SLO)    # v100: the catalog's price
    try:
        with pytest.raises(ValueError, match="worker_type h100 has no price > 0, and the "
                                             f"policy {SLO} prices every GPU: add prices: "
                                             "[{]h100: USD_PER_GPU_HOUR[}] to the cluster "
                                             "YAML"):
            s.x.roster.register(pb.RegisterWorkerRequest(
                worker_type="h100", gpus=1, address="127.0.0.1:2", hostname="h",
                previous_server_id=-1), s.t)
        assert len(s.x.health.servers) == 1
    finally:
        s.close()
