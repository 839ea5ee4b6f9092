"""The plan's re-solve runs off the executor thread (``gavelsched/daemon/solver.py``). At
20,000 jobs some policies solve for a minute; on the executor thread that held every call
but heartbeats as long: a Submit past its deadline, the checkpoints' ReportSteps. Here a
real scheduler daemon, a worker speaking the real protocol, and a policy whose solve waits
until the test lets it go (a solve of minutes, without the minutes)."""

from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from dataclasses import replace

import pytest
import yaml

from gavelsched.daemon.config import load_config
from gavelsched.daemon.server import SchedulerDaemon
from gavelsched.daemon.statusjson import solving_dict
from gavelsched.rpc import pb, pb_grpc
from gavelsched.rpc.security import channel

from .cluster import JOB_TYPE, wait_until
from .fake_worker import FakeWorker

ROUND_S = 2.0


class Held:
    """The daemon's policy, whose solves wait for ``release`` once ``hold`` is set; with
    ``solve_s``, each allocation says its solve took that long (a slow policy)."""

    def __init__(self, policy) -> None:
        self.policy = policy
        self.solve_s: float | None = None
        self.hold, self.release, self.started = (threading.Event(), threading.Event(),
                                                 threading.Event())

    def __getattr__(self, name):
        return getattr(self.policy, name)

    def solve(self, problem):
        if self.hold.is_set():
            self.started.set()
            assert self.release.wait(120), "the test never released the solve"
        allocation = self.policy.solve(problem)
        return allocation if self.solve_s is None else replace(allocation, solve_s=self.solve_s)


@contextmanager
def _cluster(tmp_path, gpus: int, solve_s: float | None = None, round_s: float = ROUND_S):
    """A real scheduler daemon whose policy is ``Held`` (with ``solve_s``), with rounds of
    ``round_s``, and one worker of ``gpus`` V100s speaking the real protocol: (the
    executor, the policy, a client). The solve is released and both are stopped after."""
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({
        "listen": "127.0.0.1:0", "policy": "max_min_fairness_perf",
        "round_seconds": round_s, "state_dir": str(tmp_path / "state"), "eta": False,
        "min_resolve_interval_s": 0.0, "heartbeat_seconds": 0.3}))
    daemon = SchedulerDaemon(load_config(str(path)))
    held = Held(daemon.executor.core.policy)
    held.solve_s = solve_s
    daemon.executor.core.policy = held     # (before the executor thread starts)
    daemon.start()
    worker = None
    try:
        address = f"127.0.0.1:{daemon.port}"
        worker = FakeWorker(address, "v100", gpus=gpus)
        yield daemon.executor, held, pb_grpc.ClientToSchedulerStub(channel(address))
    finally:
        held.release.set()
        try:
            if worker is not None:
                worker.stop()
        finally:        # (a worker that fails to stop must not leave the daemon running)
            daemon.stop()


def _submit(client, steps: int = 10**6) -> str:
    return client.Submit(pb.JobRequest(job_type=JOB_TYPE, total_steps=steps,
                                       workload="steps"), timeout=10).job_id


def _states(client) -> dict[str, str]:
    return {j.id: j.state for j in client.Status(pb.StatusRequest(), timeout=10).jobs}


def test_calls_are_served_while_the_plan_s_solve_runs(tmp_path):
    with _cluster(tmp_path, gpus=2) as (_, held, client):
        held.hold.set()
        first = _submit(client)
        assert held.started.wait(60)                 # the first plan's solve, held
        second = _submit(client)                     # answered by the executor meanwhile
        assert _states(client) == {first: "queued", second: "queued"}
        assert not held.release.is_set()             # ... while the solve was still held
        held.hold.clear()
        held.release.set()
        wait_until(lambda: _states(client)[first] == "running", 60, "the first job to run")
        wait_until(lambda: _states(client)[second] == "running", 60,
                   "the second job to run (the next re-solve)")


def test_a_solve_still_running_at_the_boundary_does_not_hold_the_rounds(tmp_path, caplog):
    """The round is planned on the allocation in force and starts at its boundary; the
    solve's allocation is installed when it comes, for the next plan."""
    with _cluster(tmp_path, gpus=1) as (x, held, client):
        first = _submit(client)
        wait_until(lambda: _states(client)[first] == "running", 60, "the first job to run")
        held.hold.set()
        with caplog.at_level(logging.WARNING, logger="gavelsched.daemon.solver"):
            second = _submit(client)                 # stale: the next plan re-solves
            assert held.started.wait(60)
            began = x.call(lambda: x.round_index, timeout=10)
            wait_until(lambda: x.call(lambda: x.round_index, timeout=10) >= began + 2, 60,
                       "two rounds to begin")
            assert not held.release.is_set()         # two rounds began while it was held
        assert "re-solve still running" in caplog.text
        assert x.metrics.plans_waited._value.get() >= 1
        assert x.call(lambda: second not in x.core.allocation.allocation, timeout=10)
        held.hold.clear()
        held.release.set()
        wait_until(lambda: x.call(lambda: second in x.core.allocation.allocation,
                                  timeout=10), 60, "the late allocation")
        wait_until(lambda: _states(client)[second] == "running", 60, "the second job to run")


def test_status_and_metrics_show_the_solve_running(tmp_path):
    """An operator sees a solve at work: ``Status`` (and so ``status``, ``--json`` and the
    dashboard) gives since when and for how many jobs, ``/metrics`` its start; once it
    settles, none is running and the allocation's solve seconds are given."""
    with _cluster(tmp_path, gpus=2) as (x, held, client):
        held.hold.set()
        _submit(client)
        _submit(client)
        assert held.started.wait(60)
        reply = lambda: client.Status(pb.StatusRequest(), timeout=10)
        wait_until(lambda: reply().solving_jobs > 0, 60, "Status to show the solve")
        running = reply()
        assert 0 <= running.solving_since_s <= running.now_s
        assert running.allocation_solve_s < 0            # (the first: none in force yet)
        assert solving_dict(running)["for_s"] == running.now_s - running.solving_since_s
        assert x.metrics.solve_start._value.get() == running.epoch_unix + running.solving_since_s
        assert not held.release.is_set()
        held.hold.clear()
        held.release.set()
        wait_until(lambda: reply().solving_jobs == 0, 60, "the solve to settle")
        settled = reply()
        assert settled.solving_since_s < 0 and settled.allocation_solve_s >= 0
        assert solving_dict(settled)["since_s"] is None
        wait_until(lambda: x.metrics.solve_start._value.get() == 0.0, 60, "the gauge to clear")


@pytest.mark.parametrize("bounded", [False, True])
def test_a_re_solve_at_the_round_s_start_does_not_hold_its_launches(tmp_path, bounded):
    """A job planned for the round ends in the plan lead (here: cancelled): at the start its
    GPU goes to the waiting job after a re-solve, as the simulator refills it. The re-solve
    runs off the executor: the round begins while it is held, the GPU waits for it, and
    once it settles the waiting job gets the GPU. The GPU waits ``hold_refills_s`` at most
    (``bounded``: a short one): then it is refilled on the allocation in force. Rounds of
    8 s leave a refill its window (the first 70% of a round, less the job's start-up) on a
    busy machine. The plan taken is one for a fresh run of the first job, made on an
    allocation that covers the second: on a loaded machine the second may come after a
    plan that extends the first's run, whose allocation has nothing to refill the GPU with
    (and the fake worker's process, deaf to KillJob, would hold it to its lease's end)."""
    with _cluster(tmp_path, gpus=1, round_s=8.0) as (x, held, client):
        x.solver.hold_refills_s = 0.2 if bounded else 600.0
        first = _submit(client)
        wait_until(lambda: _states(client)[first] == "running", 60, "the first job to run")
        second = _submit(client)

        def cancel_once_planned() -> bool:      # (on the executor: between plan and start)
            planned = x.driver.planned
            if (planned is None or planned.batch.keys != (first,) or first in x.runs
                    or second not in x.core.allocation.allocation):
                return False
            held.hold.set()
            x.cancel(first)
            return True
        wait_until(lambda: x.call(cancel_once_planned, timeout=10), 60,
                   "a plan that gives the first job the GPU")
        began = x.call(lambda: x.round_index, timeout=10)
        assert held.started.wait(60)                 # the start's re-solve, held
        wait_until(lambda: x.call(lambda: x.round_index, timeout=10) > began, 60,
                   "the round to begin")
        assert not held.release.is_set()             # ... while its re-solve was held
        assert x.call(lambda: x.solver.refills_held_until, timeout=10) > 0
        tasks = lambda: x.call(lambda: x.driver.in_flight.batch.keys, timeout=10)
        if bounded:                                  # refilled on the allocation in force
            wait_until(lambda: tasks() == (first, second), 60, "the GPU refilled at the bound")
        else:                                        # the GPU waits for the re-solve
            assert tasks() == (first,)
            # ... and the loop sleeps till then: no refill is due before the wait's bound
            until, due = x.call(lambda: (x.solver.refills_held_until, x.refills.deadlines()),
                                timeout=10)
            assert all(at >= until for at in due), (until, due)
        assert not held.release.is_set()
        held.hold.clear()
        held.release.set()
        wait_until(lambda: tasks() == (first, second), 60, "the freed GPU refilled")
        wait_until(lambda: _states(client)[second] == "running", 60,
                   "the waiting job on the freed GPU")


def test_a_solve_longer_than_a_round_is_said_once_with_its_remedy(tmp_path, caplog):
    """An operator learns that the allocation lags the cluster by a solve longer than a
    round, and what splits the problem (POP), once, not at every solve."""
    with (caplog.at_level(logging.WARNING, logger="gavelsched.daemon.solver"),
          _cluster(tmp_path, gpus=2, solve_s=3 * ROUND_S) as (_, _, client)):
        first = _submit(client)
        wait_until(lambda: _states(client)[first] == "running", 60, "the first job to run")
        second = _submit(client)
        wait_until(lambda: _states(client)[second] == "running", 60,
                   "the second job to run (a second solve)")
    said = [r.getMessage() for r in caplog.records if "longer than a round" in r.getMessage()]
    assert len(said) == 1, said
    assert "took 6 s for 1 job, longer than a round (2 s)" in said[0]
    assert "partitions=K (POP)" in said[0]
