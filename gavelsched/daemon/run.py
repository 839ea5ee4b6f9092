"""A run: the record of a job's live processes on the workers (thesis §5.5-5.6), from the
RunJob that starts them to the exit of the last; ``runs.RunTable`` keeps one per job and acts
on it."""

from __future__ import annotations

from dataclasses import dataclass

from ..rpc import pb


@dataclass
class Run:
    """A job's live processes: started by a RunJob, extended by later ones, over when every
    server hosting it reported its exit (or died)."""

    job_id: str
    worker_type: str
    servers: dict[int, pb.RunJobRequest]
    left: set[int]               # servers whose processes have not exited yet
    lease: pb.Lease
    round: int
    started: float               # monotonic time of the first RunJob (then: its start)
    ends: float                  # monotonic end of its lease's round
    steps_per_s: float           # the rate the core planned it at
    base_steps: int              # durable count the run started from
    # (steps, seconds on the process's clock) of its last checkpointed report; seconds None
    # before its first one (that sample is timed on this clock, from its first InitJob)
    last: tuple[int, float | None] = (0, 0.0)
    init_at: float = 0.0                 # monotonic time of its first InitJob
    started_up: bool = False             # its first InitJob arrived
    orphan: bool = False                 # found running after a scheduler restart
    rebase: bool = False                 # a kept orphan: lease and samples from its renewal
    workers: tuple[int, ...] = ()        # the core's worker ids it holds
    round_start: float = 0.0             # monotonic start of its first round
    lease_end: float = 0.0               # monotonic end of its lease past its start-up
    generation: int = 0                  # its fencing token (``fences``)
    task_key: str = ""                   # the core's key of the micro-task it runs
    refill: bool = False                 # placed mid-round on freed GPUs: no lease floor
    reported_at: float = 0.0             # monotonic time of its last commit report (0: none)
    committed_at: float = 0.0            # ... of its last one with new steps (0: none)
    done_at: float = 0.0                 # monotonic time its job's last step was durable
    allowed_s: float | None = None       # its job's time limit left at its launch (``meter``)
    floor_s: float = 0.0                 # the lease it gets past its start-up, at least
    # (round, machine) of each of its processes launched at its round's start: its launch
    # wave is the most processes started at once on one of its machines (``core/waves.py``)
    wave_keys: tuple[tuple[int, str], ...] = ()
