"""``ReadLogs`` on the worker daemon (issue #18): the job's log files in
``WORK_DIR/logs/<job>/``, listed in order and read from an offset, a capped number of bytes
at a time, only for a caller with the cluster's token; a job id that is not a plain name
(``..``, ``a/b``, ``../../etc``) and a file the request names but the worker does not write
are refused, and links are never followed (``workers/daemon/logfiles.py``)."""

from __future__ import annotations

import os
import time

import grpc
import pytest

from gavelsched.rpc import pb
from tests.workers.fake_scheduler import FakeScheduler
from workers.daemon import logfiles
from workers.daemon.logfiles import BadLogRequest, LogFile
from workers.daemon.worker import Worker, WorkerConfig

from .test_worker import TOKEN, report_of, run_job


@pytest.fixture
def cluster(tmp_path):
    """A fake scheduler and one 2-GPU k80 worker daemon, both requiring TOKEN."""
    sched = FakeScheduler(token=TOKEN)
    sched.start()
    worker = Worker(WorkerConfig(scheduler=sched.address, worker_type="k80", gpus=2,
                                 work_dir=tmp_path / "work", token=TOKEN, grace_s=0.5))
    worker.start()
    yield sched, worker
    worker.stop()
    sched.stop()


def write(work, job, name, data: bytes) -> None:
    folder = work / "logs" / job
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)


def test_listing_orders_rounds_ranks_and_streams_and_skips_other_files(tmp_path):
    for name, data in [("round10-rank0.out", b"a"), ("round2-rank1.err", b"bb"),
                       ("round2-rank1.out", b"ccc"), ("round2-rank0.err", b""),
                       ("notes.txt", b"x"), ("round2-rank0.out.bak", b"x")]:
        write(tmp_path, "7", name, data)
    (tmp_path / "logs" / "7" / "round3-rank0.out").mkdir()          # not a file
    assert logfiles.listing(tmp_path, "7") == [
        LogFile(2, 0, "err", 0), LogFile(2, 1, "out", 3), LogFile(2, 1, "err", 2),
        LogFile(10, 0, "out", 1)]
    assert logfiles.listing(tmp_path, "8") == []                    # never ran here


def test_read_from_an_offset_is_capped(tmp_path, monkeypatch):
    write(tmp_path, "7", "round1-rank0.out", b"0123456789")
    f = LogFile(1, 0, "out")
    assert logfiles.read(tmp_path, "7", f, 3, 4) == b"3456"
    assert logfiles.read(tmp_path, "7", f, 8, 100) == b"89"
    assert logfiles.read(tmp_path, "7", f, 10, 100) == b""
    assert logfiles.read(tmp_path, "7", LogFile(2, 0, "out"), 0, 100) == b""
    monkeypatch.setattr(logfiles, "MAX_READ_BYTES", 5)
    assert logfiles.read(tmp_path, "7", f, 0, 10**9) == b"01234"


@pytest.mark.parametrize("job_id", ["..", ".", "../work", "../../etc", "a/b", "/etc", "",
                                    ".hidden", "7\n", "x" * 200, "é"])
def test_a_job_id_that_is_not_a_plain_name_is_refused(tmp_path, job_id):
    with pytest.raises(BadLogRequest, match="bad job id"):
        logfiles.listing(tmp_path, job_id)
    with pytest.raises(BadLogRequest, match="bad job id"):
        logfiles.read(tmp_path, job_id, LogFile(0, 0, "out"), 0, 10)


def test_links_are_not_followed(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("token")
    (tmp_path / "logs" / "7").mkdir(parents=True)
    os.symlink(secret, tmp_path / "logs" / "7" / "round0-rank0.out")
    os.symlink(tmp_path, tmp_path / "logs" / "8")
    assert logfiles.listing(tmp_path, "7") == []              # a link is no log file
    assert logfiles.read(tmp_path, "7", LogFile(0, 0, "out"), 0, 100) == b""
    assert logfiles.listing(tmp_path, "8") == []              # nor a linked folder
    assert logfiles.read(tmp_path, "8", LogFile(0, 0, "out"), 0, 100) == b""
    with pytest.raises(BadLogRequest, match="no such log file"):
        logfiles.read(tmp_path, "7", LogFile(0, 0, "../../secret"), 0, 100)


def test_the_launcher_writes_where_the_reader_reads(tmp_path):
    assert logfiles.log_stem(tmp_path, "12", 3, 1) == tmp_path / "logs" / "12" / "round3-rank1"
    # a name that is not plain is made one: it never leaves logs/
    assert logfiles.log_stem(tmp_path, "../x", 0, 0).parent == tmp_path / "logs" / "_._x"
    assert logfiles.log_stem(tmp_path, "..", 0, 0).parent == tmp_path / "logs" / "_."


def test_read_logs_over_grpc_with_the_token(cluster):
    sched, worker = cluster
    stub = sched.worker_stub(worker.address)
    ack = stub.RunJob(run_job("talker", command="echo hello; echo oops >&2; echo bye",
                              gpus=(0, 1), world=2))
    assert ack.ok, ack.message
    report_of(sched, "talker")
    listed = stub.ReadLogs(pb.ReadLogsRequest(job_id="talker"))
    assert [(f.round, f.rank, f.stream, f.size) for f in listed.files] == [
        (0, 0, "out", 10), (0, 0, "err", 5), (0, 1, "out", 10), (0, 1, "err", 5)]
    assert not listed.data
    got = stub.ReadLogs(pb.ReadLogsRequest(job_id="talker", file=listed.files[2], offset=6,
                                           max_bytes=100))
    assert got.data == b"bye\n"
    assert stub.ReadLogs(pb.ReadLogsRequest(job_id="nobody")).files == []


@pytest.mark.parametrize("request_", [
    pb.ReadLogsRequest(job_id="../work"),
    pb.ReadLogsRequest(job_id=".."),
    pb.ReadLogsRequest(job_id="talker", file=pb.LogFile(round=0, rank=0, stream="../token")),
    pb.ReadLogsRequest(job_id="talker", file=pb.LogFile(round=0, rank=0, stream="out"),
                       offset=-1)])
def test_read_logs_refuses_a_path_outside_the_jobs_logs(cluster, request_):
    sched, worker = cluster
    with pytest.raises(grpc.RpcError) as err:
        sched.worker_stub(worker.address).ReadLogs(request_)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_read_logs_without_the_token_is_refused(cluster):
    sched, worker = cluster
    for token in (None, "wrong"):
        with pytest.raises(grpc.RpcError) as err:
            sched.worker_stub(worker.address, token=token).ReadLogs(
                pb.ReadLogsRequest(job_id="talker"))
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED


# ---- retention (``--log-retention-s``) -------------------------------------------------------
def aged(work, job, seconds_ago: float) -> None:
    """Job ``job``'s logs here, last written ``seconds_ago``."""
    write(work, job, "round0-rank0.out", b"x")
    when = time.time() - seconds_ago
    for path in (work / "logs" / job / "round0-rank0.out", work / "logs" / job):
        os.utime(path, (when, when))


def test_the_logs_of_jobs_not_run_here_for_the_retention_expire(tmp_path):
    aged(tmp_path, "7", 500)
    aged(tmp_path, "8", 50)
    aged(tmp_path, "9", 500)
    (tmp_path / "logs" / ".hidden").mkdir()                # no job's plain name
    os.utime(tmp_path / "logs" / ".hidden", (0, 0))
    os.symlink(tmp_path / "logs" / "7", tmp_path / "logs" / "10")    # a link
    now = time.time()
    assert logfiles.expired(tmp_path, 100, now, busy={"9"}) == ["7"]
    assert logfiles.expired(tmp_path, 0, now) == []         # 0: kept for ever
    assert logfiles.expired(tmp_path / "none", 100, now) == []
    write(tmp_path, "7", "round1-rank0.err", b"y")          # written again: young
    assert logfiles.expired(tmp_path, 100, time.time()) == ["9"]


def test_a_worker_removes_the_logs_past_its_retention_and_keeps_the_rest(tmp_path):
    sched = FakeScheduler(token=TOKEN)
    sched.start()
    work = tmp_path / "work"
    aged(work, "7", 500)
    aged(work, "8", 50)
    worker = Worker(WorkerConfig(scheduler=sched.address, worker_type="k80", gpus=1,
                                 work_dir=work, token=TOKEN, log_retention_s=100,
                                 log_sweep_s=0.2))
    try:
        worker.start()
        deadline = time.monotonic() + 10
        while (work / "logs" / "7").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not (work / "logs" / "7").exists() and (work / "logs" / "8").exists()
        assert worker.sweep_logs() == []
    finally:
        worker.stop()
        sched.stop()
