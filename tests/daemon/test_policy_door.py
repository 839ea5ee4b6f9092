"""A policy that schedules single-GPU jobs only (``Traits.single_gpu``: AlloX) has a larger
job refused at submission, with one line naming the policy; before, the daemon took the job
and every re-solve failed on it, so no job of the cluster ran again (a live run of every
policy found it). Likewise a policy that refuses an SLO beyond reach
(``Traits.refuses_slos_beyond_reach``: the SLO policies in strict mode) has such a job
refused at submission, where before it was taken and failed at the next re-solve."""

from __future__ import annotations

import pytest

from gavelsched.daemon.submissions import SubmissionError, check_submission
from gavelsched.rpc import pb
from policies import get_policy, policy_class, policy_names
from traces import default_table

from .test_round_aligned import Scheduler


def test_only_allox_declares_single_gpu_jobs():
    assert [n for n in policy_names() if policy_class(n).TRAITS.single_gpu] == ["allox"]


def test_the_door_refuses_a_multi_gpu_job_under_a_single_gpu_policy():
    table = default_table()
    request = pb.JobRequest(job_type="A3C", total_steps=10, scale_factor=2)
    with pytest.raises(SubmissionError) as err:
        check_submission(request, table, table.worker_types, {"v100": 4},
                         single_gpu_policy="allox")
    assert err.value.field == "scale_factor"
    assert str(err.value) == "scale_factor: policy allox schedules single-GPU jobs only, got 2"
    row = check_submission(request, table, table.worker_types, {"v100": 4})   # other policies
    assert row.spec.scale_factor == 2


def test_only_strict_slo_policies_refuse_slos_beyond_reach_at_the_door():
    options = {"min_makespan_with_budget": {"budget": 1e6}}     # (its one required option)
    strict = [n for n in policy_names()
              if get_policy(n, **options.get(n, {})).traits.refuses_slos_beyond_reach]
    assert strict == ["max_sum_throughput_normalized_by_cost_perf_SLOs"]
    assert not get_policy(strict[0], slo_mode="best_effort").traits.refuses_slos_beyond_reach
    assert get_policy(strict[0]).traits.to_dict()["refuses_slos_beyond_reach"] is True


def test_the_door_refuses_an_slo_the_job_alone_could_not_meet():
    table = default_table()
    v100, k80 = (table.solo[t][("CycleGAN", 4)] for t in ("v100", "k80"))
    slo = 1000.0

    def check(steps: float, gpus: dict, **fields):
        request = pb.JobRequest(job_type="CycleGAN", scale_factor=4, total_steps=int(steps),
                                slo_s=slo, **fields)
        return check_submission(request, table, table.worker_types, gpus, slo_policy="p")

    assert check(v100 * slo, {"v100": 4}).spec.slo_s == slo      # just within reach
    with pytest.raises(SubmissionError, match=r"^slo_s: policy p refuses an SLO beyond "
                                              r"reach: .* alone on its fastest type here, "
                                              r"v100$"):
        check(v100 * slo + 1, {"v100": 4})
    # a type with too few GPUs for the job does not count; before any server registered,
    # every type the table knows does
    with pytest.raises(SubmissionError, match="fastest type here, k80$"):
        check(k80 * slo + 1, {"v100": 2, "k80": 4})
    assert check(v100 * slo, {}).spec.slo_s == slo
    # no SLO, or another policy: taken
    request = pb.JobRequest(job_type="CycleGAN", scale_factor=4, total_steps=10**9, slo_s=1)
    assert check_submission(request, table, table.worker_types, {"v100": 4}).spec.slo_s == 1


def test_a_scheduler_under_allox_refuses_a_two_gpu_job_and_runs_the_others(tmp_path):
    s = Scheduler(tmp_path, gpus=2, policy="allox")
    try:
        with pytest.raises(SubmissionError, match="allox schedules single-GPU jobs only"):
            s.submit(scale_factor=2)
        ids = [s.submit(), s.submit()]
        s.at(1.0)
        assert sorted(r.job_id for r in s.sent.runs) == sorted(ids)
    finally:
        s.close()
