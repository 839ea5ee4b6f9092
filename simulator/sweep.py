"""Sweeps: input job rate x seed x policy, in parallel processes (thesis Figures 5.9-5.11).

Each point generates a §5.7.1 trace (``traces.generator``, or ``SweepSpec.trace``) and
simulates it. ``run_points`` runs any list of (point, spec) pairs in one process pool (or
as tasks on a Ray cluster, ``ray_sweep``);
``run_sweep`` runs a grid and writes ``sweep.csv`` (one row per point) and
``jct_vs_rate.png`` in the output folder.

Besides the CSV fields, a row carries ``jcts_s``, the completion times of the window's
jobs (for CDFs). Its ``unarrived`` field counts the jobs of the trace that had not arrived
when the run stopped: 0 means arrivals ran out before the window's jobs finished, so they
finished in a draining cluster (the thesis keeps adding jobs), which understates the JCT
of a saturated one.
"""

from __future__ import annotations

import csv
import itertools
import logging
import multiprocessing
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gavelsched.core.driver import config_for
from gavelsched.estimator import EstimatorConfig
from gavelsched.mechanism import ClusterView
from policies import Entity
from traces import ThroughputTable, TraceJob
from traces.catalog import default_table
from traces.errors import TraceError
from traces.formats import validate_trace
from traces.generator import generate_trace
from traces.profiles import table_for_types

from .config import SimConfig, preemption_overheads
from .engine import SimulationError, make_policy, simulate
from .plots import plot_sweep
from .sweep_journal import Journal

log = logging.getLogger(__name__)

FIELDS = ("policy", "rate", "seed", "jobs", "window", "avg_jct_s", "makespan_s",
          "utilization", "cost_usd", "slo_violations", "rounds", "resolves",
          "lease_extension_rate", "unarrived", "wall_s")
TEXT_FIELDS = ("policy", "window")


def is_row(row: Mapping[str, Any]) -> bool:
    """``row`` has a run's fields: text where ``TEXT_FIELDS`` say, a number (or None) in
    the others, and ``jcts_s`` a list of numbers (a journal's line read back)."""
    def number(value) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return (all(k in row for k in FIELDS)
            and all(isinstance(row[k], str) for k in TEXT_FIELDS)
            and all(row[k] is None or number(row[k]) for k in FIELDS if k not in TEXT_FIELDS)
            and isinstance(row.get("jcts_s"), list) and all(map(number, row["jcts_s"])))


class SweepPointError(ValueError):
    """A point that cannot be replayed (its trace has a job no type of the cluster can
    run, or the replay refused): one line naming the point. Made of its message alone,
    so that it comes back whole from a worker process or a Ray task."""


class SweepStopped(KeyboardInterrupt):
    """Ctrl-C during a sweep: which runs its journal holds (one line)."""


@dataclass(frozen=True)
class SweepPoint:
    policy: str
    rate: float
    seed: int

    @property
    def key(self) -> tuple[str, float, int]:
        """The point as its journal names it (``sweep_journal.key_of``)."""
        return (self.policy, self.rate, self.seed)


@dataclass(frozen=True)
class SweepSpec:
    """Everything but the grid: what each point simulates.

    ``trace``, when given, replaces the §5.7.1 generator: ``trace(rate, seed)`` returns
    the jobs (a module-level function or a ``functools.partial`` of one, so that worker
    processes can receive it). ``core_options`` override fields of
    ``config_for(policy, ...)`` (e.g. ``{"backfill": False}``). ``entities`` make water
    filling hierarchical (generated jobs join one uniformly); ``estimate_pairs`` and
    ``estimator``, ``plan_lead_s`` and ``arrival_grace_s`` are those of ``SimConfig``; ``policy_options`` go to
    every policy.
    ``table`` (default: the catalog's) gets the cluster's types it lacks from their
    shipped measured rows (``traces.profiles.table_for_types``).
    """

    jobs: int
    cluster: Mapping[str, int]
    multi_gpu: bool = False
    round_seconds: float = 360.0
    min_resolve_interval_s: float = 1920.0
    window: tuple[int, int] | None = None
    gpus_per_server: Mapping[str, int] | int | None = None
    prices: Mapping[str, float] | None = None
    preemption_overhead: str = "table"      # seconds, "catalog", or the table's restart_s
    table: ThroughputTable | None = None
    trace: Callable[[float, int], list[TraceJob]] | None = None
    core_options: Mapping[str, Any] = field(default_factory=dict)
    entities: Mapping[str, Entity] | None = None
    estimate_pairs: bool = False
    estimator: EstimatorConfig = field(default_factory=EstimatorConfig)
    policy_options: Mapping[str, Any] = field(default_factory=dict)
    plan_lead_s: float = 0.0
    arrival_grace_s: float = 0.0


def default_window(jobs: int) -> tuple[int, int]:
    """Steady-state jobs when none are named: the middle of the trace, [n/2, 3n/4)
    (the thesis measures jobs 4000-5000 of traces of at least 5000 jobs)."""
    first, last = jobs // 2, (3 * jobs) // 4
    return (first, max(last, first + 1))


def spec_table(spec: SweepSpec) -> ThroughputTable:
    """The table a point simulates on: ``spec.table`` (or the catalog's) with the cluster's
    types it lacks filled in (``TraceError`` naming a type nothing measured)."""
    return table_for_types(spec.table or default_table(), spec.cluster)


def point_jobs(rate: float, seed: int, spec: SweepSpec, table: ThroughputTable) -> list:
    """The jobs the points at ``rate`` and ``seed`` replay (every policy the same)."""
    if spec.trace is not None:
        return spec.trace(rate, seed)
    return generate_trace(spec.jobs, rate, table=table, seed=seed, multi_gpu=spec.multi_gpu,
                          entities=tuple(spec.entities or ()))


def run_point(point: SweepPoint, spec: SweepSpec) -> dict:
    """One point's replay and its row; ``SweepPointError`` when it cannot be replayed."""
    try:
        return _replay(point, spec)
    except (TraceError, SimulationError) as err:
        raise SweepPointError(f"{point.policy} at rate {point.rate:g}, seed {point.seed}: "
                              f"{err}") from None


def _replay(point: SweepPoint, spec: SweepSpec) -> dict:
    table = spec_table(spec)
    jobs = point_jobs(point.rate, point.seed, spec, table)
    validate_trace(jobs, table, spec.cluster, "<generated trace>")
    window = spec.window or default_window(len(jobs))
    types = ClusterView.build(spec.cluster).worker_types
    options = {"round_seconds": spec.round_seconds,
               "min_resolve_interval_s": spec.min_resolve_interval_s, **spec.core_options}
    policy = make_policy(point.policy, seed=point.seed, **spec.policy_options)
    core = config_for(policy, table, types, seed=point.seed, **options)
    result = simulate(jobs, table, spec.cluster, policy, core_config=core,
                      sim=SimConfig(window=window, preemption_overhead_s=preemption_overheads(
                          spec.preemption_overhead, (j.job_type for j in jobs), table),
                          estimate_pairs=spec.estimate_pairs, estimator=spec.estimator,
                          plan_lead_s=spec.plan_lead_s,
                          arrival_grace_s=spec.arrival_grace_s),
                      gpus_per_server=spec.gpus_per_server, prices=spec.prices,
                      entities=spec.entities, seed=point.seed)
    return {
        "policy": point.policy, "rate": point.rate, "seed": point.seed, "jobs": len(jobs),
        "window": f"{window[0]}:{window[1]}", "avg_jct_s": result.avg_jct_s,
        "makespan_s": result.makespan_s, "utilization": result.utilization,
        "cost_usd": result.cost_usd, "slo_violations": result.slo_violations,
        "rounds": result.rounds, "resolves": result.resolves,
        "lease_extension_rate": result.lease_extension_rate,
        "unarrived": sum(1 for j in result.jobs if j.arrival_s > result.end_s),
        "wall_s": result.wall_s,
        "jcts_s": [j.jct_s for j in result.jobs[window[0]:window[1]] if j.jct_s is not None],
    }


def _run(args):
    return run_point(*args)


def run_points(tasks: Sequence[tuple[SweepPoint, SweepSpec]], *, processes: int | None = None,
               progress: bool = False, ray_address: str | None = None,
               finished: Callable[[dict], None] | None = None) -> list[dict]:
    """Run every (point, spec) in a pool of ``processes`` (1: in this process), or as tasks
    on the Ray cluster at ``ray_address`` (``ray_sweep``); return the rows in the order of
    ``tasks``. Put the longest runs first: they start early. ``progress``: runs done out
    of the total on stderr (``Progress``), and where a Ray run's rows were made;
    ``finished``: called with each row as its run finishes (``sweep_journal``)."""
    shown = Progress(len(tasks)) if progress else None

    def done(row: dict) -> None:
        if finished is not None:
            finished(row)
        if shown is not None:
            shown.update(1)
    try:
        if ray_address is not None:
            from .ray_sweep import run_on_ray, summary
            rows, nodes = run_on_ray(tasks, ray_address, _run_indexed, done)
            if shown is not None:
                shown.note(summary(nodes))
            return rows
        return _run_local(tasks, processes, done)
    finally:
        if shown is not None:
            shown.close()


def _pool_worker() -> None:
    """A sweep's worker process: Ctrl-C reaches the sweep's own process only, which then
    ends the workers' runs, and SIGTERM (``Pool.terminate``) ends the worker whatever
    handler the sweep's process had (a test suite's process that had run
    ``local-cluster`` in it hung at a terminate: its workers caught the SIGTERM)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _run_local(tasks, processes: int | None, done: Callable[[dict], None]) -> list[dict]:
    rows: list[dict | None] = [None] * len(tasks)
    indexed = list(enumerate(tasks))
    if processes == 1 or len(tasks) <= 1:
        results = map(_run_indexed, indexed)
        pool = None
    else:
        pool = multiprocessing.Pool(processes, initializer=_pool_worker)
        results = pool.imap_unordered(_run_indexed, indexed)
    try:
        for i, row in results:
            rows[i] = row
            done(row)
    except BaseException:
        if pool is not None:
            pool.terminate()     # (a run that raised, or Ctrl-C: the others stop too)
        raise
    finally:
        if pool is not None:
            pool.close()
            pool.join()
    return rows  # type: ignore[return-value]


class Progress:
    """Runs done out of the total, on stderr, the same for local and Ray sweeps: a bar on
    a terminal; elsewhere (a log, a pipe) a line ``sweep: 45/90 runs done`` at every
    twentieth of the total and at the end."""

    STEPS = 20

    def __init__(self, total: int):
        self.total, self.done, self._step = total, 0, 0
        self._bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm
            self._bar = tqdm(total=total, unit="run", file=sys.stderr, desc="sweep")

    def update(self, n: int = 1) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
            return
        step = self.done * self.STEPS // max(self.total, 1)
        if step > self._step or self.done == self.total:
            self._step = step
            print(f"sweep: {self.done}/{self.total} runs done", file=sys.stderr, flush=True)

    def note(self, line: str) -> None:
        """A line of its own (under the bar, on a terminal)."""
        if self._bar is not None:
            self._bar.write(line, file=sys.stderr)
        else:
            print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _run_indexed(item):
    i, task = item
    return i, _run(task)


def write_csv(rows: Sequence[Mapping], path: str | Path) -> Path:
    """Write rows (``FIELDS`` columns, None as empty) to a CSV file."""
    path = Path(path)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if row[k] is None else row[k]) for k in FIELDS})
    return path


def run_sweep(policies: Sequence[str], rates: Sequence[float], seeds: Sequence[int],
              spec: SweepSpec, out_dir: str | Path, *, processes: int | None = None,
              progress: bool = False, ray_address: str | None = None) -> list[dict]:
    """Run the grid (locally, or on the Ray cluster at ``ray_address``); write
    ``sweep.csv`` and ``jct_vs_rate.png``; return the rows. Each run's row goes to the
    folder's journal as it finishes, and the runs the journal already holds are not made
    again (``sweep_journal``: a stopped sweep resumes where it stopped)."""
    spec = replace(spec, table=spec_table(spec))  # here: a bad cluster fails before the pool
    out = Path(out_dir).absolute()   # (once: the journal and the lines name it so)
    out.mkdir(parents=True, exist_ok=True)
    journal = Journal(out, spec, accept=is_row)
    points = [SweepPoint(p, float(r), int(s)) for p, r, s in
              itertools.product(policies, rates, seeds)]
    todo = [pt for pt in points if pt.key not in journal.done]
    if len(todo) < len(points) and progress:
        print(f"sweep: resumed from {journal.path}: {len(points) - len(todo)} of "
              f"{len(points)} runs already made (remove it to make them again)",
              file=sys.stderr, flush=True)
    # Highest rates first: the longest runs start early (as Gavel's sweep does).
    todo.sort(key=lambda pt: -pt.rate)
    try:
        if todo:     # (a sweep the journal holds whole needs no pool, nor a Ray cluster)
            run_points([(pt, spec) for pt in todo], processes=processes, progress=progress,
                       ray_address=ray_address, finished=journal.add)
    except KeyboardInterrupt:
        made = sum(1 for pt in points if pt.key in journal.done)
        raise SweepStopped(f"stopped: {made} of {len(points)} runs are in {journal.path}; "
                           "the same command again makes the others") from None
    rows = [journal.done[pt.key] for pt in points]
    rows.sort(key=lambda r: (list(policies).index(r["policy"]), r["rate"], r["seed"]))
    write_csv(rows, out / "sweep.csv")
    plot_sweep(rows, out / "jct_vs_rate.png")
    return rows

