"""A worker of a GPU type the throughput table lacks brings a profile of its own throughputs
(issue #19; thesis §5.3.3's priors): the scheduler checks it at the door, learns the type
before the core sees its workers, keeps it across a restart, and places jobs on it.

On a real executor (hand-moved clock, recorded RunJobs) the rules exactly; then real
schedulers and real worker daemons over gRPC: ``--profile-file``, a worker that brought no
profile, and ``--profile`` (it measures with ``gavelsched profile`` in a subprocess, once:
the second start reuses the cached file)."""

from __future__ import annotations

import importlib.util
import json
import logging
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from gavelsched.cli import COMMAND_MODULES, main
from gavelsched.daemon.doors import worker_profile
from gavelsched.daemon.snapshot import build_snapshot
from gavelsched.rpc import pb, pb_grpc
from policies import get_policy
from simulator.live import state_of
from traces import profiles
from traces.catalog import default_table
from traces.profiles import MAX_JOB_TYPES, SCHEMA

from .cluster import ENV, Cluster, running, wait_until
from .test_pending_reasons import Bare

A3C = "A3C"
RATE = 50.0          # A3C's steps/s on the profiled h100 (a v100: 24)
DEVICE = "NVIDIA H100 80GB HBM3"


def profile_doc(worker_type: str = "h100", rate: float = RATE, **changes) -> dict:
    """A profile as ``gavelsched profile`` writes it: twice a v100 at one GPU, A3C at
    ``rate``."""
    table = default_table()
    rates = {job: 2 * table.get("v100", job) for job in table.job_types
             if table.get("v100", job) > 0}
    rates[A3C] = rate
    return {"schema": SCHEMA, "worker_type": worker_type, "device": DEVICE,
            "precision": "fp32", "reduced": False, "torch": "2.11.0+cu130", "cuda": "13.0",
            "measured_at": "2026-11-26T13:45:00+00:00", "seconds": 71.2,
            "steps_per_s": rates, **changes}


def wire(doc: dict) -> pb.WorkerProfile:
    return pb.WorkerProfile(precision=doc["precision"], device=doc["device"],
                            reduced=doc["reduced"], torch=doc["torch"],
                            rates=[pb.JobRate(job_type=j, steps_per_s=r)
                                   for j, r in doc["steps_per_s"].items()])


def registration(worker_type: str = "h100", doc: dict | None = None,
                 previous: int = -1) -> pb.RegisterWorkerRequest:
    return pb.RegisterWorkerRequest(worker_type=worker_type, gpus=1, address="127.0.0.1:1",
                                    hostname="h", previous_server_id=previous,
                                    profile=None if doc is None else wire(doc))


class Sched(Bare):
    """A real executor with no server yet; ``join`` registers one through the door."""

    def join(self, worker_type: str = "h100", doc: dict | None = None,
             previous: int = -1) -> int:
        request = registration(worker_type, doc, previous)
        return self.x.roster.register(request, self.t, worker_profile(request)).server_id

    def reason(self, job_id: str) -> str:
        return {j.id: j.reason for j in build_snapshot(self.x.view(self.t)).status().jobs}[job_id]


@pytest.fixture
def daemon_log(caplog):
    caplog.set_level(logging.INFO, logger="gavelsched.daemon")
    return caplog


# ---- the rules, on a real executor ------------------------------------------------------
def test_a_new_types_profile_is_learned_before_its_workers_join_and_kept_across_a_restart(
        tmp_path, daemon_log):
    doc = profile_doc()
    s = Sched(tmp_path)
    try:
        job = s.submit()
        server = s.join(doc=doc)
        assert s.x.table.get("h100", A3C) == RATE
        assert s.x.table.get("v100", A3C) == default_table().get("v100", A3C)
        assert (f"worker {server} (h100 x1) brought a profile of {len(doc['steps_per_s'])} "
                f"job types (fp32, {DEVICE}): priors for a type the table lacks"
                in daemon_log.text)
        s.at(1.0)
        assert [(r.job_id, r.expected_steps_per_s) for r in s.sent.runs] == [(job, RATE)]
    finally:
        s.close()
    again = Sched(tmp_path)                 # a restart on the same state
    try:
        assert again.x.table.get("h100", A3C) == RATE     # before any worker is back
        assert "priors of h100 from its profile kept from an earlier run" in daemon_log.text
        again.join(previous=server)          # back, with no profile this time
        again.at(1.0)
        assert [(r.job_id, r.expected_steps_per_s) for r in again.sent.runs] == [(job, RATE)]
    finally:
        again.close()


def test_a_learned_type_s_queue_is_served_fastest_first_and_a_replay_serves_them_so(tmp_path):
    """Thesis §5.5: the types' queues are served fastest first, the first taking the job
    first in line (two jobs with the same X on both here). An h100 learned after the start
    comes before the k80 (before, after every type the table had: job 0 got the k80), and
    the Status says so, so that a replay serves them in the same order."""
    s = Sched(tmp_path)
    try:
        s.join("k80")
        s.join(doc=profile_doc())            # h100: twice a v100
        order = s.x.core.config.type_order
        assert order.index("h100") < order.index("v100") < order.index("k80")
        jobs = (s.submit(), s.submit())
        s.at(1.0)
        assert [(r.job_id, r.expected_steps_per_s) for r in s.sent.runs] == [
            (jobs[0], RATE), (jobs[1], default_table().get("k80", A3C))]
        rules = state_of(build_snapshot(s.x.view(s.t)).response).rules
        assert rules.type_order == order
        assert rules.core_config(get_policy("max_min_fairness_perf"), default_table(),
                                 ["k80", "h100"]).type_order == order
    finally:
        s.close()


def test_a_profile_for_a_type_already_served_waits_for_the_next_start(tmp_path, daemon_log):
    s = Sched(tmp_path)
    try:
        job = s.submit()                     # before any worker: no size check yet
        server = s.join()                    # no profile: h100 runs nothing
        assert "(h100 x1) brought no profile, and the throughput table has no h100" in \
            daemon_log.text
        s.at(1.0)
        assert s.sent.runs == []
        assert s.reason(job) == ("pending: no registered worker type runs A3C at scale factor "
                                 "1 (it runs on k80, p100, v100; registered: h100: 1)")
        s.join(doc=profile_doc(), previous=server)          # it restarts with a profile
        assert "kept for the next start: the scheduler already plans with h100" in \
            daemon_log.text
        assert "h100" not in s.x.table.worker_types
        second = s.join(doc=profile_doc(rate=7.0))           # a second h100 server
        assert "ignored: the first profile of h100 is kept" in daemon_log.text
        s.at(2.0)
        assert s.sent.runs == []
    finally:
        s.close()
    again = Sched(tmp_path)
    try:
        assert again.x.table.get("h100", A3C) == RATE        # the first profile
        again.join(previous=server)
        again.join(previous=second)        # (a restarted scheduler plans once both are back)
        again.at(1.0)
        assert [(r.job_id, r.expected_steps_per_s) for r in again.sent.runs] == [(job, RATE)]
    finally:
        again.close()


def test_a_worker_without_a_profile_gets_the_shipped_row(tmp_path, monkeypatch, daemon_log):
    measured = tmp_path / "measured"
    measured.mkdir()
    (measured / "h100-fp32.json").write_text(json.dumps(profile_doc()))
    monkeypatch.setattr(profiles, "MEASURED_DIR", measured)
    s = Sched(tmp_path)
    try:
        job = s.submit()
        s.join()
        assert "brought no profile: priors for a type the table lacks, from the shipped " \
               "measured row of" in daemon_log.text
        assert s.store.get_meta("profile/h100") is None     # read from the package again
        s.at(1.0)
        assert [(r.job_id, r.expected_steps_per_s) for r in s.sent.runs] == [(job, RATE)]
    finally:
        s.close()


def test_a_profile_of_a_known_type_fills_only_the_job_types_the_table_lacks(tmp_path,
                                                                           daemon_log):
    s = Sched(tmp_path)
    try:
        s.join("v100", {**profile_doc("v100"), "steps_per_s": {A3C: 99.0, "New model": 5.0}})
        assert s.x.table.get("v100", A3C) == default_table().get("v100", A3C)
        assert s.x.table.get("v100", "New model") == 5.0
        assert "priors for 1 job type the table lacks on v100" in daemon_log.text
        s.join("k80", {**profile_doc("k80"), "steps_per_s": {A3C: 99.0}})
        assert "ignored: the throughput table has every job type it measured" in \
            daemon_log.text
    finally:
        s.close()


# ---- the door, over gRPC ----------------------------------------------------------------
def bad(**changes) -> dict:
    return {**profile_doc(), **changes}


@pytest.mark.parametrize("profile, words", [
    (wire(bad(precision="fp16")), "precision"),
    (wire(bad(steps_per_s={A3C: float("nan")})), "finite"),
    (wire(bad(steps_per_s={A3C: 0.0})), "> 0"),
    (wire(bad(steps_per_s={A3C: -1.0})), "> 0"),
    (wire(bad(steps_per_s={"": 1.0})), "must not be empty"),
    (wire(bad(steps_per_s={"A3\nC": 1.0})), "control"),
    (wire(bad(steps_per_s={})), "at least one job type"),
    (wire(bad(device="H100\nHBM3")), "device"),
    (pb.WorkerProfile(precision="fp32", rates=[pb.JobRate(job_type=A3C, steps_per_s=1.0),
                                               pb.JobRate(job_type=A3C, steps_per_s=2.0)]),
     "listed twice"),
    (pb.WorkerProfile(precision="fp32", rates=[pb.JobRate(job_type=str(i), steps_per_s=1.0)
                                               for i in range(MAX_JOB_TYPES + 1)]),
     f"at most {MAX_JOB_TYPES} rates"),
])
def test_a_bad_profile_is_refused_at_the_door_in_one_line(scheduler, profile, words):
    stub = pb_grpc.WorkerToSchedulerStub(scheduler.chan)
    before = _registered(scheduler, stub)
    request = registration()
    request.profile.CopyFrom(profile)
    with pytest.raises(grpc.RpcError) as err:
        stub.RegisterWorker(request, timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = err.value.details()
    assert details.startswith("profile: ") and words in details, details
    assert len(details.splitlines()) == 1 and len(details) < 300, details
    assert _registered(scheduler, stub) == before + 1    # still serving; nothing else came


def _registered(scheduler, stub) -> int:
    """Servers registered once a good registration made now shows in ``status`` (whose
    picture is republished after a change, not at once): a count nothing stale hides."""
    ok = stub.RegisterWorker(registration(doc=profile_doc()), timeout=30)
    wait_until(lambda: str(ok.server_id) in {w.id for w in scheduler.status().workers},
               30, f"server {ok.server_id} in status")
    return len(scheduler.status().workers)


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory):
    with running(Cluster(tmp_path_factory.mktemp("door"))) as cluster:
        yield cluster


# ---- real worker daemons ----------------------------------------------------------------
def start_worker(cluster: Cluster, worker_type: str, work_dir: Path, *flags: str,
                 log: str = "h100-worker.log") -> subprocess.Popen:
    """``gavelsched worker`` with ``flags``, its output appended to ``root/log``; stopped
    with the cluster."""
    argv = [sys.executable, "-m", "gavelsched", "worker", "--scheduler", cluster.address,
            "--type", worker_type, "--gpus", "1", "--listen", "127.0.0.1:0",
            "--work-dir", str(work_dir), "--grace", "3", *flags]
    with open(cluster.root / log, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=ENV)
    cluster.workers.append(proc)
    proc.log = cluster.root / log
    return proc


def stop_worker(proc: subprocess.Popen) -> None:
    """SIGTERM, then the worker exits within 30 s; if not, the failure shows its log with
    every thread's stack (SIGUSR1)."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)
        time.sleep(2)
        pytest.fail("the worker did not exit within 30 s of SIGTERM:\n"
                    + proc.log.read_text(errors="replace")[-20000:])


def read(cluster: Cluster, name: str) -> str:
    path = cluster.root / name
    return path.read_text(errors="replace") if path.exists() else ""


def test_a_worker_daemon_with_a_profile_file_runs_jobs_of_a_type_the_table_lacks(tmp_path):
    doc = profile_doc()
    path = tmp_path / "h100.json"
    path.write_text(json.dumps(doc))
    with running(Cluster(tmp_path / "cluster")) as c:
        start_worker(c, "h100", tmp_path / "w", "--profile-file", str(path))
        wait_until(lambda: c.alive_workers() == 1, 60, "the h100 worker")
        assert [(w.type, w.gpus) for w in c.status().workers] == [("h100", 1)]
        job = c.submit(80)
        done = c.wait_done([job], 120)[job]
        assert (done.state, done.steps_done) == ("done", 80), done.reason
        log = read(c, "scheduler.log")
        assert (f"brought a profile of {len(doc['steps_per_s'])} job types (fp32, {DEVICE}): "
                "priors for a type the table lacks") in log
        assert f"job {job} started on h100" in log
        assert f"profile of h100 from {path}" in read(c, "h100-worker.log")


def test_without_a_profile_a_job_waits_with_a_reason_then_the_profile_runs_it(tmp_path):
    """The worker first registers with no profile (``--emulate off``: nothing to pace by):
    the job waits with a reason. Restarted with its profile, the worker's type is already
    served, so the scheduler keeps the profile for its next start; after it restarts, the
    job runs on h100."""
    path = tmp_path / "h100.json"
    path.write_text(json.dumps(profile_doc()))
    work = tmp_path / "w"
    with running(Cluster(tmp_path / "cluster")) as c:
        job = c.submit(60)
        plain = start_worker(c, "h100", work, "--emulate", "off")
        wait_until(lambda: "registered: h100: 1" in c.jobs()[job].reason, 60,
                   "the reason to name the h100 worker")
        pending = c.jobs()[job]
        assert pending.state == "queued"
        assert pending.reason == ("pending: no registered worker type runs A3C at scale "
                                  "factor 1 (it runs on k80, p100, v100; registered: h100: 1)")
        stop_worker(plain)
        start_worker(c, "h100", work, "--profile-file", str(path))
        wait_until(lambda: "kept for the next start" in read(c, "scheduler.log"), 60,
                   "the profile to be kept")
        assert c.jobs()[job].state == "queued"
        c.kill9_scheduler()
        c.start_scheduler()
        done = c.wait_done([job], 120)[job]
        assert done.state == "done", done.reason
        log = read(c, "scheduler.log")
        assert "priors of h100 from its profile kept from an earlier run" in log
        assert f"job {job} started on h100" in log


def profile_command() -> bool:
    """Whether ``gavelsched profile`` is built (another part of issue #19)."""
    return ("profile" in COMMAND_MODULES
            and importlib.util.find_spec(f"gavelsched.cli.{COMMAND_MODULES['profile']}")
            is not None)


@pytest.mark.slow
@pytest.mark.skipif(not profile_command(), reason="gavelsched profile is not built yet")
def test_profile_measures_once_and_the_second_start_reuses_the_cache(tmp_path):
    work = tmp_path / "w"
    cache = work / "profile-h100.json"
    with running(Cluster(tmp_path / "cluster")) as c:
        first = start_worker(c, "h100", work, "--profile", "--profile-reduced")
        wait_until(lambda: c.alive_workers() == 1 or first.poll() is not None, 600,
                   "the worker to measure and register")
        log = read(c, "h100-worker.log")
        assert first.poll() is None, log
        assert log.count("measuring this machine's h100 throughputs") == 1, log
        assert "measured h100 in" in log, log
        measured = profiles.read_profile(cache)
        assert measured.worker_type == "h100" and measured.reduced
        assert "brought a profile of" in read(c, "scheduler.log")
        stop_worker(first)
        second = start_worker(c, "h100", work, "--profile", "--profile-reduced")
        wait_until(lambda: c.alive_workers() == 1 and "loaded from" in read(
            c, "h100-worker.log"), 120, "the second start")
        log = read(c, "h100-worker.log")
        assert log.count("measuring this machine's h100 throughputs") == 1, log
        assert f"profile of h100 loaded from {cache}" in log
        assert profiles.read_profile(cache) == measured
        assert second.poll() is None
        fastest = max(measured.steps_per_s, key=measured.steps_per_s.get)
        job = c.submit(20, job_type=fastest)
        assert c.wait_done([job], 120)[job].state == "done"


@pytest.mark.skipif(not profile_command(), reason="gavelsched profile is not built yet")
def test_a_failed_measurement_is_logged_and_the_worker_serves_without_a_profile(tmp_path):
    """``-o`` names a folder: ``gavelsched profile`` refuses it before measuring."""
    work = tmp_path / "w"
    (work / "profile-v100.json").mkdir(parents=True)
    with running(Cluster(tmp_path / "cluster")) as c:
        start_worker(c, "v100", work, "--profile", "--profile-reduced", log="v100.log")
        wait_until(lambda: c.alive_workers() == 1, 120, "the v100 worker")
        warning = next(line for line in read(c, "v100.log").splitlines()
                       if "measuring v100 failed" in line)
        assert "gavelsched profile: error:" in warning and "is a folder" in warning
        assert warning.endswith("registering without a profile")
        job = c.submit(30)
        assert c.wait_done([job], 120)[job].state == "done"
        assert "brought a profile" not in read(c, "scheduler.log")


# ---- the worker's flags -----------------------------------------------------------------
def test_worker_profile_flags_refused_in_one_line(tmp_path, capsys):
    other = tmp_path / "a100.json"
    other.write_text(json.dumps(profile_doc("a100")))
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(profile_doc(precision="fp8")))
    base = ["worker", "--scheduler", "127.0.0.1:1", "--type", "h100", "--gpus", "1",
            "--work-dir", str(tmp_path / "w")]
    for flags, words in ((["--profile-file", str(other)], "a profile of 'a100', not of "
                                                            "--type 'h100'"),
                         (["--profile-file", str(broken)], "precision"),
                         (["--profile-file", str(tmp_path / "none.json")], "none.json"),
                         (["--profile", "--profile-file", str(other)], "give one of them"),
                         (["--profile-reduced"], "goes with --profile")):
        assert main([*base, *flags]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("gavelsched worker: error:"), err
        assert words in err[0], err
