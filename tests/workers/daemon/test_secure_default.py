"""Secure by default (issue #17; docs/design.md, Safety rules): a worker with a token runs nothing
for a caller without it, even over a plain ``grpc.insecure_channel``; a tokenless worker
refuses to listen beyond loopback unless ``--insecure`` (then it warns); its default listen
address is loopback, and a loopback-only worker refuses a scheduler on another host. The
daemons are real ``gavelsched worker`` processes (or in-process ``Worker``s) against the
fake scheduler, on 127.0.0.1 or 0.0.0.0 with port 0; nothing reaches the network."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from gavelsched.daemon.local import subprocess_env
from gavelsched.rpc import pb, pb_grpc
from tests.workers.fake_scheduler import FakeScheduler
from workers.daemon.worker import Worker, WorkerConfig, WorkerError

TOKEN = "s3cret-token"
# An address of TEST-NET-1 (RFC 5737): never this machine, and nothing is sent to it.
REMOTE = "192.0.2.1:50051"


def _worker(sched: FakeScheduler, tmp_path: Path, *flags: str) -> subprocess.Popen:
    err = open(tmp_path / "worker.err", "wb")   # noqa: SIM115 - the process keeps it
    return subprocess.Popen(
        [sys.executable, "-m", "gavelsched", "worker", "--scheduler", sched.address,
         "--type", "k80", "--gpus", "1", "--work-dir", str(tmp_path / "w"), *flags],
        stdout=subprocess.DEVNULL, stderr=err, env=subprocess_env())


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _registered(sched: FakeScheduler, proc: subprocess.Popen, tmp_path: Path) -> str:
    """The address the worker process registered (fails if it exits first)."""
    def seen():
        if proc.poll() is not None:
            raise AssertionError(f"worker exited {proc.returncode}: "
                                 f"{(tmp_path / 'worker.err').read_text()}")
        return sched.log.registrations[-1].address if sched.log.registrations else None
    return sched.wait_for(seen, timeout=90)


def _run_job(job_id: str, command: str) -> pb.RunJobRequest:
    return pb.RunJobRequest(job_id=job_id, round=0, job_type="ResNet-18 (batch size 32)",
                            command=command, total_steps=10, gpus=[0], world_size=1,
                            lease=pb.Lease(max_steps=10, max_seconds=30, round=0))


def test_unauthenticated_runjob_over_a_plain_channel_is_refused_and_runs_nothing(tmp_path):
    sched = FakeScheduler(token=TOKEN)
    sched.start()
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    proc = _worker(sched, tmp_path, "--token-file", str(token_file))   # default --listen
    marker = tmp_path / "MARKER"
    try:
        address = _registered(sched, proc, tmp_path)
        assert address.startswith("127.0.0.1:")           # loopback unless --listen
        plain = grpc.insecure_channel(address)
        stub = pb_grpc.SchedulerToWorkerStub(plain)
        calls = [lambda md: stub.RunJob(_run_job("evil", f"touch {marker}"), timeout=10,
                                        metadata=md),
                 lambda md: stub.KillJob(pb.KillJobRequest(job_id="evil"), timeout=10,
                                         metadata=md),
                 lambda md: stub.Shutdown(pb.ShutdownRequest(reason="evil"), timeout=10,
                                          metadata=md)]
        for metadata in (None, (("authorization", "Bearer wrong"),),
                         (("authorization", TOKEN),)):
            for call in calls:
                with pytest.raises(grpc.RpcError) as err:
                    call(metadata)
                assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        plain.close()
        time.sleep(1.0)
        assert not marker.exists()
        assert proc.poll() is None                           # Shutdown did not stop it
        assert not any(r.job_id == "evil" for r in sched.log.rounds)
        # The same RunJob with the token runs: the refusal above was the token's doing.
        ok = sched.worker_stub(address).RunJob(_run_job("good", f"touch {marker}"),
                                               timeout=10)
        assert ok.ok, ok.message
        sched.wait_for(lambda: marker.exists())
    finally:
        _stop(proc)
        sched.stop()
    assert "no auth token" not in (tmp_path / "worker.err").read_text()


def test_tokenless_worker_beyond_loopback_does_not_start(tmp_path):
    sched = FakeScheduler()
    sched.start()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "gavelsched", "worker", "--scheduler", sched.address,
             "--type", "k80", "--gpus", "1", "--listen", "0.0.0.0:0", "--work-dir",
             str(tmp_path / "w")], capture_output=True, text=True, timeout=90, check=False,
            env=subprocess_env())
    finally:
        sched.stop()
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    assert line.startswith("gavelsched worker: error: the worker would listen on 0.0.0.0:0")
    assert "head -c 32 /dev/urandom" in line and "--token-file" in line
    assert "--insecure" in line
    assert not sched.log.registrations
    with pytest.raises(WorkerError, match="beyond loopback"):
        Worker(WorkerConfig(scheduler=sched.address, worker_type="k80", gpus=1,
                            work_dir=tmp_path / "w2", listen="0.0.0.0:0")).start()


def test_insecure_worker_beyond_loopback_starts_and_warns(tmp_path):
    sched = FakeScheduler()
    sched.start()
    proc = _worker(sched, tmp_path, "--listen", "0.0.0.0:0", "--insecure")
    try:
        address = _registered(sched, proc, tmp_path)
        port = address.rsplit(":", 1)[1]
        # it serves every interface, loopback included, and runs the scheduler's jobs
        marker = tmp_path / "ran"
        ack = sched.worker_stub(f"127.0.0.1:{port}").RunJob(
            _run_job("open", f"touch {marker}"), timeout=10)
        assert ack.ok, ack.message
        sched.wait_for(lambda: marker.exists())
    finally:
        _stop(proc)
        sched.stop()
    warnings = [line for line in (tmp_path / "worker.err").read_text().splitlines()
                if "--insecure:" in line]
    assert len(warnings) == 1 and "WARNING" in warnings[0]
    assert f"0.0.0.0:{port} has no auth token" in warnings[0]


def test_tokenless_worker_on_loopback_starts_with_a_notice(tmp_path, caplog):
    sched = FakeScheduler()
    sched.start()
    worker = Worker(WorkerConfig(scheduler=sched.address, worker_type="k80", gpus=1,
                                 work_dir=tmp_path / "w"))
    try:
        with caplog.at_level(logging.WARNING, logger="workers.daemon.worker"):
            worker.start()
        assert worker.address.startswith("127.0.0.1:")
        notices = [r.getMessage() for r in caplog.records if "no auth token" in r.getMessage()]
        assert len(notices) == 1 and "any local user" in notices[0]
        assert "\n" not in notices[0]
    finally:
        worker.stop()
        sched.stop()


def test_loopback_only_worker_refuses_a_scheduler_on_another_host(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    proc = subprocess.run(
        [sys.executable, "-m", "gavelsched", "worker", "--scheduler", REMOTE, "--type",
         "k80", "--gpus", "1", "--token-file", str(token_file), "--work-dir",
         str(tmp_path / "w")], capture_output=True, text=True, timeout=90, check=False,
        env=subprocess_env())
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"listens on 127.0.0.1:0, loopback only, but scheduler {REMOTE}" in lines[0]
    assert "--listen" in lines[0]


def test_a_worker_with_a_token_may_listen_beyond_loopback(tmp_path, caplog):
    """With the token, 0.0.0.0 needs no flag and logs nothing about auth; the scheduler is
    told this machine's hostname."""
    sched = FakeScheduler(token=TOKEN)
    sched.start()
    worker = Worker(WorkerConfig(scheduler=sched.address, worker_type="k80", gpus=1,
                                 work_dir=tmp_path / "w", listen="0.0.0.0:0", token=TOKEN,
                                 hostname="gpu-host-7"))
    try:
        with caplog.at_level(logging.INFO, logger="workers.daemon.worker"):
            worker.start()
        assert worker.address.startswith("gpu-host-7:")
        port = worker.address.rsplit(":", 1)[1]
        ack = sched.worker_stub(f"127.0.0.1:{port}").KillJob(
            pb.KillJobRequest(job_id="none"), timeout=10)
        assert not ack.ok                    # reached with the token; nothing to kill
        assert not any("auth token" in r.getMessage() for r in caplog.records)
    finally:
        worker.stop()
        sched.stop()

