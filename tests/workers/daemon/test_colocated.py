"""Space sharing on a worker (thesis §5.3.1): the two jobs of a co-located pair share their
GPU at once, no third job joins them, and an emulating worker paces each at its table's
co-located rate. A real worker daemon against a fake scheduler over real gRPC; real
processes. (Before: the worker ran one job per GPU, so a pair's second member waited for
the first to end its lease, or superseded it while it still waited.)"""

from __future__ import annotations

import json
import sys

import pytest

from gavelsched.rpc import pb
from tests.workers.fake_scheduler import FakeScheduler
from traces.catalog import default_table
from workers.daemon.emulation import Emulation
from workers.daemon.worker import Worker, WorkerConfig

from .test_worker import TOKEN, report_of, run_job

A, B = "ResNet-50 (batch size 16)", "ResNet-18 (batch size 16)"
SPEED = 0.5


@pytest.fixture
def emulated(tmp_path):
    """A fake scheduler and one 1-GPU v100 worker that emulates the catalog at ``SPEED``."""
    sched = FakeScheduler(token=TOKEN)
    sched.start()
    worker = Worker(WorkerConfig(scheduler=sched.address, worker_type="v100", gpus=1,
                                 work_dir=tmp_path / "work", token=TOKEN,
                                 emulation=Emulation("v100", default_table(), SPEED),
                                 grace_s=0.5))
    worker.start()
    yield sched, worker
    worker.stop()
    sched.stop()


def paired(job_id: str, job_type: str, partner: str, partner_type: str, command: str):
    request = run_job(job_id, command=command, job_type=job_type, gpus=(0,))
    request.colocated_job_id, request.colocated_job_type = partner, partner_type
    return request


def dump_env(path) -> str:
    """A process that writes its environment to ``path``, then sleeps until killed."""
    code = (f"import json, os, time; json.dump(dict(os.environ), open({str(path)!r}, 'w')); "
            "time.sleep(600)")
    return f"{sys.executable} -c \"{code}\""


def test_a_pair_runs_at_once_on_its_gpu_at_the_tables_co_located_rates(emulated, tmp_path):
    sched, worker = emulated
    stub = sched.worker_stub(worker.address)
    first = stub.RunJob(paired("a", A, "b", B, dump_env(tmp_path / "a.json")))
    second = stub.RunJob(paired("b", B, "a", A, dump_env(tmp_path / "b.json")))
    assert (first.ok, first.message) == (True, "launched")
    assert (second.ok, second.message) == (True, "launched")      # beside it, not queued
    assert set(worker.launcher.running_jobs()) == {"a", "b"}
    rate_a, rate_b = default_table().pair("v100", (A, 1), (B, 1))
    assert rate_a < default_table().get("v100", A) and rate_b < default_table().get("v100", B)
    for job, rate in (("a", rate_a), ("b", rate_b)):
        env = sched.wait_for(lambda job=job: (tmp_path / f"{job}.json").exists()
                             and (tmp_path / f"{job}.json").read_text())
        assert float(json.loads(env)["GAVEL_EMULATE_STEPS_PER_S"]) == pytest.approx(rate * SPEED)
    # a third job waits for the GPU; it would oversubscribe the pair's
    third = stub.RunJob(run_job("c", command="true", job_type=A, gpus=(0,)))
    assert third.ok and "queued" in third.message
    for job in ("a", "b"):
        assert stub.KillJob(pb.KillJobRequest(job_id=job, reason="round over")).ok
    assert report_of(sched, "c").exit_code == 0            # launched once both had left


def test_a_pair_member_waiting_for_its_gpu_is_not_superseded_by_its_partner(emulated, tmp_path):
    """Both members wait for a run that overran; the second's RunJob does not drop the
    first (it drops any other launch waiting there), and both start when it leaves."""
    sched, worker = emulated
    stub = sched.worker_stub(worker.address)
    stub.RunJob(run_job("old", command="sleep 600", job_type=A, gpus=(0,)))
    stub.RunJob(run_job("other", command="true", job_type=A, gpus=(0,)))
    waits = [stub.RunJob(paired("a", A, "b", B, dump_env(tmp_path / "a.json"))),
             stub.RunJob(paired("b", B, "a", A, dump_env(tmp_path / "b.json")))]
    assert all(w.ok and "queued" in w.message for w in waits)
    assert "superseded" in report_of(sched, "other").reason
    assert stub.KillJob(pb.KillJobRequest(job_id="old", reason="round over")).ok
    sched.wait_for(lambda: set(worker.launcher.running_jobs()) == {"a", "b"})
    assert not [r for r in sched.log.rounds if r.job_id in ("a", "b")]
