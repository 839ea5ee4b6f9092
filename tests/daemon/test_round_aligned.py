"""Round-aligned leases (docs/runtime.md, "Leases"; thesis §5.6-5.7): every lease ends when
its round ends on the scheduler's clock. A fresh run's start-up eats into its own round (its
first InitJob cuts its steps to the time left, but never below half a round), a run that
waited for the GPUs' previous occupant counts from when they were freed, an extension adds
one whole round with no start-up, and rounds keep their cadence when the loop wakes late.

The real ``DaemonExecutor`` (real core, real policy solves, real SQLite store) on a clock the
test moves; its outgoing RunJobs are recorded instead of sent, so every value is exact."""

from __future__ import annotations

import contextlib
import time

import pytest

from gavelsched.daemon.config import DaemonConfig
from gavelsched.daemon.dispatch import LEASE_MOVED, PLANNED
from gavelsched.daemon.executor import DaemonExecutor
from gavelsched.daemon.leases import MIN_LEASE_FRACTION, new_lease, startup_lease
from gavelsched.daemon.meta import EPOCH_UNIX
from gavelsched.daemon.store import Store
from gavelsched.rpc import pb
from policies import get_policy
from traces import default_table

R = 10.0


class Recorder:
    """The dispatcher's interface; it keeps each RunJob instead of calling a worker."""

    def __init__(self) -> None:
        self.runs: list[pb.RunJobRequest] = []
        self.kinds: list[str] = []                      # why each was sent (dispatch.PLANNED ...)
        self.run_at: list[str] = []                     # the worker each was sent to
        self.kills: list[str] = []
        self.killed_runs: list[tuple[str, int]] = []    # (job, generation)
        self.killed_at: list[str] = []                  # the worker each was sent to

    def run_job(self, address, request, on_done=None, *, kind=PLANNED) -> None:
        self.runs.append(request)
        self.kinds.append(kind)
        self.run_at.append(address)

    def kill_job(self, address, job_id, reason, generation=0) -> None:
        self.kills.append(job_id)
        self.killed_runs.append((job_id, generation))
        self.killed_at.append(address)

    def answered(self, round_) -> dict:
        return {}

    def held(self):
        return contextlib.nullcontext()

    def close(self) -> None:
        pass


class Scheduler:
    """An executor on a hand-moved clock (from ``t``) with one emulated v100 server of
    ``gpus`` GPUs (none: ``gpus=0``, a restarted scheduler whose servers register again);
    ``config`` overrides ``DaemonConfig`` fields; ``metrics``: a ``DaemonMetrics`` it
    writes. The daemon's time is the clock's: a scheduler restarted on the state at ``t`` >
    0 counts on from ``t`` (its epoch is put ``t`` seconds of wall time back), as a real one
    does from the wall time gone by."""

    def __init__(self, tmp_path, gpus: int = 1, heartbeat_seconds: float = 1e6,
                 t: float = 0.0, metrics=None, **config) -> None:
        self.t = t
        self.store = Store(tmp_path / "state")
        if t:
            self.store.set_meta({EPOCH_UNIX.key(): time.time() - t})
        config = DaemonConfig(**{"listen": "127.0.0.1:0", "policy": "max_min_fairness_perf",
                                 "round_seconds": R, "state_dir": tmp_path / "state",
                                 "heartbeat_seconds": heartbeat_seconds,
                                 "min_resolve_interval_s": R, **config})
        self.sent = Recorder()
        self.x = DaemonExecutor(config, self.store, get_policy(config.policy),
                                default_table(), self.sent, metrics, clock=lambda: self.t)
        self.x.solver.inline = True        # (``at`` plans and starts a round in one call)
        self.server = self.add_server(gpus) if gpus else -1

    def add_server(self, gpus: int = 1) -> int:
        return self.x.roster.register(pb.RegisterWorkerRequest(
            worker_type="v100", gpus=gpus, address="127.0.0.1:1", hostname="h",
            previous_server_id=-1), self.t).server_id

    def at(self, t: float) -> None:
        self.t = t
        self.x.tick()                      # what the executor's loop does when it wakes

    def submit(self, steps: int = 100_000, scale_factor: int = 1) -> str:
        return self.x.submit(pb.JobRequest(job_type="A3C", scale_factor=scale_factor,
                                           total_steps=steps, workload="steps"))

    def init(self, job_id: str) -> pb.Lease:
        return self.x.processes.init_job(pb.InitJobRequest(job_id=job_id, round=0, rank=0,
                                                           server_id=self.server,
                                                           generation=self.gen(job_id))).lease

    def gen(self, job_id: str) -> int:
        """The job's newest run generation (what its processes and worker would send)."""
        return self.x.fences.current(job_id)

    def exited(self, job_id: str, steps: int) -> None:
        self.x.processes.round_report(pb.RoundReportRequest(server_id=self.server, job_id=job_id,
                                                            steps=steps, seconds=1.0,
                                                            generation=self.gen(job_id)))

    def close(self) -> None:
        self.store.close()


@pytest.fixture
def sched(tmp_path):
    s = Scheduler(tmp_path)
    yield s
    s.close()


def test_startup_lease_keeps_what_fits_in_the_time_left():
    planned = new_lease(4, steps_done=100, lease_steps=240, total_steps=10_000, seconds_left=10)
    cut = startup_lease(planned, 100, steps_per_s=24.0, seconds_left=7.5, max_seconds=10.0)
    assert (cut.max_steps, cut.max_seconds, cut.round, cut.extended) == (280, 10.0, 4, False)
    # never more than planned, and at least one step once the round is gone
    assert startup_lease(planned, 100, 1000.0, 7.5, 10.0).max_steps == 340
    assert startup_lease(planned, 100, 24.0, -2.0, 12.0).max_steps == 101


def test_a_fresh_runs_lease_ends_with_its_round_and_an_extension_adds_a_round(sched):
    job = sched.submit()
    sched.at(1.0)                            # past the arrival grace: round 0 starts
    (run,) = sched.sent.runs
    assert run.lease.max_seconds == pytest.approx(R) and not run.lease.extended
    rate = run.expected_steps_per_s
    assert run.lease.max_steps == int(rate * R)

    sched.t = 1.0 + 3.0                       # three seconds of start-up
    lease = sched.init(job)
    assert len(sched.sent.runs) == 1          # within its round: nothing to tell the worker
    assert lease.max_seconds == pytest.approx(R)           # since the process started
    assert lease.max_steps == int(rate * (R - 3.0))          # start-up eats its round

    sched.at(1.0 + R - sched.x.config.plan_lead)             # the next round is planned
    extension = sched.sent.runs[-1]
    assert extension.lease.extended and extension.lease.round == lease.round + 1
    assert extension.lease.max_seconds == pytest.approx(2 * R)   # no start-up charged
    assert extension.lease.max_steps == lease.max_steps + int(rate * R)
    assert sched.x.processes.renew_lease(pb.RenewLeaseRequest(job_id=job, round=lease.round,
                                                              generation=sched.gen(job))) \
        .max_seconds == pytest.approx(2 * R)


def test_a_start_up_longer_than_its_round_still_gets_half_a_round(sched):
    job = sched.submit()
    sched.at(1.0)
    rate = sched.sent.runs[0].expected_steps_per_s
    sched.t = 1.0 + 8.5                       # 1.5 s of the round left after start-up
    lease = sched.init(job)
    half = MIN_LEASE_FRACTION * R
    assert lease.max_seconds == pytest.approx(8.5 + half)    # past the round's end
    assert lease.max_steps == int(rate * half)
    moved = sched.sent.runs[-1]               # the worker's kill deadline moves with it
    assert moved.job_id == job and moved.lease.max_seconds == pytest.approx(8.5 + half)
    assert sched.sent.kinds == [PLANNED, LEASE_MOVED]
    sched.at(1.0 + 8.5)                       # the next round is planned: an extension
    extension = sched.sent.runs[-1]
    assert extension.lease.extended and sched.sent.kinds[-1] == PLANNED
    assert extension.lease.max_seconds == pytest.approx(2 * R)   # back on the cadence


def test_a_run_that_waited_for_its_gpus_counts_from_when_they_were_freed(sched):
    first, second = sched.submit(), sched.submit()
    sched.at(1.0)
    (run,) = sched.sent.runs                  # one GPU: one job this round, the other next
    sched.init(run.job_id)
    sched.at(1.0 + R - sched.x.config.plan_lead)
    sched.at(1.0 + R)                         # round 1: the other job on the same GPU
    fresh = [r for r in sched.sent.runs if r.job_id != run.job_id and not r.lease.extended]
    assert fresh, "max-min fairness gives the waiting job the GPU in round 1"
    other = fresh[-1].job_id
    assert {run.job_id, other} == {first, second}

    sched.t = 1.0 + R + 1.5                   # the first run saved and exited
    sched.exited(run.job_id, 100)
    sched.t = 1.0 + R + 4.0                   # the second one's process asks for its lease
    lease = sched.init(other)
    # its process started when the GPU was freed (1.5 s into the round), and its lease
    # ends with the round: 10 - 1.5 = 8.5 s since that start
    assert lease.max_seconds == pytest.approx(R - 1.5)
    assert lease.max_steps == int(fresh[-1].expected_steps_per_s * (R - 4.0))


def test_rounds_keep_their_cadence_when_the_loop_wakes_late(sched):
    sched.submit(), sched.submit()
    sched.at(1.0)                             # round 0: one job; round 1: the other
    sched.at(1.0 + R - sched.x.config.plan_lead)
    before = len(sched.sent.runs)
    sched.at(1.0 + R + 0.4)                   # the loop wakes 0.4 s after the boundary
    (launched,) = [r for r in sched.sent.runs[before:] if not r.lease.extended]
    # the fresh run gets the time left in round 1, which still ends at 1 + 2R
    assert launched.lease.max_seconds == pytest.approx(R - 0.4)
    first = next(r.job_id for r in sched.sent.runs if r.job_id != launched.job_id)
    sched.t = 1.0 + R + 1.0
    sched.exited(first, 100)                  # round 0's run saved and exited
    sched.at(1.0 + 2 * R - sched.x.config.plan_lead)   # round 2 is planned on time
    before = len(sched.sent.runs)
    sched.at(1.0 + 2 * R)
    (again,) = [r for r in sched.sent.runs[before:] if not r.lease.extended]
    assert again.lease.max_seconds == pytest.approx(R)


def test_a_runs_first_sample_counts_from_its_first_steps_end_not_its_init_job(sched):
    """A run's first throughput sample counts the steps after its first from that step's
    end on its own clock (``lease_start_s``), so its restore and first, slower step are not
    taken for slower steps (issue #29: a first sample timed from InitJob read 0.5-1% slow,
    and every forecast was late by as much). Without it, from InitJob on the scheduler's
    clock."""
    job = sched.submit()
    sched.at(1.0)
    sched.init(job)                                  # InitJob at t = 1
    sched.t = 11.0                                   # a report 10 s later ...
    sched.x.processes.durable_steps(job, 90, sched.gen(job), seconds=12.5, lease_start_s=3.5)
    assert sched.x.progress.online.measured[job]["v100"] == pytest.approx(89 / 9.0)
    other = sched.submit()
    sched.x.cancel(job)
    sched.at(sched.t + R)
    sched.init(other)
    sched.t += 10.0
    sched.x.processes.durable_steps(other, 90, sched.gen(other), seconds=12.5)   # an older process
    assert sched.x.progress.online.measured[other]["v100"] == pytest.approx(90 / 10.0)
