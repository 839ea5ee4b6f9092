"""One scheduler per ``state_dir`` (thesis §5.6: the store is what a restart takes up, and
it has one writer).

Two schedulers started on one state_dir (a service manager's and one started by hand, two
config files naming one folder) would both hand out job ids and run generations from the
same store and restore the same jobs. The first holds an exclusive lock on
``state_dir/gavelsched.lock`` (``flock``: the kernel lets it go when the process ends,
however it ends, so a crash leaves nothing to clean up), with its pid, host and start time
written in it; a second is refused at its start, in one line naming the first, as
Prometheus and etcd refuse a data directory another process holds.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path

LOCK_FILE = "gavelsched.lock"


class StateInUse(Exception):
    """Another scheduler holds the state_dir (one line naming it)."""


class StateLock:
    """The state_dir's lock, held from construction until ``release`` (or until this
    object is collected: its file closes)."""

    def __init__(self, state_dir: Path) -> None:
        state_dir = Path(state_dir)
        state_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(state_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._file = os.fdopen(fd, "r+b")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = self._file.read(200).decode("utf-8", "replace").strip().splitlines()
            self.release()
            raise StateInUse(f"{state_dir}: another scheduler holds this state_dir "
                             f"({holder[0] if holder else 'its pid unknown'}): stop it first, "
                             f"or give this one a state_dir of its own") from None
        self._file.truncate(0)
        self._file.write(f"pid {os.getpid()} on {socket.gethostname()} since "
                         f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}\n".encode())
        self._file.flush()

    def release(self) -> None:
        self._file.close()
