"""The ``Logs`` stream (``gavelsched/daemon/logs.py``) against in-memory workers: a job's
files come in order by round, rank and stream (stdout first) across servers, in pages,
filtered by rank and stream; ``follow`` sends what was added until a pass that began after
the job ended; a server that cannot be read is said once; a client that left ends it."""

from __future__ import annotations

import grpc
import pytest

from gavelsched.daemon import logs
from gavelsched.daemon.logs import LogSources, Source, stream_logs
from gavelsched.rpc import pb

A, B = Source(1, "a:1", "host-a"), Source(2, "b:1", "host-b")


class Down(grpc.RpcError):
    def code(self):
        return grpc.StatusCode.UNAVAILABLE

    def details(self):
        return "connection refused"


class Workers:
    """``ReadLogs`` of workers whose files are in memory: address -> {(round, rank,
    stream): bytes}; an address in ``down`` refuses."""

    def __init__(self, files: dict[str, dict[tuple[int, int, str], bytes]]) -> None:
        self.files, self.down, self.calls = files, set(), 0

    def __call__(self, address: str, request: pb.ReadLogsRequest) -> pb.ReadLogsResponse:
        self.calls += 1
        if address in self.down:
            raise Down()
        here = self.files.get(address, {})
        listed = [pb.LogFile(round=r, rank=k, stream=s, size=len(data))
                  for (r, k, s), data in sorted(here.items())]
        data = b""
        if request.HasField("file"):
            f = request.file
            data = here[(f.round, f.rank, f.stream)][request.offset:
                                                     request.offset + request.max_bytes]
        return pb.ReadLogsResponse(files=listed, data=data)


def order(chunks) -> list[tuple]:
    keys = []
    for c in chunks:
        key = (c.file.round, c.file.rank, c.file.stream, c.server_id)
        if not keys or keys[-1] != key:
            keys.append(key)
    return keys


FILES = {"a:1": {(1, 0, "out"): b"r1 out\n", (1, 0, "err"): b"r1 err\n",
                 (4, 0, "out"): b"r4 out a\n"},
         "b:1": {(2, 0, "err"): b"r2 err\n", (2, 0, "out"): b"r2 out\n",
                 (4, 1, "out"): b"r4 out b\n", (4, 0, "out"): b"r4 again\n"}}


def test_files_come_by_round_rank_and_stream_across_servers():
    chunks = list(stream_logs(pb.LogsRequest(job_id="3"), lambda: LogSources((B, A), True),
                              Workers(FILES)))
    assert order(chunks) == [(1, 0, "out", 1), (1, 0, "err", 1), (2, 0, "out", 2),
                             (2, 0, "err", 2), (4, 0, "out", 1), (4, 0, "out", 2),
                             (4, 1, "out", 2)]
    assert b"".join(c.data for c in chunks) == (b"r1 out\nr1 err\nr2 out\nr2 err\nr4 out a\n"
                                                b"r4 again\nr4 out b\n")
    assert {(c.server_id, c.host) for c in chunks} == {(1, "host-a"), (2, "host-b")}


def test_ranks_and_stream_filter(monkeypatch):
    monkeypatch.setattr(logs, "PAGE_BYTES", 3)
    chunks = list(stream_logs(pb.LogsRequest(job_id="3", ranks=[0], stream="out"),
                              lambda: LogSources((A, B), True), Workers(FILES)))
    assert order(chunks) == [(1, 0, "out", 1), (2, 0, "out", 2), (4, 0, "out", 1),
                             (4, 0, "out", 2)]
    assert all(len(c.data) <= 3 for c in chunks)               # pages
    assert [c.offset for c in chunks[:3]] == [0, 3, 6]
    assert b"".join(c.data for c in chunks) == b"r1 out\nr2 out\nr4 out a\nr4 again\n"


def test_follow_sends_what_is_added_until_the_job_has_ended():
    files = {"a:1": {(1, 0, "out"): b"one\n"}}
    workers, passes, sleeps = Workers(files), [], []

    def sources():
        passes.append(len(passes))
        if len(passes) == 2:        # the job moved to B, and wrote more on A before
            files["a:1"][(1, 0, "out")] += b"two\n"
            files["b:1"] = {(3, 0, "out"): b"three\n"}
        return LogSources((A, B), ended=len(passes) >= 3)

    chunks = list(stream_logs(pb.LogsRequest(job_id="3", follow=True), sources, workers,
                              sleep=sleeps.append))
    assert b"".join(c.data for c in chunks) == b"one\ntwo\nthree\n"
    assert [c.offset for c in chunks] == [0, 4, 0]
    assert len(passes) == 3 and sleeps == [logs.POLL_S] * 2


def test_a_server_that_cannot_be_read_is_said_once_and_the_others_are_shown():
    workers = Workers(FILES)
    workers.down.add("b:1")
    sweeps = iter([False, False, True])
    chunks = list(stream_logs(pb.LogsRequest(job_id="3", follow=True),
                              lambda: LogSources((A, B), next(sweeps)), workers,
                              sleep=lambda s: None))
    errors = [c for c in chunks if c.error]
    assert len(errors) == 1 and errors[0].server_id == 2
    assert errors[0].error == ("server 2 (host-b) could not be read: UNAVAILABLE: "
                               "connection refused")
    assert b"".join(c.data for c in chunks) == b"r1 out\nr1 err\nr4 out a\n"


def test_a_client_that_left_ends_the_stream():
    workers, active = Workers(FILES), iter([True, True, False])
    chunks = list(stream_logs(pb.LogsRequest(job_id="3", follow=True),
                              lambda: LogSources((A, B), False), workers,
                              active=lambda: next(active, False), sleep=lambda s: None))
    assert len(chunks) == 1                    # one page, then it stopped asking


@pytest.mark.parametrize("follow", [False, True])
def test_a_job_with_no_output_streams_nothing(follow):
    assert list(stream_logs(pb.LogsRequest(job_id="3", follow=follow),
                            lambda: LogSources((), True), Workers({}))) == []
