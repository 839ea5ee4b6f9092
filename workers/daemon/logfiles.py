"""A job's output on this worker (issue #18): ``WORK_DIR/logs/<job>/round<r>-rank<k>.out``
and ``.err``, one pair per rank of each run, named by the round the run was launched in.
The launcher names them (``log_stem``); ``ReadLogs`` lists and reads them (``answer``:
``listing``, ``read``) for the scheduler's ``Logs``.

The logs of a job no process of which has run here for ``--log-retention-s`` (a week by
default) are removed (``expired``, ``remove``: the worker's own sweep), as kubelet
removes a dead container's logs: else the work_dir fills with every job ever run here.

Reading is closed to everything else: a job id must be a plain name (letters, digits,
``_``, ``-`` and ``.``, not first, at most ``MAX_JOB_ID`` characters), so it cannot climb
out of ``logs/``; the job's folder and its files are opened without following symbolic
links, only regular files count, and one read returns at most ``MAX_READ_BYTES``.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from collections.abc import Container
from dataclasses import dataclass
from pathlib import Path

from gavelsched.rpc import pb

MAX_JOB_ID = 128
LOG_RETENTION_S = 7 * 86400.0     # ``--log-retention-s``: a week
MAX_READ_BYTES = 1 << 20
STREAMS = ("out", "err")
_JOB_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")
_NAME = re.compile(r"round([0-9]{1,18})-rank([0-9]{1,9})\.(out|err)")


class BadLogRequest(ValueError):
    """A job id or file that ``ReadLogs`` refuses (one line)."""


@dataclass(frozen=True, order=True)
class LogFile:
    round: int
    rank: int
    stream: str          # "out" or "err"
    size: int = 0

    @property
    def name(self) -> str:
        return f"round{self.round}-rank{self.rank}.{self.stream}"


def log_stem(work_dir: Path, job_id: str, round_: int, rank: int) -> Path:
    """Where a rank of a run launched in ``round_`` writes (add ``.out`` / ``.err``); a job
    id that is not a plain name gets its other characters replaced."""
    return Path(work_dir) / "logs" / _safe(job_id) / f"round{round_}-rank{rank}"


def listing(work_dir: Path, job_id: str) -> list[LogFile]:
    """The job's log files here, by round, rank and stream (stdout first), with their
    sizes; none for a job that never ran here."""
    fd = _job_dir(work_dir, job_id)
    if fd is None:
        return []
    try:
        files = []
        for entry in os.scandir(fd):
            match = _NAME.fullmatch(entry.name)
            if match and entry.is_file(follow_symlinks=False):
                files.append(LogFile(int(match[1]), int(match[2]), match[3],
                                     entry.stat(follow_symlinks=False).st_size))
    finally:
        os.close(fd)
    return sorted(files, key=lambda f: (f.round, f.rank, STREAMS.index(f.stream)))


def read(work_dir: Path, job_id: str, file: LogFile, offset: int, max_bytes: int) -> bytes:
    """At most ``max_bytes`` (and ``MAX_READ_BYTES``) of a log file from ``offset``; none
    past its end or for a file that is not there."""
    if file.stream not in STREAMS or file.round < 0 or file.rank < 0:
        raise BadLogRequest(f"no such log file: round {file.round}, rank {file.rank}, "
                            f"stream {file.stream!r}")
    if offset < 0:
        raise BadLogRequest(f"offset must be >= 0, got {offset}")
    fd = _job_dir(work_dir, job_id)
    if fd is None:
        return b""
    try:
        f = os.open(file.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
    except OSError:          # not there, or a link
        return b""
    finally:
        os.close(fd)
    try:
        if not stat.S_ISREG(os.fstat(f).st_mode):
            return b""
        return os.pread(f, max(0, min(max_bytes, MAX_READ_BYTES)), offset)
    finally:
        os.close(f)


def answer(work_dir: Path, request: pb.ReadLogsRequest) -> pb.ReadLogsResponse:
    """``ReadLogs``: the job's files here, and the bytes of the one the request names (from
    its offset), or ``BadLogRequest``."""
    data = b""
    if request.HasField("file"):
        f = request.file
        data = read(work_dir, request.job_id, LogFile(f.round, f.rank, f.stream),
                    request.offset, request.max_bytes)
    return pb.ReadLogsResponse(data=data, files=[
        pb.LogFile(round=f.round, rank=f.rank, stream=f.stream, size=f.size)
        for f in listing(work_dir, request.job_id)])


def expired(work_dir: Path, retention_s: float, now: float,
            busy: Container[str] = ()) -> list[str]:
    """The jobs whose logs here were last written ``retention_s`` or more before ``now``
    (Unix seconds; their folder's and files' newest change), none of them ``busy`` (a
    process of it runs here), sorted; none when ``retention_s`` is 0. A folder that is no
    job's plain name, or a link, is never touched."""
    if retention_s <= 0:
        return []
    try:
        folders = list(os.scandir(Path(work_dir) / "logs"))
    except OSError:
        return []
    out = []
    for folder in folders:
        if (folder.name in busy or not _JOB_ID.fullmatch(folder.name)
                or not folder.is_dir(follow_symlinks=False)):
            continue
        newest = _newest_change(folder)
        if newest is not None and now - newest >= retention_s:
            out.append(folder.name)
    return sorted(out)


def _newest_change(folder: os.DirEntry) -> float | None:
    try:
        return max([folder.stat(follow_symlinks=False).st_mtime,
                    *(f.stat(follow_symlinks=False).st_mtime for f in os.scandir(folder))])
    except OSError:         # (removed meanwhile)
        return None


def remove(work_dir: Path, job_id: str) -> None:
    """Remove the job's logs here (a plain name's folder, its links not followed)."""
    shutil.rmtree(Path(work_dir) / "logs" / check_job_id(job_id), ignore_errors=True)


def check_job_id(job_id: str) -> str:
    """``job_id`` if it is a plain name (module docstring), else ``BadLogRequest``."""
    if len(job_id) > MAX_JOB_ID or not _JOB_ID.fullmatch(job_id):
        raise BadLogRequest(f"bad job id {job_id[:MAX_JOB_ID]!r}: a job id is letters, "
                            f"digits, '_', '-' and '.' (not first)")
    return job_id


def _job_dir(work_dir: Path, job_id: str) -> int | None:
    """The job's log folder, opened without following a link; None when there is none
    (or it is a link)."""
    path = Path(work_dir) / "logs" / check_job_id(job_id)
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except (FileNotFoundError, NotADirectoryError):     # (a link: ENOTDIR on Linux)
        return None
    except OSError as err:       # a link elsewhere (ELOOP), or not readable
        raise BadLogRequest(f"the logs of job {job_id} cannot be read: {err.strerror}") \
            from None


def _safe(name: str) -> str:
    """``name`` with what a plain name may not hold (``check_job_id``) replaced by ``_``."""
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_"
                   for c in name[:MAX_JOB_ID]) or "job"
    return "_" + safe[1:] if safe.startswith(".") else safe
