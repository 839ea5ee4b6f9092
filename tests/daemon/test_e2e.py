"""Crash recovery end to end, with the real worker daemon and real job processes (thesis
§5.6; issue #8 "Reliability"): ``kill -9`` of the scheduler, ``kill -9`` of a worker, and a
job whose checkpoint disappears."""

from __future__ import annotations

import re
import shutil

import pytest

from gavelsched import checkpoints

from .cluster import Cluster, wait_until


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, round_seconds=2.0, heartbeat_seconds=0.3)
    try:
        yield c
    finally:
        c.stop()


def test_scheduler_kill9_and_restart_on_the_same_state_dir(cluster):
    cluster.start_scheduler()
    cluster.start_worker("v100")
    cluster.start_worker("k80")
    wait_until(lambda: cluster.alive_workers() == 2, 60, "two workers")
    jobs = [cluster.submit(120), cluster.submit(100), cluster.submit(60)]
    wait_until(lambda: any(j.steps_done > 0 for j in cluster.jobs().values()), 60,
               "durable progress")
    before = cluster.status()
    assert not all(j.state == "done" for j in before.jobs)
    servers = sorted((w.id, w.type) for w in before.workers)
    cluster.kill9_scheduler()
    cluster.start_scheduler()
    # the workers re-register with their previous server ids
    wait_until(lambda: cluster.alive_workers() == 2, 60, "the workers to reconnect")
    assert sorted((w.id, w.type) for w in cluster.status().workers) == servers
    done = cluster.wait_done(jobs)
    for job_id in jobs:
        assert done[job_id].state == "done", done[job_id].reason
        assert done[job_id].steps_done == done[job_id].total_steps
    old = {j.id: j for j in before.jobs}
    for job_id in jobs:   # finished jobs stayed finished, progress was never lost
        assert done[job_id].steps_done >= old[job_id].steps_done


def commit_of(cluster, job_id):
    """The job's newest checkpoint commit (``gavelsched.checkpoints``)."""
    return checkpoints.latest(cluster.root / "state" / "checkpoints" / job_id)


def test_worker_kill9_resumes_elsewhere_and_a_lost_checkpoint_fails_only_its_job(cluster):
    cluster.start_scheduler()
    procs = {t: cluster.start_worker(t) for t in ("v100", "p100", "k80")}
    wait_until(lambda: cluster.alive_workers() == 3, 60, "three workers")
    keep, lose = cluster.submit(150), cluster.submit(150)

    def both_running():
        jobs = cluster.jobs()
        return all(jobs[j].state == "running" and jobs[j].steps_done > 0
                   and jobs[j].worker_type for j in (keep, lose)) and jobs

    jobs = wait_until(both_running, 60, "both jobs to checkpoint")
    hosts = {j: jobs[j].worker_type for j in (keep, lose)}
    # The machine of `lose` dies and its checkpoint is lost with it; then the machine
    # of `keep` dies mid-round.
    cluster.kill9_worker(procs[hosts[lose]])
    shutil.rmtree(commit_of(cluster, lose).path)
    cluster.kill9_worker(procs[hosts[keep]])
    checkpoint = commit_of(cluster, keep).steps
    assert checkpoint > 0

    def failed_over():
        workers = {w.type: w.alive for w in cluster.status().workers}
        return not workers[hosts[keep]] and not workers[hosts[lose]]

    wait_until(failed_over, 60, "the dead workers to be failed")
    counted = cluster.jobs()[keep].steps_done
    # Durable steps only: the scheduler never counts past the last checkpoint, so the
    # resumed run loses at most the steps since then (one round at most).
    assert 0 < counted <= checkpoint
    done = cluster.wait_done([keep, lose])
    assert done[keep].state == "done", done[keep].reason
    assert done[keep].steps_done == done[keep].total_steps
    assert done[lose].state == "failed"
    assert "checkpoint missing" in done[lose].reason
    survivor = next(t for t in procs if t not in hosts.values())
    assert {w.type: w.alive for w in cluster.status().workers}[survivor]


STEPS_KEPT = 720


def restart_as_a_round_begins(c: Cluster, log, kept: str) -> None:
    """``kill -9`` of ``c``'s scheduler just after a round began, a new one on its state,
    and a wait for ``kept`` in the scheduler's ``log`` (its runs found going on kept). (A
    run's renewal, at 95% of the round, must find the new scheduler serving: a run whose
    renewal finds none ends with its lease, as before.)"""
    def rounds() -> int:
        return len(re.findall(r"executor: round \d+:", log.read_text()))
    began = rounds()
    wait_until(lambda: rounds() > began, 30, "a round to begin")
    c.kill9_scheduler()
    c.start_scheduler()
    wait_until(lambda: kept in log.read_text(), 30, "the new scheduler to keep the runs")


def test_a_restarted_scheduler_keeps_the_run_it_finds_going_on(tmp_path):
    """``kill -9`` of the scheduler just after a round began, and a new one on the same
    state: the job's process goes on under the new scheduler (its lease extended on the
    same GPU and run generation), it is never launched again, and it finishes."""
    c = Cluster(tmp_path, round_seconds=12.0, heartbeat_seconds=0.3)
    try:
        c.start_scheduler()
        c.start_worker("v100")
        wait_until(lambda: c.alive_workers() == 1, 60, "the worker")
        # ~30 s at the v100's 24 steps/s: the kill comes ~12 s in, and the new scheduler
        # must find the run still going on a loaded machine (at 400 steps, ~17 s, a restart
        # of 4 s under load came after the run's end, and nothing was left to keep)
        job = c.submit(STEPS_KEPT)
        wait_until(lambda: c.jobs()[job].state == "running", 60, "the job to start")
        restart_as_a_round_begins(c, tmp_path / "scheduler.log", "is kept on its GPUs")
        done = c.wait_done([job])
        assert done[job].state == "done", done[job].reason
        assert done[job].steps_done == STEPS_KEPT
        worker_log = (tmp_path / "worker0.log").read_text()
        assert len(re.findall(rf"job {job} round \d+: launched", worker_log)) == 1, worker_log
        assert f"job {job}: lease extended" in worker_log
    finally:
        c.stop()


def test_a_restarted_scheduler_keeps_a_co_located_pair_it_finds_going_on(tmp_path):
    """As above under a space-sharing policy (thesis §5.3.1): two jobs paired on one GPU
    go on together under the new scheduler, each launched once, and both finish. Before,
    the new scheduler's period had lost the pair's time, and its orphans were kept only
    when alone: it ran one job alone, the other never, until the next reset event."""
    c = Cluster(tmp_path, round_seconds=12.0, heartbeat_seconds=0.3,
                policy="max_min_fairness_packed")
    try:
        c.start_scheduler()
        c.start_worker("v100")
        wait_until(lambda: c.alive_workers() == 1, 60, "the worker")
        jobs = [c.submit(STEPS_KEPT), c.submit(STEPS_KEPT)]    # (~33 s at the pair's 22/s)
        wait_until(lambda: all(c.jobs()[j].state == "running" for j in jobs), 60,
                   "the pair to start")
        restart_as_a_round_begins(c, tmp_path / "scheduler.log",
                                  "2 of the 2 runs found going on kept")
        done = c.wait_done(jobs)
        assert [(done[j].state, done[j].steps_done) for j in jobs] == \
            [("done", STEPS_KEPT)] * 2, [done[j].reason for j in jobs]
        worker_log = (tmp_path / "worker0.log").read_text()
        for job in jobs:
            assert len(re.findall(rf"job {job} round \d+: launched", worker_log)) == 1, \
                worker_log
    finally:
        c.stop()
