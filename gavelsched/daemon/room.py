"""Room on the disk of the scheduler's ``state_dir``: a scheduler whose disk fills cannot
write its state (thesis §5.6: the store is what survives a restart).

SQLite then refuses every write ("database or disk is full") and the scheduler's core
stops (``server._run_core``). The jobs' checkpoints live on the same disk by default
(``checkpoint_dir``), so a few large models can fill it while the scheduler runs. So a
reserve is kept for the writes that keep running jobs going (their runs, leases, steps and
ends): below ``state_dir_min_free_mb`` free, a submission is refused whole
(``NoRoom``: RESOURCE_EXHAUSTED, nothing of it submitted), as etcd refuses writes past its
space quota and Elasticsearch's flood-stage watermark makes an index read-only. The
scheduler says so when the free space falls below the reserve, again every
``REMIND_EVERY_S`` while it stays there, and when it is back (``tick``, on the executor's
thread, reads the disk at most every ``CHECK_EVERY_S``); ``free_bytes`` is the
``gavelsched_state_dir_free_bytes`` gauge. ``disk_full`` tells a write that found no room
at all, whoever filled the disk, and ``says_disk_full`` a job's process that failed so
(``exits``). A worker keeps a reserve of its own on its ``work_dir``'s disk
(``workers/daemon/room.py``, said in its heartbeats): the scheduler drains it while it is
short (``servers``), as Kubernetes taints a node under disk pressure.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

MIB = 1 << 20
MIN_FREE_MB = 256       # the default reserve: checkpoints of a few models, a period file
CHECK_EVERY_S = 10.0
REMIND_EVERY_S = 600.0
SQLITE_FULL = 13        # (``sqlite3.SQLITE_FULL`` from Python 3.11)


class NoRoom(Exception):
    """A submission refused while the state_dir's disk is below its reserve (one line);
    nothing of it is submitted."""


# A write refused for want of room: the disk is full, or its owner's quota is.
FULL = (errno.ENOSPC, errno.EDQUOT)
# How the C library words them, which a process's last line of stderr quotes: Python's
# ``OSError: [Errno 28] No space left on device``, or a C program's ``perror``.
FULL_WORDS = tuple(os.strerror(code) for code in FULL)


def disk_full(err: BaseException) -> bool:
    """``err`` is a write that found its disk full: SQLite's SQLITE_FULL ("database or
    disk is full"), or ENOSPC or EDQUOT from the file system."""
    if isinstance(err, sqlite3.Error):
        return (getattr(err, "sqlite_errorcode", None) == SQLITE_FULL
                or "database or disk is full" in str(err))
    return isinstance(err, OSError) and err.errno in FULL


def says_disk_full(reason: str) -> bool:
    """A process's one-line reason says it failed on a full disk, or a full quota."""
    return any(words in reason for words in FULL_WORDS)


def full_fix(state_dir: Path, checkpoints: Path) -> str:
    """What to do about a disk that filled, in the words of a one-line error."""
    there = Path(checkpoints).is_relative_to(state_dir)
    return (f"free space on the disk of the state_dir {state_dir}, which is full"
            + (" (the jobs' checkpoints are kept there: checkpoint_dir)" if there else ""))


class Room:
    """The free space of ``state_dir``'s disk (``shutil.disk_usage``) against a reserve of
    ``min_free_mb`` MiB (0: no reserve); ``low`` while under it."""

    def __init__(self, state_dir: Path, min_free_mb: int, *,
                 clock: Callable[[], float] = time.monotonic,
                 changed: Callable[[], None] = lambda: None) -> None:
        """``changed()``: told when ``notice`` changes (the executor republishes)."""
        self.state_dir, self.min_free_bytes = Path(state_dir), int(min_free_mb) * MIB
        self._clock, self._changed = clock, changed
        self._checked = self._told = -float("inf")
        self.notice: str | None = None     # the refusal's line while ``low`` (``status``)

    @property
    def low(self) -> bool:
        """The disk had less than the reserve free at its last reading."""
        return self.notice is not None

    def free_bytes(self) -> float:
        """The bytes free (NaN where the disk cannot be read): the gauge's value."""
        free = self._free()
        return float("nan") if free is None else float(free)

    def _free(self) -> int | None:
        try:
            return shutil.disk_usage(self.state_dir).free
        except OSError:
            return None

    def check(self) -> None:
        """``NoRoom`` when the disk has less than the reserve free."""
        self._see()
        if self.notice is not None:
            raise NoRoom(self.notice)

    def tick(self) -> None:
        """Read the disk if ``CHECK_EVERY_S`` passed since the last read: say when the
        free space falls below the reserve, and when it is back."""
        if self._clock() - self._checked >= CHECK_EVERY_S:
            self._see()

    def _see(self) -> None:
        free, now = self._free(), self._clock()
        self._checked = now
        if free is None or self.min_free_bytes <= 0:
            return
        low = free < self.min_free_bytes
        if low and (not self.low or now - self._told >= REMIND_EVERY_S):
            log.warning("the disk of the state_dir %s has %s free, under its reserve of %s "
                        "(state_dir_min_free_mb): submissions are refused until space is "
                        "freed; running jobs go on", self.state_dir, _mib(free),
                        _mib(self.min_free_bytes))
            self._told = now
        elif self.low and not low:
            log.info("the disk of the state_dir %s has %s free again: submissions are taken",
                     self.state_dir, _mib(free))
        was = self.notice
        self.notice = (f"the scheduler's state_dir has {_mib(free)} free, under its reserve "
                       f"of {_mib(self.min_free_bytes)} (state_dir_min_free_mb): no job is "
                       f"taken until space is freed on the disk of {self.state_dir}; running "
                       f"jobs go on" if low else None)
        if self.notice != was:
            self._changed()


def _mib(n: int) -> str:
    return f"{n / MIB:.0f} MiB"
