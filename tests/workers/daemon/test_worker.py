"""The worker daemon against a fake scheduler over real gRPC: launch environment, leases,
failures, auth, re-registration, DDP ranks and emulated speeds (thesis §5.6)."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from gavelsched import checkpoints
from gavelsched.rpc import pb
from tests.workers.fake_scheduler import FakeJob, FakeScheduler
from traces.catalog import default_table
from workers.daemon.emulation import Emulation
from workers.daemon.worker import Worker, WorkerConfig, WorkerError, next_beat

TOKEN = "s3cret-token"


@pytest.fixture
def cluster(tmp_path):
    """A fake scheduler and one 2-GPU k80 worker, both requiring TOKEN."""
    sched = FakeScheduler(token=TOKEN)
    sched.start()
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    worker = Worker(WorkerConfig(scheduler=sched.address, worker_type="k80", gpus=2,
                                 work_dir=tmp_path / "work", token=TOKEN,
                                 token_file=str(token_file), grace_s=0.5))
    worker.start()
    yield sched, worker
    worker.stop()
    sched.stop()


def run_job(job_id: str, *, command: str = "", workload: str = "", gpus=(0,), rank: int = 0,
            world: int = 1, max_seconds: float = 30.0, total: int = 10, ckpt: str = "",
            job_type: str = "ResNet-18 (batch size 32)", sched=None) -> pb.RunJobRequest:
    return pb.RunJobRequest(
        job_id=job_id, round=0, job_type=job_type, workload=workload, command=command,
        total_steps=total, steps_done=0, gpus=list(gpus), rank=rank, world_size=world,
        master_addr="127.0.0.1", master_port=29511, checkpoint_dir=ckpt,
        scheduler_address=sched.address if sched else "",
        lease=pb.Lease(max_steps=total, max_seconds=max_seconds, round=0))


def report_of(sched: FakeScheduler, job_id: str) -> pb.RoundReportRequest:
    return sched.wait_for(lambda: next((r for r in sched.log.rounds if r.job_id == job_id),
                                       None))


def test_registers_and_heartbeats(cluster):
    sched, worker = cluster
    reg = sched.log.registrations[0]
    assert (reg.worker_type, reg.gpus, reg.previous_server_id) == ("k80", 2, -1)
    assert reg.address == worker.address
    sched.wait_for(lambda: len(sched.log.heartbeats) >= 2)
    assert sched.log.heartbeats[-1].server_id == worker.server_id
    # stamped on the worker's clock as sent (the scheduler reads their delay from it)
    first, last = sched.log.heartbeats[0].sent_s, sched.log.heartbeats[-1].sent_s
    assert 0 < first < last <= time.monotonic()


def test_launch_environment(cluster, tmp_path):
    sched, worker = cluster
    out = tmp_path / "env.json"
    command = f"{sys.executable} -c 'import json, os; json.dump(dict(os.environ), " \
              f"open(\"{out}\" + os.environ[\"LOCAL_RANK\"], \"w\"))'"
    ack = sched.worker_stub(worker.address).RunJob(run_job(
        "envjob", command=command, gpus=(1, 0), rank=4, world=8, sched=sched))
    assert ack.ok, ack.message
    report = report_of(sched, "envjob")
    assert (report.exit_code, report.failed) == (0, False)
    for local in (0, 1):
        env = json.loads(Path(f"{out}{local}").read_text())
        assert env["CUDA_VISIBLE_DEVICES"] == "1,0"
        assert (env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"]) == (str(4 + local),
                                                                       str(local), "8")
        assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("127.0.0.1", "29511")
        assert env["GAVEL_SCHEDULER"] == sched.address and env["GAVEL_JOB_ID"] == "envjob"
        assert env["GAVEL_SERVER_ID"] == str(worker.server_id)
        assert env["GAVEL_TOTAL_STEPS"] == "10" and env["GAVEL_STEPS_DONE"] == "0"
        assert Path(env["GAVEL_TOKEN_FILE"]).read_text().strip() == TOKEN
        assert "GAVEL_EMULATE_STEPS_PER_S" not in env     # this worker does not emulate


def test_kills_a_job_that_outlives_its_lease(cluster):
    sched, worker = cluster
    ack = sched.worker_stub(worker.address).RunJob(run_job(
        "sleeper", command="sleep 600", max_seconds=0.5))
    assert ack.ok
    report = report_of(sched, "sleeper")
    assert report.exit_code != 0 and not report.failed
    assert "outlived its lease" in report.reason
    assert worker.launcher.running_jobs() == []


def test_reports_a_failing_jobs_reason(cluster):
    sched, worker = cluster
    sched.worker_stub(worker.address).RunJob(run_job(
        "bad", command="echo starting >&2; echo 'ValueError: bad input x=3' >&2; exit 4"))
    report = report_of(sched, "bad")
    assert (report.exit_code, report.failed) == (4, True)
    assert report.reason == "ValueError: bad input x=3"


def test_kill_job(cluster):
    sched, worker = cluster
    stub = sched.worker_stub(worker.address)
    stub.RunJob(run_job("victim", command="sleep 600"))
    sched.wait_for(lambda: worker.launcher.running_jobs() == ["victim"])
    assert stub.KillJob(pb.KillJobRequest(job_id="victim", reason="preempted")).ok
    report = report_of(sched, "victim")
    assert not report.failed and report.reason == "preempted"


def test_a_rounds_runjobs_in_one_call_are_each_taken_alone(cluster, monkeypatch):
    """``RunJobs`` (a round's RunJobs for this worker, in one call): each is taken as its
    own RunJob, in order, with an ack each; a bad one, and one that fails here, is refused
    alone and the others run."""
    sched, worker = cluster
    stub = sched.worker_stub(worker.address)
    run = worker.run_job

    def run_or_fail(request):
        if request.job_id == "boom":
            raise OSError("no such device")
        return run(request)

    monkeypatch.setattr(worker, "run_job", run_or_fail)
    answer = stub.RunJobs(pb.RunJobsRequest(runs=[
        run_job("first", command="sleep 600"), run_job("bad", gpus=(7,)),
        run_job("boom", gpus=(1,)), run_job("second", command="sleep 600", gpus=(1,))]))
    assert [a.ok for a in answer.acks] == [True, False, False, True]
    assert "bad RunJob for job 'bad'" in answer.acks[1].message
    assert answer.acks[2].message == ("RunJob for job boom failed on this worker: OSError: no "
                                      "such device")
    sched.wait_for(lambda: sorted(worker.launcher.running_jobs()) == ["first", "second"])


@pytest.mark.parametrize("job_id", ["", "..", "../escape", "a/b", ".hidden", "a\nb"])
def test_a_run_job_whose_id_is_not_a_plain_name_is_refused_and_nothing_starts(
        cluster, tmp_path, job_id):
    """Its checkpoints (``work/checkpoints/<job>``) and logs would climb out of the work
    dir: refused at the door, in one line, before anything is made."""
    sched, worker = cluster
    before = sorted(tmp_path.rglob("*"))
    answer = sched.worker_stub(worker.address).RunJob(run_job(job_id, command="sleep 600"))
    assert not answer.ok and "\n" not in answer.message
    assert answer.message.startswith("bad RunJob: bad job id")
    assert worker.launcher.running_jobs() == []
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.parametrize("field, value, words", [
    ("env", {"A": "x\0y"}, "env A: must not contain a NUL"),
    ("env", {"A=B": "1"}, "env name: must not contain '='"),
    ("env", {"": "1"}, "env name: must not be empty"),
    ("job_type", "a\0b", "job_type: must not contain a NUL"),
    ("master_addr", "host\nname", "master_addr: must not contain control"),
    ("checkpoint_dir", "/tmp/a\0b", "checkpoint_dir: must not contain a NUL"),
    ("command", "sleep 600\0", "command: must not contain a NUL"),
])
def test_a_run_job_no_process_can_be_given_is_refused_in_one_line(cluster, field, value,
                                                                   words):
    """(The launch used to fail past the door, with a traceback in the worker's log.)"""
    sched, worker = cluster
    request = run_job("nul", command="sleep 600")
    if field == "env":
        request.env.update(value)
    else:
        setattr(request, field, value)
    answer = sched.worker_stub(worker.address).RunJob(request)
    assert not answer.ok and "\n" not in answer.message
    assert answer.message.startswith(f"bad RunJob for job 'nul': {words}"), answer.message
    assert worker.launcher.running_jobs() == []


def test_run_job_without_the_token_is_refused_and_nothing_starts(cluster, tmp_path):
    sched, worker = cluster
    marker = tmp_path / "ran"
    for token in (None, "wrong"):
        with pytest.raises(grpc.RpcError) as err:
            sched.worker_stub(worker.address, token=token).RunJob(
                run_job("evil", command=f"touch {marker}"))
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    time.sleep(0.5)
    assert not marker.exists() and worker.launcher.running_jobs() == []
    assert not any(r.job_id == "evil" for r in sched.log.rounds)


def test_re_registers_when_the_scheduler_forgets_it(cluster):
    sched, worker = cluster
    sched.known = False
    again = sched.wait_for(lambda: len(sched.log.registrations) >= 2 and
                           sched.log.registrations[1])
    assert again.previous_server_id == worker.server_id


def test_extension_moves_the_deadline_without_relaunch(cluster):
    sched, worker = cluster
    stub = sched.worker_stub(worker.address)
    stub.RunJob(run_job("long", command="sleep 600", max_seconds=1.0))
    ack = stub.RunJob(run_job("long", command="sleep 600", max_seconds=600.0))
    assert ack.ok and ack.message == "lease extended"
    time.sleep(2.0)     # past the first lease + grace: still running, same process
    assert worker.launcher.running_jobs() == ["long"]
    assert not any(r.job_id == "long" for r in sched.log.rounds)


def test_data_parallel_workload_through_the_worker(cluster, tmp_path):
    """A 2-rank DDP (gloo) reference workload launched by the worker runs to its lease."""
    sched, worker = cluster
    sched.jobs["ddp"] = FakeJob(total_steps=6, lease=lambda job, rank: pb.Lease(
        max_steps=6, max_seconds=120))
    ckpt = tmp_path / "ckpt"
    ack = sched.worker_stub(worker.address).RunJob(run_job(
        "ddp", workload="recoder", job_type="Recommendation (batch size 2048)", gpus=(0, 1),
        world=2, total=6, max_seconds=120, ckpt=str(ckpt), sched=sched))
    assert ack.ok
    report = sched.wait_for(lambda: next((r for r in sched.log.rounds if r.job_id == "ddp"),
                                         None), timeout=120)
    assert (report.exit_code, report.failed) == (0, False), report.reason
    assert report.steps == 6 == checkpoints.latest(ckpt).steps == sched.jobs["ddp"].steps_done
    assert {i.rank for i in sched.log.inits if i.job_id == "ddp"} == {0, 1}


def test_emulated_k80_is_slower_than_v100_by_about_the_table_ratio(tmp_path):
    """The same `steps` job, paced on an emulated k80 and an emulated v100."""
    job_type = "ResNet-50 (batch size 64)"
    table = default_table()
    ratio = table.get("v100", job_type) / table.get("k80", job_type)
    assert ratio > 5
    speed = 60.0 / table.get("v100", job_type)      # v100: 60 steps/s, k80: 60/ratio
    sched = FakeScheduler()
    sched.start()
    steps = 30
    seconds = {}
    try:
        for wtype in ("k80", "v100"):
            worker = Worker(WorkerConfig(
                scheduler=sched.address, worker_type=wtype, gpus=1,
                work_dir=tmp_path / wtype, emulation=Emulation(wtype, table, speed)))
            worker.start()
            try:
                job = f"paced-{wtype}"
                sched.jobs[job] = FakeJob(total_steps=steps)
                sched.worker_stub(worker.address).RunJob(run_job(
                    job, workload="steps", job_type=job_type, total=steps, sched=sched))
                report = report_of(sched, job)
                assert report.exit_code == 0 and report.steps == steps
                # From InitJob to the final durable report: the paced steps, no start-up.
                init = sched.log.init_times[[i.job_id for i in sched.log.inits].index(job)]
                end = sched.log.step_times[[r.job_id for r in sched.log.steps].index(job)]
                seconds[wtype] = end - init
            finally:
                worker.stop()
    finally:
        sched.stop()
    # k80: 30 steps at 60/ratio steps/s (~4.6 s); v100: 30 steps at 60 steps/s (0.5 s).
    assert seconds["k80"] > 3 * seconds["v100"]
    assert seconds["k80"] > 0.5 * steps / (60.0 / ratio)


def test_cli_bad_flags_exit_2_with_one_line(capsys, tmp_path):
    """(The flags after the first six once gave a traceback, a worker that never stopped,
    or a process that made workers until it ran out of memory.)"""
    from gavelsched.cli import main

    good = ["--scheduler", "a:1", "--type", "k80", "--gpus", "1", "--work-dir",
            str(tmp_path / "w")]
    for argv in (["--scheduler", "nohostport", "--type", "k80", "--gpus", "1"],
                 ["--scheduler", "a:1", "--type", "k80", "--gpus", "0"],
                 ["--scheduler", "a:1", "--type", "k80", "--gpus", "x"],
                 ["--scheduler", "a:1", "--type", "h100", "--gpus", "1"],
                 ["--scheduler", "a:1", "--type", "k80", "--gpus", "1",
                  "--emulation-speed", "-1"],
                 ["--scheduler", "a:1", "--type", "k80", "--gpus", "1",
                  "--token-file", "/nonexistent/token"],
                 ["--type", "k80", "--gpus", "1"],
                 [*good, "--gpus", "99999999999"], [*good, "--gpus", "4097"],
                 [*good, "--emulation-speed", "inf"], [*good, "--grace", "nan"],
                 [*good, "--grace", "inf"], [*good, "--hollow", "100000000"],
                 [*good, "--work-dir", "/dev/null"]):
        try:
            code = main(["worker", *argv])
        except SystemExit as exit_:
            code = exit_.code
        err = capsys.readouterr().err
        assert code == 2, err
        assert len(err.strip().splitlines()) == 1, err
        assert err.startswith("gavelsched worker: error:") and "Traceback" not in err


def test_an_unreachable_scheduler_is_said_once_then_registration_gives_up(tmp_path, caplog):
    """Nothing listens at the scheduler's address: the worker says once that it retries
    and for how long, then fails with one line naming the address and the gRPC code."""
    with socket.socket() as probe:      # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"
    worker = Worker(WorkerConfig(scheduler=address, worker_type="k80", gpus=1,
                                 work_dir=tmp_path / "work"))
    with (caplog.at_level(logging.WARNING, logger="workers.daemon.worker"),
          pytest.raises(WorkerError) as err):
        worker.start(register_timeout_s=1.5)
    assert str(err.value) == f"cannot register with scheduler {address}: UNAVAILABLE"
    waiting = [r.getMessage() for r in caplog.records if "not reachable" in r.getMessage()]
    assert len(waiting) == 1, waiting
    assert waiting[0].startswith(f"scheduler {address} not reachable (UNAVAILABLE): "
                                 "retrying for up to ")


def test_cli_refused_token_is_one_line(tmp_path):
    sched = FakeScheduler(token=TOKEN)
    sched.start()
    try:
        bad = tmp_path / "token"
        bad.write_text("not-the-token")
        proc = subprocess.run([sys.executable, "-m", "gavelsched", "worker", "--scheduler",
                               sched.address, "--type", "k80", "--gpus", "1", "--listen",
                               "127.0.0.1:0", "--token-file", str(bad), "--work-dir",
                               str(tmp_path / "w")], capture_output=True, text=True,
                              timeout=60, check=False)
    finally:
        sched.stop()
    assert proc.returncode == 2
    expected = (f"gavelsched worker: error: scheduler {sched.address} refused this worker: "
                "missing or wrong auth token")
    assert proc.stderr.strip().splitlines() == [expected]


def test_shutdown_kills_jobs_reports_them_and_stops(tmp_path):
    sched = FakeScheduler()
    sched.start()
    worker = Worker(WorkerConfig(scheduler=sched.address, worker_type="p100", gpus=1,
                                 work_dir=tmp_path / "w"))
    worker.start()
    try:
        stub = sched.worker_stub(worker.address)
        stub.RunJob(run_job("resident", command="sleep 600"))
        sched.wait_for(lambda: worker.launcher.running_jobs() == ["resident"])
        assert stub.Shutdown(pb.ShutdownRequest(reason="maintenance")).ok
        assert worker.wait(30)
        report = report_of(sched, "resident")
        assert not report.failed and report.reason == "maintenance"
    finally:
        worker.stop()
        sched.stop()


def test_a_job_queued_behind_a_busy_gpu_starts_when_it_frees_or_is_dropped(cluster, tmp_path):
    sched, worker = cluster
    stub = sched.worker_stub(worker.address)
    stub.RunJob(run_job("first", command="sleep 600", gpus=(0,)))
    ack = stub.RunJob(run_job("second", command=f"touch {tmp_path / 'second'}", gpus=(0,)))
    assert ack.ok and "queued" in ack.message
    assert stub.KillJob(pb.KillJobRequest(job_id="first", reason="round over")).ok
    assert report_of(sched, "second").exit_code == 0      # launched once GPU 0 was free
    assert (tmp_path / "second").exists()
    stub.RunJob(run_job("third", command="sleep 600", gpus=(1,)))
    stub.RunJob(run_job("fourth", command="sleep 600", gpus=(1,)))
    assert stub.KillJob(pb.KillJobRequest(job_id="fourth", reason="preempted")).ok
    dropped = report_of(sched, "fourth")
    assert not dropped.failed and dropped.reason == "preempted (before it started)"


def test_a_later_placement_supersedes_a_launch_still_queued_on_its_gpu(cluster, tmp_path):
    """Two queued launches for one GPU never both run: the later placement wins and the
    earlier is reported as never started (one process per GPU at any time)."""
    sched, worker = cluster
    stub = sched.worker_stub(worker.address)
    stub.RunJob(run_job("busy", command="sleep 600", gpus=(0,)))
    stub.RunJob(run_job("stale", command=f"touch {tmp_path / 'stale'}", gpus=(0,)))
    stub.RunJob(run_job("fresh", command=f"touch {tmp_path / 'fresh'}", gpus=(0,)))
    stale = report_of(sched, "stale")
    assert not stale.failed and "superseded" in stale.reason
    assert stub.KillJob(pb.KillJobRequest(job_id="busy", reason="round over")).ok
    assert report_of(sched, "fresh").exit_code == 0
    assert (tmp_path / "fresh").exists() and not (tmp_path / "stale").exists()


def test_heartbeats_go_on_while_round_reports_wait_on_a_busy_scheduler(tmp_path):
    # issue #30: at 2,048 GPUs a scheduler slow to answer ReportRound held the heartbeat
    # thread that retried the reports, and the server was failed as silent. Here the first
    # report fails, and its retry is answered only once 3 more heartbeats have come.
    class SlowReports(FakeScheduler):
        tries = 0
        beats_meanwhile = 0

        def ReportRound(self, request, context):
            self.tries += 1
            if self.tries == 1:
                context.abort(grpc.StatusCode.UNAVAILABLE, "busy")
            if self.tries == 2:
                before = len(self.log.heartbeats)
                self.wait_for(lambda: len(self.log.heartbeats) >= before + 3, timeout=8)
                self.beats_meanwhile = len(self.log.heartbeats) - before
            return super().ReportRound(request, context)

    sched = SlowReports()
    sched.start()
    worker = Worker(WorkerConfig(scheduler=sched.address, worker_type="k80", gpus=1,
                                 work_dir=tmp_path / "work", grace_s=0.5))
    worker.start()
    try:
        sched.worker_stub(worker.address).RunJob(run_job("quick", command="true"))
        assert report_of(sched, "quick").exit_code == 0
        assert sched.beats_meanwhile >= 3         # heartbeats went on during the retry
    finally:
        worker.stop()
        sched.stop()


def test_heartbeats_keep_their_cadence_from_each_send_not_each_answer():
    # issue #30: at 100,000 jobs on a busy host the scheduler took 2-10 s to answer a
    # heartbeat; waiting a period after each answer stretched the silence it judges servers
    # by to period + answer, and servers that were heard were failed
    assert next_beat(10.0, 10.3, 2.0) == 12.0      # answered in 0.3 s: due a period on
    assert next_beat(10.0, 14.5, 2.0) == 14.5      # answered in 4.5 s: the next one at once
    assert next_beat(14.5, 14.6, 2.0) == 16.5      # then the cadence from there, no burst


def test_a_worker_leaving_before_it_registered_stops_without_registering(tmp_path):
    """SIGTERM while it registers (``Worker.leave`` before ``start`` has the server id):
    it stops. Before, its leaving heartbeat named server -1, which the scheduler does not
    know, and the worker registered a second time on the way out."""
    sched = FakeScheduler()
    sched.known = False
    sched.start()
    try:
        worker = Worker(WorkerConfig(scheduler=sched.address, worker_type="k80", gpus=1,
                                     work_dir=tmp_path / "work", grace_s=0.5))
        worker.leave(timeout_s=5.0)
        assert worker.wait(0)
        assert sched.log.registrations == [] and sched.log.heartbeats == []
    finally:
        sched.stop()
