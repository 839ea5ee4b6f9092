"""The API's records (``gavelsched.client``, issue #27): typed and frozen; ``ClusterStatus``
gives exactly the JSON of ``status --json`` (``daemon/statusjson.py``, the dashboard's);
``JobRequest`` is the job door, every refusal one line naming the field (and the file)."""

from __future__ import annotations

import dataclasses

import pytest

from gavelsched.client import ClusterStatus, InputError, JobRequest
from gavelsched.client.request import JOB_KEYS
from gavelsched.daemon.statusjson import status_dict
from gavelsched.rpc import pb


def reply() -> pb.StatusResponse:
    return pb.StatusResponse(
        round=7, policy="max_min_fairness_mixed", round_seconds=60, now_s=5000.0,
        epoch_unix=1_800_000_000.0,
        workers=[pb.WorkerStatus(id="0", type="v100", gpus=2, alive=True, address="h:1"),
                 pb.WorkerStatus(id="1", type="k80", gpus=1, alive=False, drained=True,
                                 runs=1)],
        jobs=[pb.JobStatus(id="1", state="running", steps_done=10, total_steps=100,
                           job_type="A3C", scale_factor=2, worker_type="k80:1+v100:1",
                           gpus=2, mixed=True, allocation={"v100": 0.5, "k80": 0.0},
                           received={"v100": 0.25}, arrival_s=100.0, started_s=1400.0,
                           ended_s=-1, completion_s=-1, entity="teamA",
                           steps_per_s={"v100": 24.0}, priority_weight=2.0, startup_s=3.0),
              pb.JobStatus(id="2", state="done", steps_done=100, total_steps=100,
                           job_type="A3C", scale_factor=1, arrival_s=200.0, started_s=300.0,
                           ended_s=90_300.0, completion_s=90_300.0, min_scale_factor=1),
              pb.JobStatus(id="3", state="queued", total_steps=100, job_type="A3C",
                           scale_factor=2, arrival_s=400.0, started_s=-1, ended_s=-1,
                           completion_s=-1, reason="pending: waiting its turn")])


def test_the_records_give_exactly_the_status_json():
    status = ClusterStatus.from_pb(reply())
    assert status.to_dict() == status_dict(reply())
    assert list(status.to_dict()["jobs"][0]) == list(status_dict(reply())["jobs"][0])


def test_the_records_are_typed_and_frozen():
    status = ClusterStatus.from_pb(reply())
    running, done, queued = status.jobs
    assert (running.worker_type, running.reason, running.elapsed_s) == \
        ("k80:1+v100:1", None, 3600.0)
    assert (queued.started_s, queued.reason) == (None, "pending: waiting its turn")
    assert (done.jct_s, done.min_scale_factor, running.min_scale_factor) == (90_100.0, 1, None)
    assert running.steps_per_s == {"v100": 24.0} and running.priority_weight == 2.0
    assert status.workers[1].drained and status.workers[0].address == "h:1"
    assert status.job("3") is queued and status.job("9") is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        running.state = "done"
    with pytest.raises(TypeError):
        running.allocation["v100"] = 1.0     # type: ignore[index]


def test_a_job_request_is_checked_when_made():
    job = JobRequest(job_type="A3C", total_steps=5, priority_weight=2, entity="team-a")
    assert job.priority_weight == 2.0 and job.scale_factor == 1 and job.slo_s is None
    wire = job.to_pb()
    assert (wire.job_type, wire.total_steps, wire.priority_weight, wire.slo_s) == \
        ("A3C", 5, 2.0, 0.0)
    assert JobRequest.from_pb(wire) == job
    for kwargs, line in [({"total_steps": 0}, "total_steps has a bad value 0"),
                         ({"total_steps": 5, "scale_factor": 0}, "scale_factor has a bad value 0"),
                         ({"total_steps": 5, "slo_s": -1.0}, "slo_s has a bad value -1.0"),
                         ({"total_steps": 5, "workload": "nope"}, "workload: unknown workload"),
                         ({"total_steps": 5, "entity": "a\nb"}, "entity has a bad value")]:
        with pytest.raises(InputError) as err:
            JobRequest(job_type="A3C", **kwargs)
        assert line in str(err.value) and len(str(err.value).splitlines()) == 1


def test_a_job_file_is_read_at_the_door(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("job_type: A3C\ntotal_steps: 5\nmixed: true\nslo_s: null\n")
    assert JobRequest.from_yaml(path) == JobRequest(job_type="A3C", total_steps=5, mixed=True)
    assert JobRequest.from_dict({"job_type": "A3C", "total_steps": 5}) == \
        JobRequest(job_type="A3C", total_steps=5)
    path.write_text("job_type: A3C\ntotal_steps: 5\ncolour: red\n")
    with pytest.raises(InputError, match=rf"^{path}: unknown key 'colour'; known: "
                                         rf"{', '.join(JOB_KEYS)}$"):
        JobRequest.from_yaml(path)
    path.write_text("total_steps: 5\n")
    with pytest.raises(InputError, match=rf"^{path}: missing key 'job_type'$"):
        JobRequest.from_yaml(path)
    with pytest.raises(InputError, match="No such file"):
        JobRequest.from_yaml(tmp_path / "none.yaml")


def test_the_solve_running_is_read_from_the_reply_and_none_from_an_older_scheduler():
    solving = reply()
    solving.solving_since_s, solving.solving_jobs, solving.allocation_solve_s = 4958.0, 20_000, 3.5
    status = ClusterStatus.from_pb(solving)
    assert status.solving.to_dict() == {"since_s": 4958.0, "for_s": 42.0, "jobs": 20_000,
                                        "allocation_solve_s": 3.5}
    assert status.to_dict() == status_dict(solving)
    older = ClusterStatus.from_pb(reply())   # (its fields unset: zeros on the wire)
    assert (older.solving.since_s, older.solving.for_s, older.solving.jobs) == (None, None, 0)
