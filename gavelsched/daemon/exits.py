"""What a server's report that its processes of a job exited says of the run (thesis §5.6:
a run ends when every server hosting it has reported): a typed verdict, pure.

- ``Died``: the process of a run on one server failed; it is tried again, or the job fails
  (``retries``).
- ``RankFailed``: a rank of a run on several servers failed, which it also does when a
  peer's machine dies under it; the job is suspected (``health``) until the heartbeat check
  tells.
- ``Ended``: the run's last process ended on its own; did it step, and did it reach the
  scheduler at all (``retries``)? A process that exits ``EXIT_RUN_LOST`` (no answer from
  its scheduler, a rendezvous port taken) ends its run this way, without progress, and so
  does one that failed on a full disk (``room.says_disk_full``: its reason names ENOSPC or
  EDQUOT, as Python's ``OSError`` and C's ``strerror`` word them): a shared checkpoint disk that
  fills would otherwise fail every running job for good at its next save, for the
  cluster's trouble, not theirs.

``runs.RunTable`` asks (``exit_verdict``) and acts on the answer.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Protocol

from ..jobenv import EXIT_RUN_LOST
from .jobs import JobRow
from .room import says_disk_full


class Run(Protocol):
    """What a verdict reads of a run (``run.Run``)."""

    servers: Mapping[int, object]   # the servers hosting it
    left: Collection[int]           # those whose processes have not exited yet
    base_steps: int                 # the durable count it started from
    started_up: bool                # its first InitJob arrived
    orphan: bool                    # found running after a scheduler restart


@dataclass(frozen=True)
class Died:
    """The process of a run on one server failed: it is tried again, or the job fails
    (``Retries.died``)."""

    exit_code: int
    reason: str


@dataclass(frozen=True)
class RankFailed:
    """A rank of a run on several servers failed. It also fails when a peer's machine dies
    under it (gloo reports the lost connection): not the job's fault. The job is suspected
    (``Health.suspect``); a server of its run found dead clears the suspicion."""

    exit_code: int
    reason: str


@dataclass(frozen=True)
class Ended:
    """The run's last process ended on its own: did the run step at all, and did its
    process reach the scheduler (an ``InitJob``) at all (``Retries.ran``)?"""

    progressed: bool
    reached: bool = True
    why: str = ""                 # its process's own reason (it lost its scheduler)


ExitVerdict = Died | RankFailed | Ended | None


def exit_verdict(run: Run | None, job: JobRow | None, server_id: int, failed: bool,
                 exit_code: int, reason: str) -> ExitVerdict:
    """What ``server_id``'s report that its processes of the job exited (``failed``, with
    ``exit_code`` and ``reason``) says of the run (pure). None: nothing but the exit (not
    a server of the run, or the job has ended: a finished job's exit is no failure)."""
    if run is None or server_id not in run.servers or job is None or job.final:
        return None
    if failed and (exit_code == EXIT_RUN_LOST or says_disk_full(reason)):  # no answer from this
        # scheduler in time, a rendezvous port taken, a full disk: no fault of the job's, a
        # run without progress (``jobenv``)
        return Ended(False, why=reason or f"exit code {exit_code}") \
            if run.left == {server_id} else None
    if failed:
        reason = reason or f"exit code {exit_code}"
        return (Died(exit_code, reason) if len(run.servers) == 1
                else RankFailed(exit_code, reason))
    if not run.orphan and run.left == {server_id}:
        if not run.started_up:          # its process never reached the scheduler
            return Ended(False, reached=False)
        return Ended(job.steps_done > run.base_steps)
    return None
