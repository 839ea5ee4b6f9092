"""Every RPC, fuzzed against the real daemons over loopback (docs/design.md, Safety rules:
bad input of every kind gets a clear one-line error and loses no data). Each call sends a
message drawn from its descriptor (``tests/rpc/messages.py``): any message, or one that
passes the door with one to three fields drawn anew. The caller holds the daemon's token,
so every call reaches its handler.

- The scheduler (a subprocess, with two in-test workers and four jobs): no call ends in
  UNKNOWN or INTERNAL (an exception that escaped its handler), none outlives its deadline,
  every refusal's text is one line; afterwards it is healthy, it still knows the four jobs,
  and its log holds no traceback.
- A worker daemon (a subprocess): the same of RunJob, RunJobs, KillJob and ReadLogs, and it
  is still running and registered afterwards. (A RunJob's shell command is one of a few
  harmless ones, and its checkpoint directory inside the test's folder.)"""

from __future__ import annotations

import os

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gavelsched.rpc import pb, pb_grpc
from gavelsched.rpc.security import channel

from ..rpc.messages import messages, mutated, plausible
from .cluster import Cluster, running, wait_until
from .fake_worker import FakeWorker

FUZZ = settings(max_examples=int(os.environ.get("GAVEL_FUZZ_EXAMPLES", "300")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
TOKEN = "fuzz-daemon-token-0123456789"
SCHEDULER_SERVICES = ("WorkerToScheduler", "IteratorToScheduler", "ClientToScheduler")
WORKER_CALLS = ("RunJob", "RunJobs", "KillJob", "ReadLogs")     # (not Shutdown: it stops it)
ESCAPED = (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL)


def methods(services):
    """(service, method descriptor) of each named service's calls."""
    return [(service, m) for service in services
            for m in pb.DESCRIPTOR.services_by_name[service].methods]


def requests(calls, words, known, fields=None):
    """(service, method, request): any request, or a plausible one mutated."""
    def of(call):
        service, method = call
        drawn = st.one_of(messages(method.input_type, words, fields=fields),
                          mutated(plausible(method.input_type, known), words, fields))
        return st.tuples(st.just(service), st.just(method), drawn)
    return st.sampled_from(calls).flatmap(of)


def call(stub, method, request) -> None:
    """One call; fails the test when the answer is not one a client can act on."""
    try:
        if method.server_streaming:
            replies = getattr(stub, method.name)(request, timeout=3)
            for _ in zip(range(3), replies):
                pass
            replies.cancel()
        else:
            getattr(stub, method.name)(request, timeout=20)
    except grpc.RpcError as err:
        code, details = err.code(), err.details() or ""
        assert code not in ESCAPED, f"{method.name}: {code.name} {details}"
        assert method.server_streaming or code != grpc.StatusCode.DEADLINE_EXCEEDED, \
            f"{method.name} outlived its deadline"
        assert "\n" not in details, f"{method.name}: {details!r}"


def known_values(job_ids, server_id: int) -> dict:
    """What ``plausible`` fills in: the fields of a request that passes the door."""
    return {"job_id": job_ids[0], "job_type": "A3C", "total_steps": 50, "workload": "steps",
            "scale_factor": 1, "priority_weight": 1.0, "worker_type": "v100", "gpus": 1,
            "address": "127.0.0.1:9", "hostname": "fuzz", "server_id": server_id,
            "generation": 1, "steps": 5, "seconds": 1.0, "round": 1, "by": "user",
            "stream": "out"}


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzzed")
    with running(Cluster(root, token=TOKEN, round_seconds=1.0)) as cluster:
        cluster.fakes += [FakeWorker(cluster.address, "v100", token=TOKEN),
                          FakeWorker(cluster.address, "k80", token=TOKEN, gpus=2)]
        cluster.job_ids = [cluster.submit(2000 + 100 * i) for i in range(4)]
        yield cluster


@FUZZ
@given(data=st.data())
def test_no_scheduler_call_escapes_its_handler(scheduler, data):
    stubs = {s: getattr(pb_grpc, f"{s}Stub")(scheduler.chan) for s in SCHEDULER_SERVICES}
    words = scheduler.job_ids + ["A3C", "v100", "k80", "steps", "out", "err", "user"]
    known = known_values(scheduler.job_ids, scheduler.fakes[0].server_id)
    service, method, request = data.draw(requests(methods(SCHEDULER_SERVICES), words, known))
    call(stubs[service], method, request)


def test_the_scheduler_keeps_its_jobs_and_logs_no_traceback(scheduler):
    """(Runs after the fuzzing above, on the same scheduler.)"""
    assert scheduler.healthy()
    history = pb_grpc.ClientToSchedulerStub(scheduler.chan).History
    for job_id in scheduler.job_ids:
        assert history(pb.HistoryRequest(job_id=job_id), timeout=10).events
    log_text = (scheduler.root / "scheduler.log").read_text(errors="replace")
    assert "Traceback" not in log_text, log_text[log_text.find("Traceback"):][:3000]


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzzed_worker")
    (root / "cwd").mkdir()
    with running(Cluster(root, token=TOKEN, round_seconds=1.0)) as cluster:
        cluster.worker_proc = cluster.start_worker("v100", gpus=2, cwd=root / "cwd")
        wait_until(lambda: cluster.alive_workers() >= 1, 60, "the worker registered")
        cluster.job_ids = [cluster.submit(3000 + 100 * i) for i in range(3)]
        cluster.worker_chan = channel(cluster.status().workers[0].address, token=TOKEN)
        yield cluster
        cluster.worker_chan.close()


@FUZZ
@given(data=st.data())
def test_no_worker_call_escapes_its_handler(worker, data):
    stub = pb_grpc.SchedulerToWorkerStub(worker.worker_chan)
    calls = [c for c in methods(["SchedulerToWorker"]) if c[1].name in WORKER_CALLS]
    harmless = {"command": st.sampled_from(["", "true", "exit 3", "sleep 0.2"]),
                "checkpoint_dir": st.sampled_from(["", str(worker.root / "checkpoints")])}
    words = worker.job_ids + ["A3C", "v100", "steps", "out", "err"]
    known = {**known_values(worker.job_ids, 0), "command": "true"}
    _, method, request = data.draw(requests(calls, words, known, harmless))
    call(stub, method, request)
    assert worker.worker_proc.poll() is None, "the worker died"


def test_the_worker_is_still_serving_and_logs_no_traceback(worker):
    """(Runs after the fuzzing above, on the same worker.)"""
    assert worker.worker_proc.poll() is None
    wait_until(lambda: worker.alive_workers() == 1, 30, "the worker still registered")
    log_text = (worker.root / "worker0.log").read_text(errors="replace")
    assert "Traceback" not in log_text, log_text[log_text.find("Traceback"):][:3000]
