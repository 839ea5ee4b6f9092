"""What a worker daemon leaves in its work directory for the daemon that replaces it after
a crash (``kill -9``): its identity, and the job processes it left running
(docs/runtime.md, "Fencing").

A restarted worker daemon registers as the server it was (``server_id``, saved at each
registration), so the scheduler replaces its old entry instead of adding a server.

Jobs run in their own sessions, so they outlive a killed worker daemon. Its replacement
does not know them, and would launch new jobs on the GPUs they still hold. So the launcher
records each job's process ids (with each process's start time, so that a reused pid is
never signalled) in ``WORK_DIR/pids/<job>.json`` while it runs, and a new worker daemon on
the same work directory kills whatever is still listed there before it registers.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import psutil

log = logging.getLogger(__name__)

KILL_WAIT_S = 5.0
SERVER_ID_FILE = "server_id"


def server_id(work_dir: Path) -> int:
    """The server id the last daemon on ``work_dir`` registered as (-1: none)."""
    try:
        return int((Path(work_dir) / SERVER_ID_FILE).read_text())
    except (OSError, ValueError):
        return -1


def keep_server_id(work_dir: Path, server: int) -> None:
    path = Path(work_dir) / SERVER_ID_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(str(server))
    os.replace(tmp, path)


def _directory(work_dir: Path) -> Path:
    return Path(work_dir) / "pids"


def _file(work_dir: Path, job_id: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in job_id) or "job"
    return _directory(work_dir) / f"{safe}.json"


def _started(pid: int) -> float | None:
    """When the process started (psutil), None when it is gone or a zombie."""
    try:
        proc = psutil.Process(pid)
        return None if proc.status() == psutil.STATUS_ZOMBIE else proc.create_time()
    except psutil.NoSuchProcess:
        return None


def record(work_dir: Path, job_id: str, procs: Sequence[subprocess.Popen]) -> None:
    """Remember the job's processes (each leads its own process group)."""
    path = _file(work_dir, job_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = [{"pid": p.pid, "start": _started(p.pid)} for p in procs]
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"job_id": job_id, "procs": entries}))
    os.replace(tmp, path)


def forget(work_dir: Path, job_id: str) -> None:
    """The job's processes all exited."""
    _file(work_dir, job_id).unlink(missing_ok=True)


def reap(work_dir: Path) -> list[str]:
    """Kill the process groups of every job a previous daemon on ``work_dir`` left running
    (SIGKILL: they are fenced out anyway) and wait for them; the job ids found."""
    directory = _directory(work_dir)
    found, groups = [], []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else ():
        try:
            data = json.loads(path.read_text())
            entries = [(int(e["pid"]), e.get("start")) for e in data["procs"]]
            job_id = str(data["job_id"])
        except (OSError, ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)
            continue
        alive = [pid for pid, start in entries
                 if start is not None and _started(pid) == start]
        if alive:
            found.append(job_id)
            log.warning("job %s: processes %s left by a previous worker daemon; killed",
                        job_id, alive)
        for pid in alive:
            try:
                os.killpg(pid, signal.SIGKILL)
                groups.append(pid)
            except (ProcessLookupError, PermissionError):
                pass
        path.unlink(missing_ok=True)
    deadline = time.monotonic() + KILL_WAIT_S
    while groups and time.monotonic() < deadline:
        groups = [pid for pid in groups if _started(pid) is not None]
        time.sleep(0.05)
    return found
