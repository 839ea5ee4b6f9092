"""``SimConfig``: how the virtual-clock executor runs rounds (Gavel's simulator by default)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from gavelsched.core.waves import MAX_WAVE_SLOPE
from gavelsched.estimator import EstimatorConfig
from traces.checks import MAX_SECONDS


@dataclass(frozen=True)
class SimConfig:
    """Executor semantics.

    - ``round_ends_at_last_finish``: a round ends when its last micro-task ends (Gavel:
      the next round starts at the latest finish time, a little before round_seconds
      because leases are whole steps, or early when every job finished). False: rounds
      last exactly round_seconds.
    - ``idle_jumps_to_arrival``: when a round places nothing, the clock jumps to the next
      arrival (Gavel). False: to the earlier of the next arrival and the time a pending
      re-solve becomes allowed.
    - ``preemption_overhead_s``: seconds of checkpoint save + restore charged, per job type,
      to a micro-task whose lease was not extended (it starts on new workers); the job
      makes floor(throughput x (round - overhead)) steps. Gavel charges nothing.
    - ``window``: job ids [first, last) whose completion times are averaged; the run stops
      once they have all finished (Gavel's ``jobs_to_complete``).
    - ``record_timeline``: keep per-round data for plots.
    - ``record_type_use``: keep the GPU-seconds each job type held on each worker type
      (``SimulationResult.type_gpu_s``): where a policy puts each kind of job.
    - ``estimate_pairs``: space-sharing policies plan on *estimated* co-located
      throughputs (``gavelsched.estimator.estimated_table`` with ``estimator``, seeded by
      the run's seed) while jobs progress at the oracle rates; a pair's throughputs on a
      type become the measured ones once it has run there (thesis §5.3.3, §5.7.6, Figure
      5.16). Policies without pairs are unaffected.
    - ``priors``: replay with the daemon's knowledge as it was (issue #20): the core plans,
      and sizes leases, on ``priors`` (the table the daemon started with) until a job has
      run, then on what its runs measured (``gavelsched.core.online``: measured rates where
      measured, the prior scaled by the job's measured/prior ratio elsewhere), while jobs
      progress at the trace's rates (a job's own ``TraceJob.throughputs``, else the table's),
      cut at their lease's steps as the daemon's are. Restart costs likewise: a job type's
      counts in the core's restart rule from the plan after its first run started up (the
      daemon measures it then); its runs pay their start-ups from the first.
      None: the core knows the trace table's rates from the start (Gavel). Not with
      co-located pairs or mixed-type configurations.
    - ``plan_lead_s``: the daemon's plan lead (thesis §5.6; ``DaemonConfig.plan_lead``): it
      plans each round this many seconds before the last one ends, so that leases can be
      extended, and admits the jobs that arrived by then; a job that arrives after the plan
      waits for the next one (a round, with fixed rounds), unless nothing runs. 0: the plan
      is made at the boundary and admits every job arrived by it (Gavel). Shorter than
      a round (``RoundDriver`` checks).
    - ``arrival_grace_s``: an idle cluster plans its round this long after the arrival
      that woke it, admitting every job arrived by then (the daemon waits half a second
      so that jobs submitted together are planned together). 0: at the arrival (Gavel).
    - ``first_start_only``: charge a job's preemption overhead on its first run only (a
      what-if: later restarts free), to tell what start-ups alone cost from what the
      restarts a mechanism causes do (BENCHMARKS.md, the Sia-like mix).
    - ``kept_runs_ahead``: a kept run steps on into its next lease as soon as it has it,
      as the daemon's do (thesis §5.6: a lease is extended at the next round's plan,
      ``plan_lead_s`` before the round ends). A whole-step lease (``floor(rate x R)``
      steps) ends before its round does, so over kept rounds the run gets ahead of the
      round clock, by at most ``plan_lead_s``, and finishes that much sooner. False:
      each lease starts at its round's start (Gavel).
    - ``received_whole_round``: each task of a round's plan counts the whole round as
      received time (a refill, the rest of the round from its start), as the daemon
      credits them (``Runs.held_s``); False: the seconds it held its workers, its lease's
      whole steps (Gavel). Identical jobs' received times, and so their ties, then differ
      by fractions of a step in the simulator and not on the daemon (issue #29).
    - ``exit_s``: seconds from a job's last step to its process's exit, per job type, as
      the daemon measures it (a torch process takes half a second). A refill of its GPUs
      is placed at the last step, as the daemon places it, and its run starts up once
      the process has exited. Gavel: none (the GPUs are free at the last step).
    - ``wave_slope``, ``machines``: a round's launches start up slower the more of them
      start at once on a machine (``gavelsched.core.waves``, as the daemon measures it):
      each is charged its preemption overhead (then its start-up alone) times
      ``1 + wave_slope (w - 1)``, ``w`` the processes launched at the round's start over
      ``machines``; a refill starts alone. 0: the overhead as it is (Gavel).
    - ``horizon_s``: stop at this virtual time (a forecast's replay, ``twin.py``: a job of
      years would take as many rounds); the jobs not finished by then have no completion,
      and ``SimulationResult.steps_left`` says what each still needs. None: to the end.
    """

    round_ends_at_last_finish: bool = True
    idle_jumps_to_arrival: bool = True
    preemption_overhead_s: Mapping[str, float] = field(default_factory=dict)
    window: tuple[int, int] | None = None
    record_timeline: bool = False
    record_type_use: bool = False
    estimate_pairs: bool = False
    estimator: EstimatorConfig = field(default_factory=EstimatorConfig)
    priors: Any = None              # a ``traces.ThroughputTable``, or None
    plan_lead_s: float = 0.0
    arrival_grace_s: float = 0.0
    horizon_s: float | None = None
    first_start_only: bool = False
    kept_runs_ahead: bool = False
    received_whole_round: bool = False
    exit_s: Mapping[str, float] = field(default_factory=dict)
    wave_slope: float = 0.0
    machines: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "preemption_overhead_s",
                           MappingProxyType(dict(self.preemption_overhead_s)))
        for job_type, seconds in self.preemption_overhead_s.items():
            if not 0 <= seconds <= MAX_SECONDS:
                raise ValueError(f"preemption overhead of {job_type!r} must be in "
                                 f"[0, {MAX_SECONDS:g}] seconds, got {seconds}")
        object.__setattr__(self, "exit_s", MappingProxyType(dict(self.exit_s)))
        for job_type, seconds in self.exit_s.items():
            if not 0.0 <= seconds < float("inf"):
                raise ValueError(f"exit time of {job_type!r} must be >= 0 seconds, got {seconds}")
        if not 0.0 <= self.wave_slope <= MAX_WAVE_SLOPE:
            raise ValueError(f"wave slope must be in [0, {MAX_WAVE_SLOPE:g}], got "
                             f"{self.wave_slope}")
        if self.machines < 1:
            raise ValueError(f"machines must be >= 1, got {self.machines}")
        if not 0.0 <= self.plan_lead_s < float("inf"):
            raise ValueError(f"plan lead must be >= 0 seconds, got {self.plan_lead_s}")
        if not 0.0 <= self.arrival_grace_s < float("inf"):
            raise ValueError(f"arrival grace must be >= 0 seconds, got {self.arrival_grace_s}")
        if self.horizon_s is not None and not 0.0 < self.horizon_s < float("inf"):
            raise ValueError(f"horizon must be > 0 seconds, got {self.horizon_s}")
        if self.window is not None:
            first, last = self.window
            if not 0 <= first < last:
                raise ValueError(f"window must be FIRST:LAST with 0 <= FIRST < LAST, "
                                 f"got {first}:{last}")


def preemption_overheads(spec: str, job_types, table=None) -> dict[str, float]:
    """Per-job-type preemption overhead from a CLI-style spec: seconds for every type,
    ``"catalog"`` for each type's checkpoint save + load time in the shipped catalog, or
    ``"table"`` for the restart costs ``table`` (a ``traces.ThroughputTable``) declares
    (``restart_s``; none where it declares none). Raises ``ValueError`` naming the bad
    spec."""
    if spec == "table":
        declared = dict(getattr(table, "restart_s", None) or {})
        return {t: declared[t] for t in set(job_types) if declared.get(t, 0.0) > 0}
    if spec == "catalog":
        from traces.catalog import default_catalog
        catalog = default_catalog()
        out = {}
        for t in set(job_types):
            if t in catalog.job_types:
                save, load = catalog.checkpoint_seconds(t)
                out[t] = save + load
        return out
    try:
        seconds = float(spec)
    except ValueError:
        raise ValueError(f"preemption overhead: expected seconds, 'catalog' or 'table', "
                         f"got {spec!r}") from None
    if not 0 <= seconds <= MAX_SECONDS:     # (beyond, a replay would never end)
        raise ValueError(f"preemption overhead: must be in [0, {MAX_SECONDS:g}] seconds, "
                         f"got {spec}")
    return {t: seconds for t in set(job_types)} if seconds else {}
