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
from pathlib import Path

import grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gavelsched.rpc import pb, pb_grpc
from gavelsched.rpc.security import channel

from ..rpc.messages import messages, mutated, plausible
from .cluster import Cluster, running, wait_until
from .fake_worker import FakeWorker

FUZZ = settings(max_examples=int(os.environ.get("GAVEL_FUZZ_EXAMPLES", "300")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow])
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


def no_traceback(log: Path) -> None:
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, text[text.find("Traceback"):][:3000]


def test_no_scheduler_call_escapes_its_handler_and_no_job_is_lost(tmp_path):
    with running(Cluster(tmp_path, token=TOKEN, round_seconds=1.0)) as cluster:
        cluster.fakes += [FakeWorker(cluster.address, "v100", token=TOKEN),
                          FakeWorker(cluster.address, "k80", token=TOKEN, gpus=2)]
        job_ids = [cluster.submit(2000 + 100 * i) for i in range(4)]
        stubs = {s: getattr(pb_grpc, f"{s}Stub")(cluster.chan) for s in SCHEDULER_SERVICES}
        words = job_ids + ["A3C", "v100", "k80", "steps", "out", "err", "user"]
        drawn = requests(methods(SCHEDULER_SERVICES), words,
                         known_values(job_ids, cluster.fakes[0].server_id))

        @FUZZ
        @given(case=drawn)
        def storm(case):
            service, method, request = case
            call(stubs[service], method, request)

        storm()
        assert cluster.healthy()
        history = pb_grpc.ClientToSchedulerStub(cluster.chan).History
        for job_id in job_ids:
            assert history(pb.HistoryRequest(job_id=job_id), timeout=10).events
    no_traceback(tmp_path / "scheduler.log")


def test_no_worker_call_escapes_its_handler_and_the_worker_serves_on(tmp_path):
    (tmp_path / "cwd").mkdir()
    with running(Cluster(tmp_path, token=TOKEN, round_seconds=1.0)) as cluster:
        proc = cluster.start_worker("v100", gpus=2, cwd=tmp_path / "cwd")
        wait_until(lambda: cluster.alive_workers() >= 1, 60, "the worker registered")
        job_ids = [cluster.submit(3000 + 100 * i) for i in range(3)]
        with channel(cluster.status().workers[0].address, token=TOKEN) as chan:
            stub = pb_grpc.SchedulerToWorkerStub(chan)
            calls = [c for c in methods(["SchedulerToWorker"]) if c[1].name in WORKER_CALLS]
            harmless = {"command": st.sampled_from(["", "true", "exit 3", "sleep 0.2"]),
                        "checkpoint_dir": st.sampled_from(["", str(tmp_path / "checkpoints")])}
            known = {**known_values(job_ids, 0), "command": "true"}
            drawn = requests(calls, job_ids + ["A3C", "v100", "steps", "out", "err"], known,
                             harmless)

            @FUZZ
            @given(case=drawn)
            def storm(case):
                _, method, request = case
                call(stub, method, request)
                assert proc.poll() is None, "the worker died"

            storm()
        wait_until(lambda: cluster.alive_workers() == 1, 30, "the worker still registered")
        assert proc.poll() is None
    no_traceback(tmp_path / "worker0.log")
