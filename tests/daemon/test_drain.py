"""``gavelsched drain``: an operator takes a worker server out of service for maintenance
(``Servers.drain``). A real scheduler and two real (emulated) worker daemons: after the
drain nothing runs on the drained server once its runs' leases end, its jobs go on on the
other one with exactly their steps, the drain survives a scheduler restart, and ``--undo``
puts the server back."""

from __future__ import annotations

import re
import shlex
import signal
import sys
import time
from types import SimpleNamespace
from urllib.request import urlopen

import pytest

from gavelsched.cli import main
from gavelsched.daemon.local import LOOPBACK_ANY, LocalCluster, kill_tree, wait_until
from gavelsched.rpc import pb, pb_grpc

from .test_round_aligned import R, Scheduler

ROUND_S = 3.0
COMMAND = f"exec {shlex.quote(sys.executable)} -m workers.workloads.steps"
JOB_TYPE = "ResNet-18 (batch size 16)"        # 20.5 steps/s on a k80


@pytest.fixture
def cli(capsys):
    def run(cluster, *args):
        code = main([*args, "--scheduler", cluster.address, "--token-file",
                     str(cluster.token_file)])
        out = capsys.readouterr()
        return SimpleNamespace(returncode=code, stdout=out.out, stderr=out.err)
    return run


def server_of(cluster: LocalCluster, index: int) -> pb.WorkerStatus:
    """The server the ``index``-th worker daemon registered as (its log says)."""
    log = (cluster.root / f"worker{index}.log").read_text(errors="replace")
    server_id = re.search(r"registered as server (\d+)", log).group(1)
    return next(w for w in cluster.status().workers if w.id == server_id)


def two_jobs_on_two_workers(cluster: LocalCluster, steps: int) -> list[str]:
    """Start the scheduler and two one-GPU k80 workers, submit two jobs of ``steps`` steps
    and wait until each server runs one; their ids."""
    cluster.start_scheduler()
    for _ in range(2):
        cluster.start_worker("k80", 1)
    wait_until(lambda: cluster.alive_workers() == 2, 60, "two workers")
    ids = [cluster.submit(pb.JobRequest(job_type=JOB_TYPE, scale_factor=1, total_steps=steps,
                                        command=COMMAND))
           for _ in range(2)]
    def started() -> bool:       # a run on each server, its process up (its first InitJob):
        status = cluster.status()  # a RunJob still in flight is not a run to drain yet
        return (all(w.runs == 1 for w in status.workers)
                and all(j.started_s >= 0 for j in status.jobs if j.id in ids))
    wait_until(started, 60, "a run up on each server")
    return ids


def test_a_drained_server_runs_nothing_new_and_stays_drained_until_undone(tmp_path, cli):
    cluster = LocalCluster(tmp_path, round_seconds=ROUND_S, token="drain-test-token",
                           policy="max_min_fairness_perf",
                           config={"metrics_listen": LOOPBACK_ANY})
    try:
        ids = two_jobs_on_two_workers(cluster, 700)
        drained = server_of(cluster, 0)

        got = cli(cluster, "drain", drained.id, "--wait", "--timeout", "60")
        assert got.returncode == 0, got.stderr
        assert "draining" in got.stdout and f"worker {drained.id} is drained" in got.stdout
        # From then on nothing runs there, round after round, while the jobs go on.
        before = {j.id: j.steps_done for j in cluster.status().jobs}
        deadline = time.monotonic() + 4 * ROUND_S
        while time.monotonic() < deadline:
            server = next(w for w in cluster.status().workers if w.id == drained.id)
            assert server.drained and server.runs == 0
            time.sleep(0.3)
        assert sum(j.steps_done for j in cluster.status().jobs) > sum(before.values())
        scraped = urlopen(f"http://127.0.0.1:{cluster.metrics_port}/metrics",
                          timeout=10).read().decode()
        assert 'gavelsched_workers_drained{worker_type="k80"} 1.0' in scraped

        # A restarted scheduler keeps the drain (its workers register again).
        kill_tree(cluster.scheduler.pid, signal.SIGTERM)
        cluster.scheduler.wait()
        cluster.start_scheduler()
        wait_until(lambda: cluster.alive_workers() == 2, 60, "the workers to register again")
        for _ in range(int(3 * ROUND_S / 0.3)):
            server = next(w for w in cluster.status().workers if w.id == drained.id)
            assert server.drained and server.runs == 0
            time.sleep(0.3)
        status = cli(cluster, "status")
        assert f"{drained.id} k80" in status.stdout and "drained" in status.stdout

        got = cli(cluster, "drain", drained.id, "--undo")
        assert got.returncode == 0 and "in service" in got.stdout
        wait_until(lambda: next(w for w in cluster.status().workers
                                if w.id == drained.id).runs > 0, 30,
                   "a job to run on the server put back")
        jobs = cluster.wait_done(ids, timeout=120)
    finally:
        cluster.stop()
    for job_id in ids:
        assert jobs[job_id].state == "done", jobs[job_id].reason
        assert jobs[job_id].steps_done == jobs[job_id].total_steps


def test_draining_an_unknown_server_exits_2(tmp_path, cli):
    cluster = LocalCluster(tmp_path, round_seconds=ROUND_S, token="drain-test-token")
    try:
        cluster.start_scheduler()
        got = cli(cluster, "drain", "7")
    finally:
        cluster.stop()
    assert got.returncode == 2
    assert got.stderr.strip().endswith("NOT_FOUND: no worker server 7")
    assert len(got.stderr.strip().splitlines()) == 1


def test_a_worker_stopped_with_sigterm_drains_itself_and_loses_no_step(tmp_path):
    """SIGTERM (a host going down for maintenance, ``systemctl stop``): the worker tells the
    scheduler, which plans nothing new on it; its runs end with their leases, exiting
    0 after their checkpoint instead of being killed; it then exits 0. Started again with
    the same work dir, it is back in service at once."""
    cluster = LocalCluster(tmp_path, round_seconds=ROUND_S, token="drain-test-token",
                           policy="max_min_fairness_perf")
    try:
        ids = two_jobs_on_two_workers(cluster, 500)
        leaving, server = cluster.workers[0], server_of(cluster, 0)
        leaving.send_signal(signal.SIGTERM)
        assert leaving.wait(timeout=2 * ROUND_S + 3.0 + 15) == 0
        log = (tmp_path / "worker0.log").read_text(errors="replace")
        after = log.split(f"worker {server.id} stopping: drained")[1]
        exits = re.findall(r"exited (-?\d+)", after)
        assert exits and set(exits) == {"0"}, after       # no run was killed
        assert f"worker {server.id} stopped: drained" in after
        # (Status reads the picture the executor republishes after the run's last report:
        # a few milliseconds after that report's answer, which the worker exited on)
        now = wait_until(lambda: next((w for w in cluster.status().workers
                                       if w.id == server.id and w.runs == 0), None), 10,
                         "the stopped worker's last run to leave the status")
        assert now.drained and now.runs == 0

        cluster.start_worker("k80", 1, work_dir=str(tmp_path / "worker0"))
        wait_until(lambda: not next(w for w in cluster.status().workers
                                    if w.id == server.id).drained, 30,
                   "the worker, started again, back in service")
        assert len(cluster.status().workers) == 2       # the same server, not a new one
        jobs = cluster.wait_done(ids, timeout=120)
    finally:
        cluster.stop()
    for job_id in ids:
        assert jobs[job_id].state == "done", jobs[job_id].reason
        assert jobs[job_id].steps_done == jobs[job_id].total_steps


@pytest.mark.parametrize("argv", [["drain", "-3"], ["drain", "99999999999999999999"],
                                  ["drain", "0", "--wait", "--timeout", "nan"]])
def test_a_bad_drain_exits_2_before_any_call(argv, capsys):
    assert main([*argv, "--scheduler", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "reach" not in err


def test_a_late_leaving_heartbeat_of_an_older_registration_drains_nothing(tmp_path):
    """A worker that restarted registers again and gets a new registration token; a
    leaving heartbeat still carrying the old one (a late message of the stopped process)
    is ignored, while the same flag with the newest token drains the server."""
    cluster = LocalCluster(tmp_path, round_seconds=ROUND_S, token="drain-test-token")
    try:
        cluster.start_scheduler()
        stub = pb_grpc.WorkerToSchedulerStub(cluster.chan)

        def register(previous: int = -1) -> pb.RegisterWorkerResponse:
            return stub.RegisterWorker(pb.RegisterWorkerRequest(
                worker_type="k80", gpus=1, address="127.0.0.1:9", hostname="w",
                previous_server_id=previous), timeout=10)

        def leaving(registration: int) -> None:
            stub.Heartbeat(pb.HeartbeatRequest(server_id=first.server_id, leaving=True,
                                               registration=registration), timeout=10)

        def drained() -> bool:
            return next(w for w in cluster.status().workers
                        if w.id == str(first.server_id)).drained

        def log() -> str:
            return (tmp_path / "scheduler.log").read_text(errors="replace")

        first = register()
        again = register(first.server_id)
        assert again.server_id == first.server_id
        assert again.registration != first.registration
        leaving(first.registration)
        wait_until(lambda: "a heartbeat of an older registration ignored" in log(),
                   10, "the stale heartbeat to be logged")
        assert not drained()
        leaving(again.registration)
        wait_until(drained, 10, "the server drained by its newest registration")
    finally:
        cluster.stop()


def test_a_launch_planned_before_a_drain_is_not_sent_to_the_drained_server(tmp_path):
    """The next round is planned ``plan_lead`` before it starts: a run it placed on a server
    drained meanwhile is not launched there when the round starts (nor when its job's last
    run has saved), else a server ``drain --wait`` reported drained ran a job again (the
    CI saw it)."""
    sched = Scheduler(tmp_path)
    try:
        first, second = sched.submit(), sched.submit()
        sched.at(1.0)                          # round 0: one job on the one GPU
        (run,) = sched.sent.runs
        sched.at(1.0 + R - sched.x.config.plan_lead)   # round 1 planned: the other job
        sched.x.roster.drain(sched.server)
        sched.at(1.0 + R)                      # round 1 starts
        sched.t = 1.0 + R + 1.0
        sched.exited(run.job_id, 100)          # round 0's run saved and exited
        sched.at(1.0 + R + 1.5)
        other = second if run.job_id == first else first
        assert [r.job_id for r in sched.sent.runs if r.job_id == other] == []
        assert sched.x.runs.on_server(sched.server) == 0    # what `drain --wait` reads
        assert sched.x.runs.not_launched["servers_down"] == 1
    finally:
        sched.close()


def test_a_placement_that_waited_for_its_save_is_not_launched_short_of_its_start_up(
        tmp_path, caplog):
    """A job moved off a drained server waits for its run there to save and exit. Its launch
    is made only if the round has its expected start-up left (or half a round); here 2 s
    are left against 4.3 s, so it is not made: logged, and counted for Prometheus
    (``gavelsched_launches_not_made_total{reason="too_late"}``), so that an operator sees
    why the GPU stood idle."""
    from prometheus_client import generate_latest

    from gavelsched.daemon.metrics import DaemonMetrics

    caplog.set_level("INFO", logger="gavelsched.daemon.runs")
    sched = Scheduler(tmp_path)
    metrics = DaemonMetrics()
    metrics.watch_launches(lambda: sched.x.runs.not_launched)     # as the server wires it
    try:
        sched.add_server(1)
        moved, short = sched.submit(), sched.submit(steps=100)
        sched.at(1.0)                                   # round 0: one job on each server
        (gone,), (kept,) = (sched.x.runs.get(job).servers for job in (moved, short))
        assert gone != kept
        sched.t = 3.0                                   # both start; the short job is done
        for job, server in ((moved, gone), (short, kept)):
            sched.x.processes.init_job(pb.InitJobRequest(
                job_id=job, round=0, rank=0, server_id=server, generation=sched.gen(job)))
        sched.x.processes.round_report(pb.RoundReportRequest(
            server_id=kept, job_id=short, steps=100, seconds=1.0, generation=sched.gen(short)))
        sched.x.roster.drain(gone)
        sched.x.startups.record("A3C", 9.0)            # a slow one beside their 2 s each
        assert sched.x.startups.expected_startup("A3C") == pytest.approx(13 / 3)
        sched.at(1.0 + R - sched.x.config.plan_lead)
        sched.at(1.0 + R)                               # round 1: the moved job waits
        assert sched.x.runs.deferred() == {moved: "v100"}
        sched.t = 1.0 + R + 8.0                         # its run saved, 2 s left
        sched.x.processes.round_report(pb.RoundReportRequest(
            server_id=gone, job_id=moved, steps=200, seconds=1.0, generation=sched.gen(moved)))
        assert sched.x.runs.get(moved) is None            # not launched
        assert (f"job {moved}: 2.0s left in round 1, less than its start-up (4.3s "
                "expected); not launched") in caplog.text
        assert sched.x.runs.not_launched == {"servers_down": 0, "backing_off": 0,
                                             "too_late": 1}
        assert ('gavelsched_launches_not_made_total{reason="too_late"} 1.0'
                in generate_latest(metrics.registry).decode())
    finally:
        sched.close()
