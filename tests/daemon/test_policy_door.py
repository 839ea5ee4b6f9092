"""A policy that schedules single-GPU jobs only (``Traits.single_gpu``: AlloX) has a larger
job refused at submission, with one line naming the policy; before, the daemon took the job
and every re-solve failed on it, so no job of the cluster ran again (a live run of every
policy found it)."""

from __future__ import annotations

import pytest

from gavelsched.daemon.submissions import SubmissionError, check_submission
from gavelsched.rpc import pb
from policies import policy_class, policy_names
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
