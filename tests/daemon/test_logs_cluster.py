"""``gavelsched logs`` and ``history`` on a real cluster (issue #18): the real scheduler and
two real emulated worker daemons on loopback with a token; three jobs share the two GPUs, so
their runs are preempted and placed again, on either worker. A job's output comes from the
workers that ran it, through the scheduler, over the token-checked channel, exactly as the
files on the workers hold it and in order (round, rank, stream); ``--follow`` ends when
the job does; a job id that names a path is refused; ``status`` and ``history`` filter by
state, type and entity."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import grpc
import pytest

from gavelsched.rpc import pb, pb_grpc
from gavelsched.rpc.security import channel

from .cluster import ENV, JOB_TYPE, Cluster, wait_until

TOKEN = "logs-token"
STREAMS = ("out", "err")
# A job that says which round and rank it is, on both streams, then steps GavelIterator.
COMMAND = ("echo out round $GAVEL_ROUND rank $RANK; echo err round $GAVEL_ROUND rank $RANK "
           f">&2; exec {sys.executable} -m workers.workloads.steps")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("logs"), token=TOKEN, round_seconds=2.0)
    try:
        c.start_scheduler()
        c.start_worker("v100")
        c.start_worker("k80")
        wait_until(lambda: c.alive_workers() == 2, 60, "two workers")
        c.jobs_ = [c.submit(60, workload="", command=COMMAND, entity=entity)
                   for entity in ("teamA", "teamA", "teamB")]
        done = c.wait_done(c.jobs_, timeout=180)
        assert all(done[j].state == "done" for j in c.jobs_), done
        yield c
    finally:
        c.stop()


def gavelsched(c: Cluster, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The CLI a user runs: a fresh process."""
    return subprocess.run([sys.executable, "-m", "gavelsched", *args, "--scheduler",
                           c.address, "--token-file", str(c.token_file)], env=ENV,
                          capture_output=True, timeout=timeout)


def on_disk(c: Cluster, job: str) -> list[tuple[int, int, int, bytes]]:
    """Every log file of the job on the workers: (round, rank, stream, bytes), in order."""
    files = []
    for path in c.root.glob(f"worker*/logs/{job}/round*-rank*.*"):
        round_, rank = path.stem.removeprefix("round").split("-rank")
        files.append((int(round_), int(rank), STREAMS.index(path.suffix[1:]),
                      path.read_bytes()))
    return sorted(files)


def status_ids(c: Cluster, *flags: str) -> set[str]:
    """The job ids of ``gavelsched status`` (its rows: after two header lines, before the
    workers)."""
    lines = gavelsched(c, "status", *flags).stdout.decode().splitlines()
    return {line.split()[0] for line in lines[2:lines.index(next(
        x for x in lines if x.startswith("workers:")))]}


def streamed(c: Cluster, job: str, **kw) -> list[pb.LogChunk]:
    return list(pb_grpc.ClientToSchedulerStub(c.chan).Logs(
        pb.LogsRequest(job_id=job, **kw), timeout=60))


def test_logs_are_the_workers_files_in_order(cluster):
    rounds = set()
    for job in cluster.jobs_:
        chunks = streamed(cluster, job)
        assert not [c.error for c in chunks if c.error]
        keys = [(c.file.round, c.file.rank, STREAMS.index(c.file.stream), c.server_id)
                for c in chunks]
        assert keys == sorted(keys)
        files: dict[tuple, bytes] = {}
        for c in chunks:
            key = (c.file.round, c.file.rank, STREAMS.index(c.file.stream), c.server_id)
            assert c.offset == len(files.get(key, b""))
            files[key] = files.get(key, b"") + c.data
        assert sorted((*k[:3], data) for k, data in files.items()) == on_disk(cluster, job)
        for (round_, rank, stream, _), data in files.items():
            assert data.startswith(f"{STREAMS[stream]} round {round_} rank {rank}\n".encode())
        rounds |= {k[0] for k in files}
    assert len(rounds) >= 2                  # runs in several rounds were stitched


def test_the_cli_prints_each_file_under_a_header(cluster):
    job = cluster.jobs_[0]
    got = gavelsched(cluster, "logs", job)
    assert got.returncode == 0, got.stderr
    headers = re.findall(r"^==> round (\d+), rank (\d+), std(out|err) \(server \d+, .+\) <==$",
                         got.stdout.decode(), flags=re.MULTILINE)
    assert [(int(r), int(k), STREAMS.index(s)) for r, k, s in headers] == [
        f[:3] for f in on_disk(cluster, job)]
    plain = gavelsched(cluster, "logs", job, "--no-headers", "--stream", "err", "--rank", "0")
    assert plain.stdout == b"".join(d for r, k, s, d in on_disk(cluster, job) if s == 1)


def test_follow_ends_when_the_job_does(cluster):
    job = cluster.submit(80, workload="", command=COMMAND, entity="teamC")
    got = gavelsched(cluster, "logs", job, "--follow", "--no-headers", "--stream", "out")
    assert got.returncode == 0, got.stderr
    assert cluster.jobs()[job].state == "done"
    lines = got.stdout.decode().splitlines()
    assert sorted(lines) == sorted(line for r, k, s, d in on_disk(cluster, job) if s == 0
                                   for line in d.decode().splitlines())
    assert lines and all(line.startswith("out round ") for line in lines)


@pytest.mark.parametrize("job_id", ["../../etc", "..", "0/../..", "../worker0/logs/0"])
def test_a_job_id_that_names_a_path_is_refused(cluster, job_id):
    with pytest.raises(grpc.RpcError) as err:
        streamed(cluster, job_id)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    got = gavelsched(cluster, "logs", job_id)
    assert got.returncode == 2 and got.stderr.decode().count("\n") == 1
    assert "NOT_FOUND: unknown job" in got.stderr.decode()


def test_logs_without_the_token_are_refused(cluster):
    stub = pb_grpc.ClientToSchedulerStub(channel(cluster.address, token=None))
    with pytest.raises(grpc.RpcError) as err:
        list(stub.Logs(pb.LogsRequest(job_id=cluster.jobs_[0]), timeout=10))
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_status_and_history_filter_by_state_type_and_entity(cluster):
    team_a = set(cluster.jobs_[:2])
    got = gavelsched(cluster, "history", "--json", "--state", "done", "--type", JOB_TYPE,
                     "--entity", "teamA")
    assert got.returncode == 0, got.stderr
    jobs = json.loads(got.stdout)["jobs"]
    assert {j["id"] for j in jobs} == team_a
    for j in jobs:
        assert j["started_s"] >= j["arrival_s"] and j["ended_s"] == j["completion_s"]
        assert j["jct_s"] == pytest.approx(j["completion_s"] - j["arrival_s"])
        assert j["elapsed_s"] == pytest.approx(j["ended_s"] - j["started_s"])
    table = gavelsched(cluster, "history", "--entity", "teamA").stdout.decode().splitlines()
    assert table[0].split() == ["id", "type", "user", "entity", "state", "submitted",
                                "started", "ended", "elapsed", "jct", "steps"]
    assert {line.split()[0] for line in table[1:]} == team_a
    assert status_ids(cluster, "--entity", "teamA") == set()      # none is active
    assert status_ids(cluster, "--all", "--entity", "teamA") == team_a
    bad = gavelsched(cluster, "status", "--state", "paused")
    assert bad.returncode == 2
    assert bad.stderr.decode().strip().endswith(
        "states: unknown state 'paused' (known: queued, running, preempted, held, done, failed, "
        "cancelled)")
