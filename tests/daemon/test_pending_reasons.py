"""Why a job waits (issue #17): ``Status`` shows a derived one-line reason for a job with no
run, telling a job that no registered worker can ever hold (``pending: no worker of this
size``, ``no workers registered yet``) from one that waits for its workers to come back or
waits its turn. The pure function on a table of cases; the view and snapshot on a real
executor; and end to end on a real scheduler daemon over gRPC with in-test workers."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gavelsched.daemon.pending import NO_WORKERS, pending_reason
from gavelsched.daemon.snapshot import build_snapshot
from gavelsched.rpc import pb

from .cluster import JOB_TYPE, Cluster, running
from .fake_worker import FakeWorker
from .test_round_aligned import Scheduler

RESNET = "ResNet-50"
ALL = ("k80", "p100", "v100")


@pytest.mark.parametrize("sf, gpus, runs_on, allocation, reason", [
    (4, {}, ALL, None, NO_WORKERS),
    (1, {}, None, None, NO_WORKERS),
    (4, {"k80": (2, 2)}, ALL, None,
     "pending: no worker of this size (needs 4 GPUs of a type that runs ResNet-50; "
     "registered: k80: 2)"),
    (4, {"k80": (2, 2), "v100": (1, 0)}, None, None,
     "pending: no worker of this size (needs 4 GPUs of one worker type; registered: k80: 2, "
     "v100: 1)"),
    # a100 is big enough, but the table runs ResNet-50 on none of it: only k80 counts
    (4, {"k80": (2, 2), "a100": (8, 8)}, ALL, None,
     "pending: no worker of this size (needs 4 GPUs of a type that runs ResNet-50; "
     "registered: k80: 2)"),
    (1, {"a100": (8, 8)}, ("k80", "v100"), None,
     "pending: no registered worker type runs ResNet-50 at scale factor 1 (it runs on k80, "
     "v100; registered: a100: 8)"),
    (1, {"a100": (8, 8)}, (), None,
     "pending: no registered worker type runs ResNet-50 at scale factor 1 (in neither the "
     "throughput table nor a worker's profile; registered: a100: 8)"),
    (4, {"k80": (4, 2), "v100": (2, 2)}, ALL, None,
     "pending: waiting for workers to come back (needs 4 GPUs of a type that runs "
     "ResNet-50; alive: k80: 2 of 4, v100: 2 of 2)"),
    (1, {"k80": (1, 0)}, ALL, None,
     "pending: waiting for workers to come back (needs 1 GPU of a type that runs "
     "ResNet-50; alive: k80: 0 of 1)"),
    (2, {"k80": (2, 2)}, ALL, None, "pending: waiting to be admitted at the next round"),
    (2, {"k80": (2, 2)}, ALL, {"k80": 0.0}, "pending: waiting its turn (the current "
                                            "allocation gives it no time)"),
    (2, {"k80": (2, 2), "v100": (4, 4)}, ALL, {"v100": 0.25, "k80": 0.5, "p100": 0.0},
     "pending: waiting its turn (allocation: k80 0.50, v100 0.25)"),
])
def test_reason(sf, gpus, runs_on, allocation, reason):
    assert pending_reason(RESNET, sf, gpus, runs_on, allocation) == reason


def _reasons(snapshot) -> dict[str, str]:
    return {j.id: j.reason for j in snapshot.status().jobs}


class Bare(Scheduler):
    """``test_round_aligned.Scheduler`` with no server yet: ``add_server`` registers one."""

    def add_server(self, gpus: int = 1, worker_type: str = "v100") -> int:
        if not hasattr(self, "server"):          # the constructor's call: no server yet
            return -1
        return self.x.roster.register(pb.RegisterWorkerRequest(
            worker_type=worker_type, gpus=gpus, address="127.0.0.1:1", hostname="h",
            previous_server_id=-1), self.t).server_id


def test_the_snapshot_of_a_real_executor_tells_never_from_not_yet(tmp_path):
    """A real executor (core, policy, store) on a hand-moved clock: a 4-GPU job submitted
    before any worker, then a v100 server of 2 GPUs: it can never fit there while a 1-GPU
    job runs; with the table, the view tells a worker type that does not run it from a
    small one."""
    s = Bare(tmp_path)
    try:
        big = s.submit(scale_factor=4)
        assert _reasons(build_snapshot(s.x.view(s.t)))[big] == NO_WORKERS
        s.server = s.add_server(2)
        small = s.submit()
        s.at(1.0)
        s.at(2.0)
        reasons = _reasons(build_snapshot(s.x.view(s.t)))
        assert reasons[big] == ("pending: no worker of this size (needs 4 GPUs of a type "
                                "that runs A3C; registered: v100: 2)")
        assert reasons[small] == ""                  # it has a run
        s.add_server(8, "a100")                      # a type the table does not know
        assert _reasons(build_snapshot(s.x.view(s.t)))[big] == (
            "pending: no worker of this size (needs 4 GPUs of a type that runs A3C; "
            "registered: v100: 2)")
        # without the table, 8 a100 GPUs would look big enough: it would merely wait
        no_table = replace(s.x.view(s.t), table=None)
        assert _reasons(build_snapshot(no_table))[big].startswith("pending: waiting")
    finally:
        s.close()


def test_the_executor_hands_its_view_the_table(tmp_path):
    s = Scheduler(tmp_path)
    try:
        assert s.x.view(0.0).table is s.x.table
    finally:
        s.close()


def test_status_on_a_real_scheduler_tells_a_job_that_cannot_fit(tmp_path):
    """A 4-GPU job submitted before any worker registered waits with a reason, and keeps a
    reason that says it can never fit while only a 2-GPU k80 is registered, as 1-GPU jobs
    run to done beside it; a v100 server of 4 GPUs then takes it to done."""
    with running(Cluster(tmp_path, round_seconds=1.0, heartbeat_seconds=0.3)) as c:
        big = c.submit(30, scale_factor=4)
        assert (c.jobs()[big].state, c.jobs()[big].reason) == ("queued", NO_WORKERS)
        c.fakes.append(FakeWorker(c.address, "k80", gpus=2))
        small = [c.submit(20), c.submit(20)]
        done = c.wait_done(small)
        assert all(done[j].state == "done" and done[j].reason == "" for j in small)
        job = c.jobs()[big]
        assert job.state == "queued"
        assert job.reason.startswith("pending: no worker of this size (needs 4 GPUs of ")
        assert job.reason.endswith("; registered: k80: 2)")
        c.fakes.append(FakeWorker(c.address, "v100", gpus=4))
        assert c.wait_done([big])[big].state == "done"
        assert c.jobs()[big].reason == ""


def test_cli_status_shows_the_reason(tmp_path, capsys):
    from gavelsched.cli import main

    with running(Cluster(tmp_path, round_seconds=1.0)) as c:
        big = c.submit(30, job_type=JOB_TYPE, scale_factor=8)
        assert main(["status", "--scheduler", c.address]) == 0
        line = next(x for x in capsys.readouterr().out.splitlines()
                    if x.split()[:1] == [big])
        assert line.endswith(f"({NO_WORKERS})")
