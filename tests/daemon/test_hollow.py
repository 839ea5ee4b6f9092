"""Hollow workers against a real scheduler (issue #30; ``workers/hollow.py``).

- One job over three rounds makes the same calls to the scheduler on a hollow worker as on
  a real worker running the ``steps`` workload's process: the calls the scheduler receives
  for the job (a recording gRPC server interceptor on an in-process scheduler) agree in
  method, job, run generation, round and checkpointed flag; timings are not compared.
- ``gavelsched worker --hollow 3`` at a tiny size: its workers register with the types
  dealt in turn, run jobs to the end, and drain on SIGTERM; bad flags are refused in one line.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import grpc
import pytest

from gavelsched.cli import main
from gavelsched.daemon import server as server_module
from gavelsched.daemon.config import parse_config
from gavelsched.daemon.local import wait_until
from gavelsched.daemon.server import SchedulerDaemon
from gavelsched.jobenv import RENEW_AT_VAR
from gavelsched.rpc import pb, pb_grpc
from gavelsched.rpc.security import channel
from tests.daemon.cluster import ENV, JOB_TYPE, Cluster, running
from traces.catalog import default_table
from workers.daemon.emulation import Emulation
from workers.hollow import hollow_worker
from workers.daemon.worker import Worker, WorkerConfig

ROUNDS = 3
# The calls a job's run makes (its iterator's, and its worker's report of its exit).
JOB_CALLS = ("InitJob", "RenewLease", "ReportSteps", "ReportRound")


class Recorder(grpc.ServerInterceptor):
    """Every unary call the server receives: (method name, request), in arrival order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def intercept_service(self, continuation, details):
        handler = continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        method, inner = details.method.rsplit("/", 1)[1], handler.unary_unary

        def behavior(request, context):
            self.calls.append((method, request))
            return inner(request, context)
        return grpc.unary_unary_rpc_method_handler(
            behavior, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)

    def of(self, job_id: str) -> list[tuple]:
        """The calls about ``job_id``: what must agree between a hollow and a real job."""
        return [(method, request.generation, request.round,
                 getattr(request, "checkpointed", None))
                for method, request in list(self.calls)
                if method in JOB_CALLS and request.job_id == job_id]


def three_rounds(tmp_path, monkeypatch, make_worker) -> list[tuple]:
    """One job alone on one emulated v100 for three rounds (it keeps its GPU: every round
    extends its lease), then cancelled; the scheduler's calls about it."""
    recorder = Recorder()
    serve = server_module.serve
    monkeypatch.setattr(server_module, "serve", lambda *a, interceptors=(), **kw: serve(
        *a, interceptors=[*interceptors, recorder], **kw))
    config = parse_config({"listen": "127.0.0.1:0", "policy": "max_min_fairness_perf",
                           "round_seconds": 4, "heartbeat_seconds": 0.3, "eta": False,
                           "min_resolve_interval_s": 0, "state_dir": str(tmp_path / "state")})
    daemon = SchedulerDaemon(config).start()
    address = f"127.0.0.1:{daemon.port}"
    worker = make_worker(WorkerConfig(
        scheduler=address, worker_type="v100", gpus=1, work_dir=tmp_path / "work",
        emulation=Emulation("v100", default_table()), grace_s=3.0))
    client = pb_grpc.ClientToSchedulerStub(channel(address))
    try:
        worker.start()
        job = client.Submit(pb.JobRequest(job_type=JOB_TYPE, scale_factor=1,
                                          total_steps=10**6, workload="steps"),
                            timeout=30).job_id
        wait_until(lambda: sum(m == "ReportSteps" for m, *_ in recorder.of(job)) >= ROUNDS,
                   120, "three rounds' checkpoints")
        client.Cancel(pb.CancelRequest(job_id=job), timeout=30)
        wait_until(lambda: any(m == "ReportRound" for m, *_ in recorder.of(job)), 60,
                   "the run's exit")
        return recorder.of(job)
    finally:
        worker.stop()
        daemon.stop()


def test_a_hollow_job_makes_the_calls_a_real_jobs_process_makes(tmp_path, monkeypatch):
    # Both jobs ask for their next lease half-way through a lease. At the default (0.95 of
    # a 4-s lease: 0.2 s before its end) a loaded machine can reach the lease's end first
    # (a stall, or a last save longer than that, which the iterator stops early for); the
    # renewal is then asked at the end, in flight beside the checkpoint's ReportSteps, and
    # the two reach the scheduler in either order (GAVEL_RENEW_AT=0.999 shows it each time).
    monkeypatch.setenv(RENEW_AT_VAR, "0.5")
    real = three_rounds(tmp_path / "real", monkeypatch, Worker)
    hollow = three_rounds(tmp_path / "hollow", monkeypatch, hollow_worker)

    def through_three_rounds(calls):
        ends = [i for i, (method, *_) in enumerate(calls) if method == "ReportSteps"]
        return calls[:ends[ROUNDS - 1] + 1]

    first = real[0]
    assert first[0] == "InitJob", real
    assert through_three_rounds(hollow) == through_three_rounds(real)
    # (what comes after the cancel depends on when it lands; both end with the run's exit)
    assert real[-1][:2] == hollow[-1][:2] == ("ReportRound", first[1])
    methods = [c[0] for c in through_three_rounds(real)]
    assert methods == ["InitJob"] + ["RenewLease", "ReportSteps"] * ROUNDS, real


def test_hollow_cli_runs_jobs_and_drains(tmp_path):
    with running(Cluster(tmp_path, round_seconds=2.0)) as cluster:
        with open(tmp_path / "hollow.log", "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "gavelsched", "worker", "--hollow", "3", "--type",
                 "k80,v100", "--gpus", "2", "--scheduler", cluster.address, "--work-dir",
                 str(tmp_path / "hollow"), "--grace", "2"], stdout=log,
                stderr=subprocess.STDOUT, env=ENV)
        try:
            wait_until(lambda: cluster.alive_workers() == 3, 60, "three hollow workers")
            types = sorted(w.type for w in cluster.status().workers)
            assert types == ["k80", "k80", "v100"]
            jobs = [cluster.submit(40, scale_factor=s) for s in (1, 2, 1, 1)]
            done = cluster.wait_done(jobs, timeout=120)
            assert [(done[j].state, done[j].steps_done) for j in jobs] == [("done", 40)] * 4
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert "3 hollow workers (6 GPUs: k80 x2, v100 x1) serving" in \
        (tmp_path / "hollow.log").read_text()


@pytest.mark.parametrize("flags, line", [
    (["--type", "k80,v100"], "--type 'k80,v100': a list of types needs --hollow"),
    (["--type", "k80", "--hollow", "2", "--listen", "127.0.0.1:50061"],
     "--listen 127.0.0.1:50061: hollow workers take a free port each; give port 0"),
    (["--type", "k80,,v100", "--hollow", "2"], "--type 'k80,,v100': an empty type"),
    (["--type", "k80", "--hollow", "2", "--emulate", "off"],
     "--hollow workers always emulate their type"),
])
def test_hollow_cli_refuses_bad_flags_in_one_line(tmp_path, capsys, flags, line):
    argv = ["worker", "--scheduler", "127.0.0.1:1", "--gpus", "2", "--work-dir",
            str(tmp_path), *flags]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"gavelsched worker: error: {line}"), err
