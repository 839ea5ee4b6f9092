"""Pure parts of the daemon: online throughputs (thesis §5.3.3), RunJob requests and leases
(thesis §5.5-5.6), submission checks."""

from __future__ import annotations

import math
import socket
import threading
import time

import pytest

from concurrent.futures import Future

from gavelsched.core import JobSpec, MicroTask
from gavelsched.daemon.dispatch import (AFTER_SAVE, PLANNED, REFILL, Delivery, Dispatcher,
                                        RoundDispatch)
from gavelsched.daemon.leases import extended_lease, new_lease, run_requests, stop_lease
from gavelsched.daemon.store import JobRow
from gavelsched.daemon.submissions import SubmissionError, check_submission
from gavelsched.core.online import OnlineThroughputs
from gavelsched.mechanism import ClusterView
from gavelsched.rpc import pb, pb_grpc
from gavelsched.rpc.security import serve
from traces import default_table


class Prior:
    def get(self, worker_type, job_type, scale_factor=1):
        return {"v100": 10.0, "k80": 2.0}.get(worker_type, 0.0)

    def pair(self, worker_type, a, b):
        return None


def test_measured_type_replaces_prior_and_scales_the_others():
    online = OnlineThroughputs(Prior())
    assert online.observe("j", "v100", 0, 5.0) is None       # no steps: no information
    assert online.observe("j", "v100", 50, 10.0) == 5.0        # 5 steps/s, half the prior
    row = online.row("j", "A3C", 1, ("v100", "k80"))
    assert row == {"v100": 5.0, "k80": pytest.approx(1.0)}   # the k80 prior halved too
    assert online.observe("j", "v100", 70, 10.0) == pytest.approx(6.0)   # EWMA, weight 0.5


def test_changed_row_only_after_a_real_change():
    online = OnlineThroughputs(Prior())
    online.observe("j", "k80", 21, 10.0)       # 2.1 against a prior of 2.0: noise
    assert online.changed_row("j", "A3C", 1, ("v100", "k80")) is None
    online.observe("j", "k80", 30, 10.0)       # 2.55: 27% past the prior
    row = online.changed_row("j", "A3C", 1, ("v100", "k80"))
    assert row == pytest.approx({"k80": 2.55, "v100": 12.75})   # v100 scaled as k80
    online.observe("j", "k80", 26, 10.0)       # 2.55 -> 2.575: under 10% of what it plans on
    assert online.changed_row("j", "A3C", 1, ("v100", "k80")) is None
    online.observe("j", "k80", 40, 10.0)
    assert online.changed_row("j", "A3C", 1, ("v100", "k80")) is not None


def test_jobs_of_one_type_measured_within_noise_keep_one_row():
    """Two identical jobs whose runs measured 1% apart both plan on their priors, so the
    allocation cannot tell them apart by a run's jitter (issue #29)."""
    online = OnlineThroughputs(Prior())
    online.observe("a", "v100", 101, 10.0)
    online.observe("b", "v100", 99, 10.0)
    assert online.changed_row("a", "A3C", 1, ("v100", "k80")) is None
    assert online.changed_row("b", "A3C", 1, ("v100", "k80")) is None
    assert online.priors("A3C", 1, ("v100", "k80")) == {"v100": 10.0, "k80": 2.0}


def test_leases_are_absolute_step_counts():
    lease = new_lease(3, steps_done=100, lease_steps=50, total_steps=120, seconds_left=6)
    assert (lease.max_steps, lease.max_seconds, lease.round, lease.extended) == (120, 6, 3, False)
    more = extended_lease(new_lease(3, 0, 50, 1000, 6), 4, 50, 1000, 12.0)
    assert (more.max_steps, more.max_seconds, more.extended) == (100, 12.0, True)
    assert stop_lease(7).max_steps == 7


def test_run_requests_give_each_server_its_gpus_and_first_rank():
    view = ClusterView.build({"v100": 4}, gpus_per_server=2)   # servers 0: (0, 1), 1: (2, 3)
    task = MicroTask(key="5", job_ids=("5",), worker_type="v100", workers=(1, 2, 3),
                     steps=(30,), throughputs=(12.5,), extended=False)
    job = JobRow(JobSpec(id="5", job_type="A3C", scale_factor=3, total_steps=99),
                 workload="steps", steps_done=9)
    lease = new_lease(0, 9, 30, 99, 6)
    out = run_requests(task, 0, job, lease, view, {0: "10.0.0.1:7000", 1: "10.0.0.2:7000"},
                       round_index=0, scheduler_address="s:1", checkpoint_dir="/ck/5",
                       generation=7, master_port=29500)
    assert list(out) == [0, 1]
    assert (list(out[0].gpus), out[0].rank) == ([1], 0)
    assert (list(out[1].gpus), out[1].rank) == ([0, 1], 1)
    for r in out.values():
        assert (r.world_size, r.master_addr, r.master_port) == (3, "10.0.0.1", 29500)
        assert (r.steps_done, r.total_steps, r.lease.max_steps) == (9, 99, 39)
        assert math.isclose(r.expected_steps_per_s, 12.5) and r.checkpoint_dir == "/ck/5"
        assert r.generation == 7


@pytest.mark.parametrize("kw, field", [
    ({"job_type": ""}, "job_type"),
    ({"scale_factor": -1}, "scale_factor"),
    ({"priority_weight": -2}, "priority_weight"),
    ({"workload": "steps", "command": "true"}, "workload"),
    ({"scale_factor": 8}, "scale_factor"),        # only 4 v100s registered
])
def test_check_submission_names_the_field(kw, field):
    request = pb.JobRequest(**{"job_type": "A3C", "total_steps": 10, **kw})
    table = default_table()
    with pytest.raises(SubmissionError) as err:
        check_submission(request, table, table.worker_types, {"v100": 4})
    assert err.value.field == field


def test_check_submission_defaults():
    table = default_table()
    row = check_submission(pb.JobRequest(job_type="LM (batch size 5)", total_steps=10), table,
                           table.worker_types, {})
    assert (row.spec.scale_factor, row.workload, row.spec.priority_weight,
            row.spec.slo_s) == (1, "lstm", 1.0, None)


def test_a_worker_nobody_listens_for_is_an_unreachable_delivery():
    """A RunJob to an address where nothing listens comes back typed as unreachable (the
    heartbeat check decides the job's fate), not as a refusal that fails the job."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]          # closed again: nothing listens there
    got: Future = Future()
    dispatcher = Dispatcher()
    try:
        dispatcher.run_job(f"127.0.0.1:{port}", pb.RunJobRequest(job_id="0"), got.set_result)
        delivery = got.result(timeout=30)
    finally:
        dispatcher.close()
    assert isinstance(delivery, Delivery)
    assert not delivery.ok and delivery.unreachable
    assert "UNAVAILABLE" in delivery.message and f"127.0.0.1:{port}" in delivery.message


def test_calls_are_made_off_the_callers_thread_and_close_sends_what_is_queued():
    """The executor only queues a call (``Dispatcher``: making the gRPC futures took a sixth
    of its thread at 2,048 GPUs); the sender thread makes them, and ``close`` first sends
    every queued call, and returns once each answer has been handed on (an answer handed
    on slowly, here 20 ms, is still waited for: it was not, once in a full run)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    got: list[tuple[str, Delivery]] = []

    def on_done(delivery):
        time.sleep(0.02)
        got.append((threading.current_thread().name, delivery))

    dispatcher = Dispatcher()
    try:
        for i in range(50):
            dispatcher.run_job(f"127.0.0.1:{port}", pb.RunJobRequest(job_id=str(i)), on_done)
    finally:
        dispatcher.close()
    assert len(got) == 50 and all(not d.ok and d.unreachable for _, d in got)
    assert threading.current_thread().name not in {name for name, _ in got}


def test_calls_held_by_the_executor_are_sent_together_as_it_leaves():
    """While the executor places a round's runs its calls are held (``Dispatcher.held``):
    sent as they were made, thousands of them woke the sender and gRPC's threads, which
    slowed the placing tenfold at 2,048 GPUs. Another thread's calls are not held."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]          # nothing listens: each is answered at once
    address = f"127.0.0.1:{port}"
    got: list[str] = []
    other: Future = Future()
    dispatcher = Dispatcher()
    try:
        with dispatcher.held():
            for i in range(5):
                dispatcher.run_job(address, pb.RunJobRequest(job_id=str(i)),
                                   lambda d, i=i: got.append(str(i)))
            with dispatcher.held():        # (nested: the outer one sends)
                dispatcher.run_job(address, pb.RunJobRequest(job_id="5"),
                                   lambda d: got.append("5"))
            threading.Thread(target=dispatcher.run_job, args=(
                address, pb.RunJobRequest(job_id="x"), other.set_result)).start()
            assert not other.result(timeout=30).ok      # not held: answered meanwhile
            time.sleep(0.3)
            assert got == []
    finally:
        dispatcher.close()                  # (every answer handed on)
    assert sorted(got) == [str(i) for i in range(6)]


class _Worker(pb_grpc.SchedulerToWorkerServicer):
    """A worker's RPCs as they arrive (``batches``: False for an older worker, which has
    no ``RunJobs``); a RunJob of job ``bad`` is refused."""

    def __init__(self, batches: bool = True) -> None:
        self.got: list[tuple[str, list[str]]] = []
        self._lock = threading.Lock()
        if batches:
            self.RunJobs = self._run_jobs
        self.server, port = serve("127.0.0.1:0", [
            lambda s: pb_grpc.add_SchedulerToWorkerServicer_to_server(self, s)])
        self.address = f"127.0.0.1:{port}"

    def _ack(self, request) -> pb.Ack:
        return pb.Ack(ok=request.job_id != "bad", message=f"ack {request.job_id}")

    def _run_jobs(self, request, context):
        with self._lock:
            self.got.append(("RunJobs", [r.job_id for r in request.runs]))
        return pb.RunJobsResponse(acks=[self._ack(r) for r in request.runs])

    def RunJob(self, request, context):
        with self._lock:
            self.got.append(("RunJob", [request.job_id]))
        return self._ack(request)

    def KillJob(self, request, context):
        with self._lock:
            self.got.append(("KillJob", [request.job_id]))
        return pb.Ack(ok=True)


def test_a_workers_held_runjobs_go_as_one_call_and_an_older_worker_gets_them_one_by_one():
    """A round's RunJobs for one worker are one ``RunJobs`` call (the one sender thread
    took 5-20 s to make 2,048 calls at 2,048 GPUs), in order, each answered alone; a call
    of another kind to the worker between them ends the batch. A worker without
    ``RunJobs`` (UNIMPLEMENTED) gets them one by one, then and from then on."""
    new, old = _Worker(), _Worker(batches=False)
    got: dict[str, Delivery] = {}
    dispatcher = Dispatcher()
    try:
        for round_ in (1, 2):
            with dispatcher.held():
                for job in ("a", "bad", "c"):
                    dispatcher.run_job(new.address, pb.RunJobRequest(job_id=job, round=round_),
                                       lambda d, k=f"{job}{round_}": got.__setitem__(k, d))
                dispatcher.kill_job(new.address, "z", "preempted")
                dispatcher.run_job(new.address, pb.RunJobRequest(job_id="e", round=round_))
                for job in ("f", "g"):
                    dispatcher.run_job(old.address, pb.RunJobRequest(job_id=job, round=round_),
                                       lambda d, k=f"{job}{round_}": got.__setitem__(k, d))
            if round_ == 1:
                dispatcher.close()       # (every answer handed on)
                dispatcher = Dispatcher()
                dispatcher._single = {old.address}     # what the first one learnt
    finally:
        dispatcher.close()
        new.server.stop(0)
        old.server.stop(0)
    # (separate calls are in flight at once: gRPC keeps no order between them)
    assert sorted(new.got) == sorted([("RunJobs", ["a", "bad", "c"]), ("KillJob", ["z"]),
                                      ("RunJob", ["e"])] * 2)
    assert sorted(old.got) == [("RunJob", ["f"])] * 2 + [("RunJob", ["g"])] * 2
    assert {k: (d.ok, d.message) for k, d in got.items() if k.endswith("1")} == {
        "a1": (True, "ack a"), "bad1": (False, "ack bad"), "c1": (True, "ack c"),
        "f1": (True, "ack f"), "g1": (True, "ack g")}
    assert len(got) == 10 and all(d.ok for k, d in got.items() if not k.startswith("bad"))


def test_a_rounds_dispatch_line_times_its_plans_runjobs_and_counts_later_ones_apart(caplog):
    """The plan's RunJobs are timed from the plan (the line and the metric); launches that
    waited for their job's last run to save, and refills, come later by design: each kind
    is counted apart with its own last answer, not taken for the plan's dispatch."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dispatcher = Dispatcher()
    planned_at = time.monotonic()
    try:
        for i, kind in enumerate([PLANNED] * 3 + [AFTER_SAVE] * 2 + [REFILL]):
            dispatcher.run_job(f"127.0.0.1:{port}", pb.RunJobRequest(job_id=str(i), round=3),
                               kind=kind)
        dispatcher.run_job(f"127.0.0.1:{port}", pb.RunJobRequest(job_id="9", round=2))
    finally:
        dispatcher.close()              # (every answer handed on)
    timed: list[float] = []
    with caplog.at_level("INFO", logger="gavelsched.daemon.dispatch"):
        RoundDispatch(3, planned_at, 0.25, None, started=planned_at + 1.0,
                      kept=(2, 5)).report(dispatcher, timed.append)
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("round 3")]
    assert line.startswith("round 3: planned in 0.25 s; 3 RunJobs answered, the last ")
    assert "; then 2 once their jobs' last runs had saved, the last " in line
    assert "; then 1 to freed GPUs, the last " in line
    assert line.endswith("; 2 of last round's 5 tasks kept on their GPUs")   # (extensions)
    assert len(timed) == 1 and timed[0] > 0
    assert dispatcher.answered(3) == {} and dispatcher.answered(2) == {}   # forgotten


def test_a_rendezvous_port_is_drawn_below_the_ephemeral_range(tmp_path, monkeypatch):
    # a port bind(0) hands out is where outgoing connections take theirs too: one took a
    # mixed job's rendezvous port between the scheduler's probe and the job's bind (CI)
    from gavelsched.daemon import leases

    assert leases._ephemeral_low() > 0                      # this machine's range, read
    bad = tmp_path / "range"
    bad.write_text("garbage")
    assert leases._ephemeral_low(str(bad)) == 32768         # unreadable: Linux's default
    monkeypatch.setattr(leases, "_ephemeral_low", lambda: 32768)   # whatever this machine's
    ports = {leases.free_port() for _ in range(20)}
    assert all(leases.PORTS_FROM <= p < 32768 for p in ports), ports
    assert len(ports) > 1                                   # drawn, not one fixed port
