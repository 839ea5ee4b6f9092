"""GPU-type emulation on CPU-only machines (docs/runtime.md, "Emulation").

A worker started as ``--type k80`` on a machine without GPUs makes its jobs run at a K80's
speed *relative to the other types*: each job gets ``GAVEL_EMULATE_STEPS_PER_S``
(``gavelsched.jobenv``) = (the table's steps/s for this worker type, job type and scale
factor) x ``speed``, and GavelIterator sleeps so that its steps never run faster than that.
``speed`` (the time dilation, ``--emulation-speed``) scales every type alike, so ratios
between types are the table's (thesis Table 5.2 / Figure 1.4) while the absolute rates fit
this CPU. Two jobs that share a GPU (a co-located pair, ``RunJobRequest.colocated_job_type``)
each run at the table's co-located rate for the pair, as the scheduler and the simulator
plan them, not each at its rate alone.

A job split across types with virtual nodes (``GAVEL_VN_LAYOUT``, VirtualFlow §5.1) paces
each rank by its own share of the global batch on its own type: ``rate(type, job, W) x
speed x (B / W) / b_r``, where ``b_r`` is the rank's samples per step, W the job's ranks
and B its global batch. A rank holding an even share (B / W) runs at the table's rate; one
holding more is slower in proportion. The job's steps then take the slowest rank's time,
since every step ends in one all-reduce (docs/runtime.md, "Mixed-type jobs").
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from traces.profiles import Profile
from traces.scaling import table_rate
from traces.types import ThroughputTable
from gavelsched.virtual.envspec import JobLayout


class EmulationError(ValueError):
    """A worker type or speed the emulation cannot use."""


@dataclass(frozen=True)
class Emulation:
    """The pacing rule of one emulated worker type."""

    worker_type: str
    table: ThroughputTable
    speed: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.speed < math.inf:
            raise EmulationError(f"emulation speed must be a finite number > 0, got "
                                 f"{self.speed!r}")
        if self.worker_type not in self.table.worker_types:
            raise EmulationError(f"worker type {self.worker_type!r} is not in the throughput "
                                 f"table; known: {', '.join(self.table.worker_types)}")

    def steps_per_s(self, job_type: str, scale_factor: int, expected: float = 0.0,
                    colocated: str = "") -> float | None:
        """The paced rate of a job, or None (unpaced) when neither the table nor the
        scheduler's ``expected`` steps/s knows it. A GPU count the table lacks gets the
        scaling model's rate (``_modelled``). ``colocated``: the job type of the
        other job sharing its GPUs (space sharing, thesis §5.3.1), whose table rate is the
        pair's, for this job (the scheduler only pairs jobs whose pair it knows)."""
        rate = self.table.get(self.worker_type, job_type, scale_factor)
        if colocated:
            pair = self.table.pair(self.worker_type, (job_type, scale_factor),
                                   (colocated, scale_factor))
            rate = pair[0] if pair is not None else 0.0
        elif rate <= 0 and scale_factor > 1:
            rate = self._modelled(job_type, scale_factor)
        if rate <= 0:
            return _as_sent(expected)
        return rate * self.speed

    def _modelled(self, job_type: str, scale_factor: int) -> float:
        """The rate at a GPU count the table lacks (an elastic job on 3 of its 4 GPUs):
        the scaling model fitted to the table's counts (``traces/scaling.py``), as the
        scheduler prices that count; 0 where the model does not cover it. The scheduler's
        ``expected`` would not do: its priors may be scaled already (the local cluster's
        are the table x ``speed``), and pacing scales them again."""
        return table_rate(self.table, self.worker_type, job_type, scale_factor)

    def split_steps_per_s(self, job_type: str, job: JobLayout, rank: int,
                          expected: float = 0.0) -> float | None:
        """The paced rate of rank ``rank`` of a split job on this type: the type's rate for
        the job at its scale factor (else at one GPU, else ``expected``) for an even share,
        scaled by even share / the rank's share of the batch."""
        world = job.mapping.processes
        rate = (self.table.get(self.worker_type, job_type, world)
                or self.table.get(self.worker_type, job_type, 1)) * self.speed \
            or _as_sent(expected)
        if not rate:
            return None
        return rate * job.layout.batch / (world * job.samples_of(rank))


def _as_sent(expected: float) -> float | None:
    """The scheduler's steps/s for a job the table does not know, as it sent it (None: it
    sent none). Not scaled by the speed: its priors are the local cluster's table x speed
    already, and once measured, its figure is the paced rate itself. Scaled again, each
    run's measurement paced the next one slower (x speed a run, towards 0)."""
    return expected if expected > 0 else None


def machine_has_gpus() -> bool:
    """Whether an NVIDIA GPU device node exists (no torch import needed)."""
    return any(Path("/dev").glob("nvidia[0-9]*"))


def load_emulation(worker_type: str, throughputs: str | os.PathLike | None,
                   speed: float, profile: Profile | None = None) -> Emulation:
    """The emulation of ``worker_type`` from a table file (default: the catalog's), with
    this worker's ``profile`` filled in, else the type's shipped measured row
    (``traces.profiles``); EmulationError when neither knows the type."""
    from traces.catalog import default_table
    from traces.errors import TraceError
    from traces.profiles import table_for_types, with_profile
    from traces.throughputs import load_table

    table = load_table(throughputs) if throughputs else default_table()
    if profile is not None:
        return Emulation(worker_type, with_profile(table, profile), speed)
    try:
        return Emulation(worker_type, table_for_types(table, [worker_type]), speed)
    except TraceError as err:
        raise EmulationError(f"{err}; or give this worker's own profile (--profile or "
                             "--profile-file)") from None
