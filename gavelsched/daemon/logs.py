"""A job's output (issue #18): which servers hold it, and the ``Logs`` stream.

Workers keep each run's output in ``WORK_DIR/logs/<job>/round<r>-rank<k>.{out,err}``
(``workers/daemon/logfiles.py``). ``Hosts`` records, on the executor thread, the servers
that ran each job (in the store, so a restarted scheduler still finds them).
``stream_logs`` runs on a ``Logs`` handler's thread: it lists the job's files on each of
those servers (``ReadLogs``) and yields their bytes in pages of at most ``PAGE_BYTES``, in
order by round, rank and stream (stdout first) across servers. With ``follow`` it lists
again every ``POLL_S`` and sends what was added, until a pass that began after the job had
ended (final, its processes gone) is over.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import grpc

from ..rpc import pb
from .store import EVERY, Store, Where

log = logging.getLogger(__name__)

PAGE_BYTES = 256 * 1024      # asked of a worker per ReadLogs (it caps at 1 MiB)
POLL_S = 1.0                 # how often a followed job's files are listed again
STREAMS = ("out", "err")     # the order of a rank's two files


class Hosts:
    """Job -> the servers that ran a process of it (executor thread; kept in the store)."""

    def __init__(self, store: Store, where: Where = EVERY) -> None:
        """The servers of the jobs in memory (``where``: ``retired.of_jobs``)."""
        self._store = store
        self.by_job: dict[str, tuple[int, ...]] = store.hosts(where)

    def forget(self, job_ids: Iterable[str]) -> None:
        """Jobs that left memory (the store keeps their servers: ``retired``)."""
        for job_id in job_ids:
            self.by_job.pop(job_id, None)

    def add(self, job_id: str, server_ids: Iterable[int]) -> None:
        have = self.by_job.get(job_id, ())
        new = sorted(set(server_ids) - set(have))
        if new:
            self._store.add_hosts(job_id, new)
            self.by_job[job_id] = tuple(sorted((*have, *new)))


@dataclass(frozen=True)
class Source:
    """A worker server that may hold a job's output."""

    server_id: int
    address: str
    host: str


@dataclass(frozen=True)
class LogSources:
    sources: tuple[Source, ...]
    ended: bool                 # the job is final and none of its processes runs


Reader = Callable[[str, pb.ReadLogsRequest], pb.ReadLogsResponse]


def stream_logs(request: pb.LogsRequest, sources: Callable[[], LogSources], read: Reader, *,
                active: Callable[[], bool] = lambda: True,
                sleep: Callable[[float], None] = time.sleep) -> Iterator[pb.LogChunk]:
    """The job's output as ``LogChunk``s (module docstring). ``sources`` is asked before
    each pass (a followed job moves to new servers); ``read(address, request)`` calls a
    worker; ``active`` false (the client left) ends the stream between pages. A server
    that cannot be read gives one chunk with ``error`` set, once."""
    sent: dict[tuple[int, int, int, str], int] = {}     # (server, round, rank, stream) -> bytes
    failed: set[int] = set()
    while active():
        now = sources()
        files = []
        for source in now.sources:
            try:
                listed = read(source.address, pb.ReadLogsRequest(job_id=request.job_id))
            except grpc.RpcError as err:
                yield from _unreadable(request.job_id, source, err, failed)
                continue
            files.extend((source, f) for f in listed.files if _wanted(request, f))
        files.sort(key=lambda sf: (sf[1].round, sf[1].rank, STREAMS.index(sf[1].stream),
                                   sf[0].server_id))
        for source, file in files:
            key = (source.server_id, file.round, file.rank, file.stream)
            try:
                for chunk in _pages(request.job_id, source, file, sent.get(key, 0), read,
                                    active):
                    sent[key] = chunk.offset + len(chunk.data)
                    yield chunk
            except grpc.RpcError as err:
                yield from _unreadable(request.job_id, source, err, failed)
        if not request.follow or now.ended:
            return
        sleep(POLL_S)


def _wanted(request: pb.LogsRequest, file: pb.LogFile) -> bool:
    return (file.stream in STREAMS and (not request.ranks or file.rank in request.ranks)
            and (not request.stream or file.stream == request.stream))


def _pages(job_id: str, source: Source, file: pb.LogFile, offset: int, read: Reader,
           active: Callable[[], bool]) -> Iterator[pb.LogChunk]:
    """The bytes of ``file`` from ``offset`` to its listed size, a page at a time."""
    while offset < file.size and active():
        data = read(source.address, pb.ReadLogsRequest(job_id=job_id, file=file,
                                                       offset=offset,
                                                       max_bytes=PAGE_BYTES)).data
        if not data:
            return
        yield pb.LogChunk(file=file, server_id=source.server_id, host=source.host,
                          offset=offset, data=data)
        offset += len(data)


def _unreadable(job_id: str, source: Source, err: grpc.RpcError,
                failed: set[int]) -> Iterator[pb.LogChunk]:
    """One chunk saying why a server cannot be read, the first time it fails."""
    details = (err.details() or "").splitlines()[:1]
    line = f"{err.code().name}: {details[0]}" if details else err.code().name
    log.info("Logs for job %s: server %d (%s): %s", job_id, source.server_id, source.address,
             line)
    if source.server_id not in failed:
        failed.add(source.server_id)
        yield pb.LogChunk(server_id=source.server_id, host=source.host,
                          error=f"server {source.server_id} ({source.host}) could not be "
                                f"read: {line}")
