"""The real scheduler with in-test workers that speak the protocol over real sockets
(``fake_worker``): jobs run to completion with exact totals, a job kept on its worker gets
its lease extended instead of a restart (thesis §5.6), a worker that stops heartbeating
is failed and its job re-placed from its last checkpoint, and a cancelled job's run is
killed on its worker."""

from __future__ import annotations

import pytest

from gavelsched.rpc import pb, pb_grpc

from .cluster import Cluster, running, wait_until
from .fake_worker import FakeWorker


@pytest.fixture
def cluster(tmp_path):
    with running(Cluster(tmp_path, round_seconds=1.5, heartbeat_seconds=0.3)) as c:
        yield c


def add_fake(cluster, worker_type: str) -> FakeWorker:
    fake = FakeWorker(cluster.address, worker_type)
    cluster.fakes.append(fake)
    return fake


def test_fake_workers_run_jobs_to_completion_with_lease_extensions(cluster):
    v100 = add_fake(cluster, "v100")
    k80 = add_fake(cluster, "k80")
    jobs = [cluster.submit(60), cluster.submit(45)]
    done = cluster.wait_done(jobs)
    for job_id in jobs:
        assert done[job_id].state == "done", done[job_id].reason
        assert done[job_id].steps_done == done[job_id].total_steps
    runs = v100.run_jobs + k80.run_jobs
    assert {r.job_id for r in runs} == set(jobs)
    # A job that kept its worker had its lease extended: a RunJob with extended=True on
    # the same GPUs, whose lease adds the new round's steps and time to the old one.
    extended = [r for r in runs if r.lease.extended]
    assert extended
    for r in extended:
        first = next(x for x in runs if x.job_id == r.job_id and not x.lease.extended)
        assert r.lease.max_steps > first.lease.max_steps or \
            r.lease.max_steps == r.total_steps      # capped at what the job has left
        assert r.lease.max_seconds > first.lease.max_seconds
        assert list(r.gpus) == list(first.gpus)


def test_silent_worker_is_failed_and_its_job_replaced(cluster):
    v100 = add_fake(cluster, "v100")
    job = cluster.submit(80)
    wait_until(lambda: v100.run_jobs, 60, "the job to be placed on the v100")
    # let it make durable progress on the v100 first
    wait_until(lambda: cluster.jobs()[job].steps_done > 0, 60, "a checkpoint")
    v100.silence()
    held = cluster.jobs()[job].steps_done
    k80 = add_fake(cluster, "k80")
    wait_until(lambda: not {w.id: w for w in cluster.status().workers}[str(v100.server_id)]
               .alive, 60, "the silent worker to be failed")
    done = cluster.wait_done([job])[job]
    assert done.state == "done" and done.steps_done == done.total_steps
    resumed = [r for r in k80.run_jobs if r.job_id == job]
    assert resumed and resumed[0].steps_done >= held   # from its last checkpoint


def test_a_cancelled_jobs_run_is_killed_on_its_fake_worker(cluster):
    """The scheduler's KillJob stops the fake's run before its lease ends, as it stops a
    real or hollow worker's process (no step after it, no checkpoint of its own)."""
    v100 = add_fake(cluster, "v100")
    job = cluster.submit(100_000)        # hours at the v100's 24 steps/s
    wait_until(lambda: job in v100._jobs, 60, "the job to run on the fake v100")
    pb_grpc.ClientToSchedulerStub(cluster.chan).Cancel(pb.CancelRequest(job_id=job),
                                                       timeout=30)
    wait_until(lambda: any(k.job_id == job for k in v100.kills), 60, "a KillJob")
    wait_until(lambda: job not in v100._jobs, 30, "the fake's run to stop")
    assert cluster.wait_done([job])[job].state == "cancelled"


def test_multi_gpu_job_gets_ranks_and_a_rendezvous(cluster):
    big = FakeWorker(cluster.address, "v100", gpus=2)
    cluster.fakes.append(big)
    job = cluster.submit(40, scale_factor=2)
    done = cluster.wait_done([job])[job]
    assert done.state == "done" and done.steps_done == 40
    first = next(r for r in big.run_jobs if r.job_id == job)
    assert sorted(first.gpus) == [0, 1] and first.rank == 0 and first.world_size == 2
    assert first.master_addr == "127.0.0.1" and first.master_port > 0
    assert first.checkpoint_dir.endswith(f"checkpoints/{job}")


def test_space_sharing_policy_runs_pairs_to_completion(tmp_path):
    with running(Cluster(tmp_path, round_seconds=1.5, policy="max_min_fairness_packed")) as c:
        fake = FakeWorker(c.address, "v100")
        c.fakes.append(fake)
        jobs = [c.submit(40, job_type="ResNet-18 (batch size 16)"),
                c.submit(40, job_type="LM (batch size 5)")]
        done = c.wait_done(jobs)
        for job_id in jobs:
            assert done[job_id].state == "done" and done[job_id].steps_done == 40
        rounds = {}
        for r in fake.run_jobs:
            rounds.setdefault(r.round, set()).add(r.job_id)
        assert any(len(ids) == 2 for ids in rounds.values())   # co-located in a round
