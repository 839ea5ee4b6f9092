"""A data-parallel job over two worker daemons loses one of them (``kill -9`` of the machine,
mid-round; thesis §5.6, issue #8 "Reliability"). The surviving rank, blocked on its dead peer
in gloo, must not hang forever or fail the job: it ends (gloo's error, or the worker's kill at
the lease's end), and the job resumes from its checkpoint on the GPUs left and finishes with
exactly its total steps. Real scheduler, real worker daemons, real torch ranks; and, on the
executor's hand-moved clock, the rule that tells a rank failed by its dead peer (the job goes
on) from a rank failed on its own (the job fails)."""

from __future__ import annotations

from gavelsched.rpc import pb

from .cluster import Cluster, wait_until
from .test_round_aligned import Scheduler

JOB_TYPE = "Recommendation (batch size 512)"   # v100, scale factor 2: 79.8 steps/s (x 0.2)


def hosts_of(cluster: Cluster, job_id: str, workers: int) -> list[int]:
    """The worker daemons (by start order) that have run a process of ``job_id``."""
    return [n for n in range(workers)
            if (cluster.root / f"worker{n}" / "logs" / job_id).is_dir()]


def two_server_job(tmp_path):
    """A scale-factor-2 job placed on two 1-GPU servers of an executor on a hand-moved clock
    (heartbeats every 1 s: a server silent for 3 s is failed)."""
    s = Scheduler(tmp_path, heartbeat_seconds=1.0)
    other = s.add_server()
    job = s.submit(scale_factor=2)
    s.at(1.0)
    assert {r.job_id for r in s.sent.runs} == {job} and len(s.sent.runs) == 2
    return s, other, job


def beat(s: Scheduler, *servers: int) -> None:
    for server in servers:
        s.x.roster.heartbeat(server, s.t, {})


def failed_rank(s: Scheduler, server: int, job: str) -> None:
    s.x.processes.round_report(pb.RoundReportRequest(
        server_id=server, job_id=job, steps=-1, exit_code=1, failed=True, generation=s.gen(job),
        reason="RuntimeError: Connection closed by peer"))


def test_a_rank_that_failed_because_its_peer_died_does_not_fail_the_job(tmp_path):
    s, other, job = two_server_job(tmp_path)
    s.t = 2.0
    beat(s, s.server, other)
    failed_rank(s, s.server, job)             # the survivor exits first: gloo's error
    s.at(2.5)
    assert s.x.jobs[job].state != "failed"
    for t in (3.0, 4.0, 5.0, 6.0, 7.0):       # the peer's server stays silent
        s.t = t
        beat(s, s.server)
        s.at(t)
    assert not s.x.servers[other].alive
    assert s.x.jobs[job].state == "queued" and s.x.jobs[job].reason is None
    s.close()


def test_a_rank_that_failed_with_its_peers_alive_fails_the_job(tmp_path):
    s, other, job = two_server_job(tmp_path)
    s.t = 2.0
    failed_rank(s, s.server, job)
    for t in (3.0, 4.0, 5.0, 6.0, 7.0):
        s.t = t
        beat(s, s.server, other)
        s.at(t)
    assert s.x.jobs[job].state == "failed"
    assert s.x.jobs[job].reason == "RuntimeError: Connection closed by peer"
    assert job in s.sent.kills                # its other rank is killed
    s.close()


def test_a_dead_peer_ends_the_surviving_rank_and_the_job_resumes_to_its_total(tmp_path):
    # heartbeats of 1 s: the dead worker is noticed ~3 s after the kill, usually after the
    # survivor's own failed exit has reached the scheduler (the case that must not fail
    # the job)
    cluster = Cluster(tmp_path, round_seconds=8.0, heartbeat_seconds=1.0)
    try:
        cluster.start_scheduler()
        procs = [cluster.start_worker("v100", emulation_speed=0.2) for _ in range(3)]
        wait_until(lambda: cluster.alive_workers() == 3, 60, "three workers")
        # About 5 rounds of work (A3C: 24 steps/s on a v100, x 0.2 emulated; 8 s rounds):
        # the first checkpoint comes a round in, well before the end, even when a loaded
        # machine's start-up eats most of a round (it once finished before the kill at 120).
        total = 200
        job = cluster.submit(total, job_type=JOB_TYPE, scale_factor=2, workload="recoder")

        wait_until(lambda: cluster.jobs()[job].steps_done > 0, 120, "a first checkpoint")
        first = hosts_of(cluster, job, 3)
        assert len(first) == 2, f"a scale-factor-2 job on two 1-GPU servers, ran on {first}"
        dead, survivor = first[1], first[0]
        cluster.kill9_worker(procs[dead])
        held = cluster.jobs()[job].steps_done
        assert held < total, "the job finished before its worker was killed"

        wait_until(lambda: not all(w.alive for w in cluster.status().workers), 60,
                   "the dead worker to be failed")
        done = cluster.wait_done([job], timeout=180)[job]
        assert done.state == "done", done.reason
        assert done.steps_done == done.total_steps == total
        assert done.steps_done >= held
        # the survivor's process ended and the job ran again on the GPUs left
        log = (cluster.root / f"worker{survivor}.log").read_text()
        assert log.count(f"job {job} round") >= 2 and "exited" in log
        assert set(hosts_of(cluster, job, 3)) == {0, 1, 2}
    finally:
        cluster.stop()
