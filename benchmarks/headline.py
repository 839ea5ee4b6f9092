"""The Gavel chapter's headline results (thesis §5.7.3 and chapter 6) with our catalog.

Four experiments on a 36:36:36 cluster (v100:p100:k80), run together in one pool of
processes (``simulator.sweep.run_points``):

1. continuous-single: LAS (``max_min_fairness``) vs Gavel (``max_min_fairness_perf``),
   average JCT of steady-state jobs against the input job rate (Figure 5.9);
2. continuous-multiple: the same with multi-GPU jobs (Figure 5.10);
3. makespan: a static multi-GPU trace (every job at t=0), ``min_total_duration_perf`` vs
   ``fifo`` and ``gandiva`` (as Gavel's artifact runs it);
4. cost: ResNet-50 and A3C jobs of {0.5, 1, 2, 4, 8} V100-days with SLOs of 1.2x/2x/10x
   their duration, ``max_sum_throughput_perf`` vs the cost policies (chapter 6 §6.4), once
   with the default (Gavel) mechanism and once with ``CoreConfig.backfill`` off.

Our sweeps use smaller traces than the thesis' (>= 5000 jobs, window 4000-5000): 3000-4000
jobs, averaging an earlier window; the 'drained' column says where arrivals ran out before
the window's jobs finished. One point (continuous-single at 5 jobs/h, LAS and Gavel) is
also run with the thesis' window on a 7000-job trace. The full mode takes ~20 minutes on
2 cores; ``--quick`` (~1 minute) is a smoke run whose figures are not meaningful.

    python benchmarks/headline.py --quick --out /tmp/headline
    python benchmarks/headline.py --out results/headline

Flags select and change the continuous experiments, so that every figure in BENCHMARKS.md
comes from a command: ``--only`` names experiments, ``--throughputs`` replays them on
another throughput table (native YAML/JSON or Gavel's JSON format; the job types of the
traces then come from that table, and the fluid bounds are computed on it), ``--rates``,
``--window FIRST:LAST``, ``--jobs`` and ``--seeds`` replace the swept rates, the averaged
window, the trace length and the seeds. E.g. the thesis window at two rates:

    python benchmarks/headline.py --only continuous_single_thesis_window --rates 5 5.6 \
        --jobs 7000 --window 4000:5000 --seeds 0 --out results/window

Writes OUT/headline.md, one CSV per group of runs, the plots, and OUT/results.json (every
row, which ``--report-only`` turns into the report again without simulating).
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import math
import os
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy.optimize import linprog

from simulator.plots import plot_cdfs, plot_sweep
from simulator.sweep import SweepPoint, SweepSpec, run_points, write_csv
from traces import ThroughputTable, TraceJob
from traces.catalog import default_catalog
from traces.generator import (
    LONG_JOB_PROBABILITY,
    LONG_LOG10_MINUTES,
    SCALE_FACTOR_MIX,
    SHORT_LOG10_MINUTES,
    SLO_FACTORS,
    sample_arrivals_s,
)

CLUSTER = {"v100": 36, "p100": 36, "k80": 36}
LAS, GAVEL = "max_min_fairness", "max_min_fairness_perf"
MAKESPAN, FIFO, GANDIVA = "min_total_duration_perf", "fifo", "gandiva"
THROUGHPUT = "max_sum_throughput_perf"
COST, COST_SLO = ("max_sum_throughput_normalized_by_cost_perf",
                  "max_sum_throughput_normalized_by_cost_perf_SLOs")
COST_JOB_TYPES = ("ResNet-50 (batch size 128)", "A3C")  # Table 6.1: 9.6x and 2.2x vs K80
COST_DAYS = (0.5, 1.0, 2.0, 4.0, 8.0)


@dataclass(frozen=True)
class Group:
    """Runs of one experiment that share a trace spec: policies x rates x seeds."""

    label: str
    spec: SweepSpec
    policies: tuple[str, ...]
    rates: tuple[float, ...]
    seeds: tuple[int, ...]

    def points(self) -> list[SweepPoint]:
        return [SweepPoint(p, r, s) for p in self.policies for r in self.rates
                for s in self.seeds]


# ---- traces and analytic bounds ----------------------------------------------------------
def cost_trace(rate: float, seed: int, *, jobs: int, day_s: float = 86400.0) -> list[TraceJob]:
    """§5.7.3 "Cost": ResNet-50 or A3C (uniformly), V100 durations from COST_DAYS days
    (of ``day_s`` seconds), SLOs of 1.2x/2x/10x the duration, Poisson arrivals."""
    table = default_catalog().table
    rng = np.random.default_rng(seed)
    kinds = rng.integers(len(COST_JOB_TYPES), size=jobs)
    days = rng.choice(COST_DAYS, size=jobs)
    slos = rng.choice(SLO_FACTORS, size=jobs)
    arrivals = sample_arrivals_s(rng, jobs, rate)
    out = []
    for kind, d, slo, at in zip(kinds, days, slos, arrivals):
        job_type, seconds = COST_JOB_TYPES[kind], float(d) * day_s
        out.append(TraceJob(job_type=job_type, scale_factor=1, arrival_s=float(at),
                            total_steps=round(seconds * table.get("v100", job_type, 1)),
                            slo_s=float(slo) * seconds))
    return out


def mean_v100_hours() -> float:
    """Mean §5.7.1 job duration on a V100: E[10^x] minutes for x uniform on each range."""
    def mean(lo: float, hi: float) -> float:
        return (10 ** hi - 10 ** lo) / ((hi - lo) * math.log(10))
    return (LONG_JOB_PROBABILITY * mean(*LONG_LOG10_MINUTES)
            + (1 - LONG_JOB_PROBABILITY) * mean(*SHORT_LOG10_MINUTES)) / 60


def fluid_capacity(table: ThroughputTable, cluster: dict[str, int],
                   multi_gpu: bool) -> tuple[float, float]:
    """Highest sustainable input rate (jobs/hour) of a §5.7.1 trace, ignoring rounds,
    placement and queueing: (agnostic: each job spends equal time on every type; aware:
    the best assignment of job classes to types, an LP, which bounds any heterogeneity-aware
    policy, max-min fairness included). Work is in V100-hours per job."""
    types = list(cluster)
    mix = SCALE_FACTOR_MIX if multi_gpu else {1: 1.0}
    classes = []  # (probability, scale factor, speed on each type relative to the V100)
    for job_type in table.job_types:
        for sf, p in mix.items():
            k = sf if table.get("v100", job_type, sf) > 0 else 1
            v100 = table.get("v100", job_type, k)
            speed = np.array([table.get(t, job_type, k) / v100 for t in types])
            classes.append((p / len(table.job_types), k, speed))
    work = mean_v100_hours()
    agnostic = sum(cluster.values()) / sum(p * work * k / s.mean() for p, k, s in classes)
    # Aware LP: x[c, t] jobs of class c running on type t; maximise the rate lam.
    n, m = len(classes), len(types)
    cost = np.zeros(n * m + 1)
    cost[-1] = -1.0
    rows, bounds = [], []
    for c, (p, k, s) in enumerate(classes):  # class c is served as fast as it arrives
        row = np.zeros(n * m + 1)
        row[c * m:(c + 1) * m] = -s
        row[-1] = p * work
        rows.append(row)
        bounds.append(0.0)
    for t in range(m):  # GPUs of type t
        row = np.zeros(n * m + 1)
        row[t:n * m:m] = [k for _, k, _ in classes]
        rows.append(row)
        bounds.append(cluster[types[t]])
    aware = -linprog(cost, A_ub=np.array(rows), b_ub=bounds, method="highs").fun
    return agnostic, aware


# ---- small helpers ------------------------------------------------------------------------
def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    return float(np.mean(values)), float(np.std(values))


def fmt(values: Sequence[float], scale: float = 1.0, digits: int = 1) -> str:
    """'mean ± sd' (or the one value) of values / scale."""
    m, s = mean_sd([v / scale for v in values])
    return f"{m:.{digits}f}" if len(values) < 2 else f"{m:.{digits}f} ± {s:.{digits}f}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def pick(rows: list[dict], **match) -> list[dict]:
    return [r for r in rows if all(r[k] == v for k, v in match.items())]


# ---- experiments --------------------------------------------------------------------------
@dataclass(frozen=True)
class Continuous:
    """Average JCT of the window's jobs vs input rate, LAS vs Gavel (Figures 5.9, 5.10)."""

    name: str
    title: str
    spec: SweepSpec
    rates: tuple[float, ...]
    seeds: tuple[int, ...]
    figure: str
    thesis_rate: float
    thesis_ratio: float

    def groups(self) -> list[Group]:
        return [Group(self.name, self.spec, (LAS, GAVEL), self.rates, self.seeds)]

    def report(self, results: dict[str, list[dict]], out: Path) -> tuple[str, list[list[str]]]:
        rows = results[self.name]
        plot_sweep(rows, out / f"{self.name}_jct_vs_rate.png")

        def jcts(policy, rate):
            return [r["avg_jct_s"] for r in pick(rows, policy=policy, rate=rate)]

        mean = {(p, r): float(np.mean(jcts(p, r))) for p in (LAS, GAVEL) for r in self.rates}
        agnostic, aware = fluid_capacity(self.spec.table or default_catalog().table, CLUSTER,
                                         self.spec.multi_gpu)
        # Our high-load point: the highest swept rate within Gavel's capacity (the thesis'
        # 5.6 jobs/h lies past LAS' saturation but not Gavel's).
        below = [r for r in self.rates if r <= aware]
        high = below[-1] if below else self.rates[0]

        def ratio(rate):
            return mean[LAS, rate] / mean[GAVEL, rate]

        drained = {(p, rate): any(r["unarrived"] == 0 for r in pick(rows, policy=p, rate=rate))
                   for p in (LAS, GAVEL) for rate in self.rates}
        body = []
        for rate in self.rates:
            names = [n for p, n in ((LAS, "LAS"), (GAVEL, "Gavel")) if drained[p, rate]]
            body.append([f"{rate:g}", fmt(jcts(LAS, rate), 3600), fmt(jcts(GAVEL, rate), 3600),
                         f"{ratio(rate):.2f}x", " / ".join(names) or "-"])
        seed = self.seeds[0]
        plot_cdfs({p: pick(rows, policy=p, rate=high, seed=seed)[0]["jcts_s"]
                   for p in (LAS, GAVEL)}, out / f"{self.name}_jct_cdf.png",
                  title=f"{self.title}: JCT CDF at {high:g} jobs/h (seed {seed})")
        at_thesis = (f"{ratio(self.thesis_rate):.2f}x at {self.thesis_rate:g} jobs/h"
                     if self.thesis_rate in self.rates else f"{self.thesis_rate:g} not run")
        ours = f"{ratio(high):.2f}x at {high:g} jobs/h"
        if high != self.thesis_rate:
            ours += f"; {at_thesis}"
        first, last = self.spec.window
        md = [f"## {self.title} (Figure {self.figure})",
              (f"Traces of {self.spec.jobs} jobs; average JCT (mean ± sd over seeds "
              f"{', '.join(map(str, self.seeds))}) of jobs {first}-{last - 1}. 'Drained': "
              "arrivals ran out before those jobs finished, so they finished in an emptying "
              "cluster and the JCT understates a saturated one."), "",
              table(["rate (jobs/h)", "LAS JCT (h)", "Gavel JCT (h)", "LAS / Gavel",
                     "drained"], body), "",
              table(["", "thesis", "ours"], [
                  ["LAS / Gavel JCT at high load",
                   f"{self.thesis_ratio}x at {self.thesis_rate:g} jobs/h",
                   ours + " (the first: highest swept rate within Gavel's capacity)"],
                  ["saturation, LAS / Gavel", f"read off Figure {self.figure}a",
                   (f"fluid capacity {agnostic:.2f} / {aware:.2f} jobs/h; first drained rate "
                   f"{_first(drained, LAS)} / {_first(drained, GAVEL)}")],
              ]), "",
              (f"![JCT vs rate]({self.name}_jct_vs_rate.png) "
              f"![JCT CDF]({self.name}_jct_cdf.png)"), ""]
        summary = [[f"{self.title}: LAS / Gavel JCT",
                    f"{self.thesis_ratio}x at {self.thesis_rate:g} jobs/h", ours],
                   [f"{self.title}: capacity LAS / Gavel (fluid bound)", "-",
                    f"{agnostic:.2f} / {aware:.2f} jobs/h"]]
        return "\n".join(md), summary


def _first(drained: dict, policy: str) -> str:
    rates = [rate for (p, rate), yes in drained.items() if p == policy and yes]
    return f"{min(rates):g}" if rates else "none"


@dataclass(frozen=True)
class ThesisWindow:
    """Load points measured as the thesis does: jobs 4000-4999 of a longer trace."""

    name: str
    title: str
    spec: SweepSpec
    rates: tuple[float, ...]
    seeds: tuple[int, ...]
    thesis: str

    def groups(self) -> list[Group]:
        return [Group(self.name, self.spec, (LAS, GAVEL), self.rates, self.seeds)]

    def report(self, results: dict[str, list[dict]], out: Path) -> tuple[str, list[list[str]]]:
        rows = results[self.name]
        body, ratios = [], []
        for rate in self.rates:
            las, gavel = ([r["avg_jct_s"] for r in pick(rows, policy=p, rate=rate)]
                          for p in (LAS, GAVEL))
            ratio = np.mean(las) / np.mean(gavel)
            ratios.append(f"{ratio:.2f}x at {rate:g} jobs/h")
            drained = [n for p, n in ((LAS, "LAS"), (GAVEL, "Gavel"))
                       if any(r["unarrived"] == 0 for r in pick(rows, policy=p, rate=rate))]
            body.append([f"{rate:g}", fmt(las, 3600), fmt(gavel, 3600), f"{ratio:.2f}x",
                         " / ".join(drained) or "-", self.thesis])
        first, last = self.spec.window
        md = [f"## {self.title}",
              (f"{self.spec.jobs}-job traces, jobs {first}-{last - 1}, seeds "
              f"{', '.join(map(str, self.seeds))}."), "",
              table(["rate (jobs/h)", "LAS JCT (h)", "Gavel JCT (h)", "LAS / Gavel",
                     "drained", "thesis"], body), ""]
        return "\n".join(md), [[self.title + ": LAS / Gavel JCT", self.thesis,
                                 "; ".join(ratios)]]


@dataclass(frozen=True)
class Makespan:
    """Static multi-GPU trace: makespan of Gavel's policy vs FIFO and Gandiva."""

    spec: SweepSpec
    seeds: tuple[int, ...]
    name: str = "makespan"
    thesis: tuple[tuple[str, float], ...] = ((FIFO, 2.5), (GANDIVA, 1.4))

    def groups(self) -> list[Group]:
        return [Group(self.name, self.spec, (MAKESPAN, FIFO, GANDIVA), (0.0,), self.seeds)]

    def report(self, results: dict[str, list[dict]], out: Path) -> tuple[str, list[list[str]]]:
        rows = results[self.name]
        gavel = np.mean([r["makespan_s"] for r in pick(rows, policy=MAKESPAN)])
        thesis = dict(self.thesis)
        body = []
        for policy in (MAKESPAN, FIFO, GANDIVA):
            mine = pick(rows, policy=policy)
            ms = [r["makespan_s"] for r in mine]
            body.append([policy, fmt(ms, 3600), f"{np.mean(ms) / gavel:.2f}x",
                         f"{thesis[policy]}x" if policy in thesis else "1x",
                         fmt([r["avg_jct_s"] for r in mine], 3600),
                         fmt([100 * r["utilization"] for r in mine], digits=0)])
        md = [f"## Makespan (static trace, {self.spec.jobs} multi-GPU jobs at t=0)",
              (f"Seeds {', '.join(map(str, self.seeds))}; ratio = makespan / "
              f"{MAKESPAN}'s."), "",
              table(["policy", "makespan (h)", "ratio", "thesis ratio", "avg JCT (h)",
                     "utilization %"], body), ""]
        ours = {p: np.mean([r["makespan_s"] for r in pick(rows, policy=p)]) / gavel
                for p in (FIFO, GANDIVA)}
        summary = [["Makespan: FIFO / Gandiva over Gavel", f"{thesis[FIFO]}x / {thesis[GANDIVA]}x",
                    f"{ours[FIFO]:.2f}x / {ours[GANDIVA]:.2f}x"]]
        return "\n".join(md), summary


@dataclass(frozen=True)
class Cost:
    """Cost and SLO violations of the cost policies vs max_sum_throughput_perf."""

    spec: SweepSpec
    rate: float
    seeds: tuple[int, ...]
    name: str = "cost"

    def groups(self) -> list[Group]:
        policies = (THROUGHPUT, COST, COST_SLO)
        # Each policy declares no backfill for the cost policies (Traits.backfill); the
        # first group sets Gavel's mechanism (backfill on) for every policy explicitly.
        return [Group(f"{self.name}", replace(self.spec, core_options={"backfill": True}),
                      policies, (self.rate,), self.seeds),
                Group(f"{self.name}_no_backfill",
                      replace(self.spec, core_options={"backfill": False}),
                      policies, (self.rate,), self.seeds)]

    def report(self, results: dict[str, list[dict]], out: Path) -> tuple[str, list[list[str]]]:
        catalog = default_catalog()
        per_hour = sum(n * catalog.price(t) for t, n in CLUSTER.items())
        thesis = {THROUGHPUT: ("1x", "-"), COST: ("1.4x", "~35%"), COST_SLO: ("1.2x", "0%")}
        body, found = [], {}
        for label, mechanism in ((self.name, "Gavel (backfill)"),
                                 (f"{self.name}_no_backfill", "no backfill")):
            rows = results[label]
            base = np.mean([r["cost_usd"] for r in pick(rows, policy=THROUGHPUT)])
            base_owned = np.mean([r["makespan_s"] for r in pick(rows, policy=THROUGHPUT)])
            for policy in (THROUGHPUT, COST, COST_SLO):
                mine = pick(rows, policy=policy)
                cost = np.mean([r["cost_usd"] for r in mine])
                owned = np.mean([r["makespan_s"] for r in mine])
                violations = np.mean([100 * r["slo_violations"] / r["jobs"] for r in mine])
                found[(mechanism, policy)] = (base / cost, violations)
                body.append([policy, mechanism, f"{cost:,.0f}", f"{base / cost:.2f}x",
                             f"{violations:.0f}%", f"{owned / 3600:.0f}",
                             f"{base_owned / owned:.2f}x", *thesis[policy]])
        jobs = self.spec.jobs
        md = [f"## Cost ({jobs} ResNet-50 / A3C jobs, {self.rate:g} jobs/h)",
              (f"Seeds {', '.join(map(str, self.seeds))}. Cost charges each micro-task's GPUs "
              "for the time they ran (idle GPUs are free: rented capacity). 'Cost "
              "reduction' is the baseline's cost over the policy's; 'owned reduction' charges "
              f"the whole cluster (${per_hour:.2f}/h) over the makespan instead."), "",
              table(["policy", "mechanism", "cost ($)", "cost reduction", "SLO violations",
                     "makespan (h)", "owned reduction", "thesis reduction",
                     "thesis violations"], body), ""]
        summary = []
        for mechanism in ("Gavel (backfill)", "no backfill"):
            red, vio = found[(mechanism, COST)]
            red_slo, vio_slo = found[(mechanism, COST_SLO)]
            summary.append([f"Cost reduction, violations ({mechanism})",
                            "1.4x, ~35% / 1.2x, 0%",
                            f"{red:.2f}x, {vio:.0f}% / {red_slo:.2f}x, {vio_slo:.0f}%"])
        return "\n".join(md), summary


# ---- the two modes, and the flags that change them -----------------------------------------
@dataclass(frozen=True)
class Options:
    """What the command-line flags change (None: the mode's own value)."""

    only: tuple[str, ...] = ()
    throughputs: str | None = None
    rates: tuple[float, ...] | None = None
    window: tuple[int, int] | None = None
    jobs: int | None = None
    seeds: tuple[int, ...] | None = None

    def to_dict(self) -> dict:
        return {"only": list(self.only), "throughputs": self.throughputs,
                "rates": None if self.rates is None else list(self.rates),
                "window": None if self.window is None else list(self.window),
                "jobs": self.jobs, "seeds": None if self.seeds is None else list(self.seeds)}

    @classmethod
    def from_dict(cls, data: dict) -> Options:
        def tup(key, kind):
            return None if data.get(key) is None else tuple(kind(v) for v in data[key])
        return cls(only=tuple(data.get("only", ())), throughputs=data.get("throughputs"),
                   rates=tup("rates", float), window=tup("window", int),
                   jobs=data.get("jobs"), seeds=tup("seeds", int))


NAMES = ("continuous_single", "continuous_multi", "continuous_single_thesis_window",
         "makespan", "cost")


def experiments(quick: bool, options: Options = Options()) -> list:
    """The mode's experiments, changed by ``options`` (``--throughputs`` applies to the
    continuous and makespan experiments; the cost experiment's ResNet-50 / A3C workload
    comes from the catalog)."""
    exps = _mode(quick)
    table = None
    if options.throughputs is not None:
        from traces import load_table
        table = load_table(Path(options.throughputs))
    out = []
    for e in exps:
        if options.only and e.name not in options.only:
            continue
        if isinstance(e, Cost):
            out.append(e)
            continue
        spec = replace(e.spec, table=table or e.spec.table)
        seeds = options.seeds or e.seeds
        if isinstance(e, Makespan):
            out.append(replace(e, spec=spec, seeds=seeds))
            continue
        jobs = options.jobs or spec.jobs
        window = options.window or spec.window
        if window[1] > jobs:
            raise ValueError(f"--window {window[0]}:{window[1]} ends past the trace's "
                             f"{jobs} jobs ({e.name})")
        spec = replace(spec, jobs=jobs, window=window)
        out.append(replace(e, spec=spec, rates=options.rates or e.rates, seeds=seeds))
    return out


def _mode(quick: bool) -> list:
    if quick:
        single = SweepSpec(jobs=500, cluster=CLUSTER, window=(150, 300))
        multi = SweepSpec(jobs=300, cluster=CLUSTER, multi_gpu=True, window=(100, 200))
        return [
            Continuous("continuous_single", "Continuous-single", single, (2.0, 4.5, 5.6), (0,),
                       "5.9", 5.6, 3.5),
            Continuous("continuous_multi", "Continuous-multiple", multi, (1.0, 2.6), (0,),
                       "5.10", 2.6, 2.2),
            ThesisWindow("continuous_single_thesis_window", "Continuous-single, later window",
                         SweepSpec(jobs=500, cluster=CLUSTER, window=(300, 400)), (5.0,), (0,),
                         "3.5x at 5.6 jobs/h"),
            Makespan(SweepSpec(jobs=100, cluster=CLUSTER, multi_gpu=True, window=(0, 100)),
                     (0,)),
            # Durations halved, rate doubled: the same load. Shorter jobs would leave the
            # tightest SLOs less slack than a re-solve interval (the SLO policy then fails).
            Cost(_cost_spec(40, day_s=86400.0 / 2), rate=0.5, seeds=(0,)),
        ]
    single = SweepSpec(jobs=3000, cluster=CLUSTER, window=(600, 1000))
    multi = SweepSpec(jobs=4000, cluster=CLUSTER, multi_gpu=True, window=(500, 900))
    return [
        Continuous("continuous_single", "Continuous-single", single,
                   (1.0, 2.0, 3.0, 3.5, 4.0, 4.5, 5.0, 5.6), (0, 1), "5.9", 5.6, 3.5),
        Continuous("continuous_multi", "Continuous-multiple", multi,
                   (0.8, 1.4, 2.0, 2.3, 2.6, 3.0), (0, 1), "5.10", 2.6, 2.2),
        ThesisWindow("continuous_single_thesis_window",
                     "Continuous-single, thesis window (jobs 4000-4999)",
                     SweepSpec(jobs=7000, cluster=CLUSTER, window=(4000, 5000)), (5.0,), (0,),
                     "3.5x at 5.6 jobs/h"),
        Makespan(SweepSpec(jobs=500, cluster=CLUSTER, multi_gpu=True, window=(0, 500)),
                 (0, 1, 2)),
        Cost(_cost_spec(500), rate=0.25, seeds=(0,)),
    ]


def _cost_spec(jobs: int, day_s: float = 86400.0) -> SweepSpec:
    return SweepSpec(jobs=jobs, cluster=CLUSTER, window=(0, jobs),
                     prices=dict(default_catalog().prices),
                     trace=functools.partial(cost_trace, jobs=jobs, day_s=day_s))


def simulate_all(exps: list, processes: int) -> dict:
    """Run every experiment's points in one pool: {"wall_s", "processes", "results":
    {group label: rows}}."""
    groups = [g for e in exps for g in e.groups()]
    spec_of = {g.label: g.spec for g in groups}
    tasks = [(g.label, pt) for g in groups for pt in g.points()]
    # Longest first: long windows, multi-GPU jobs and high rates take the longest.
    tasks.sort(key=lambda t: (-spec_of[t[0]].window[1] * (1 + spec_of[t[0]].multi_gpu),
                              -t[1].rate))
    start = time.perf_counter()
    rows = run_points([(pt, spec_of[label]) for label, pt in tasks], processes=processes,
                      progress=True)
    results: dict[str, list[dict]] = {g.label: [] for g in groups}
    for (label, _), row in zip(tasks, rows):
        results[label].append(row)
    for mine in results.values():
        mine.sort(key=lambda r: (r["policy"], r["rate"], r["seed"]))
    return {"wall_s": time.perf_counter() - start, "processes": processes, "results": results}


def report(quick: bool, data: dict, out: Path) -> str:
    """headline.md (returned too), CSVs and plots from ``simulate_all``'s output."""
    results = data["results"]
    options = Options.from_dict(data.get("options", {}))
    for label, mine in results.items():
        write_csv(mine, out / f"{label}.csv")
    sections, summary = [], []
    for e in experiments(quick, options):
        md, lines = e.report(results, out)
        sections.append(md)
        summary.extend(lines)
    rows = [r for mine in results.values() for r in mine]
    cpu = sum(r["wall_s"] for r in rows)
    head = [f"# Headline results ({'quick' if quick else 'full'} mode)",
            (f"{platform.machine()}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}; {len(rows)} simulations in "
            f"{data['wall_s'] / 60:.1f} min wall ({cpu / 60:.1f} min of simulation over "
            f"{data['processes']} processes); cluster 36:36:36, rounds of 360 s, "
            f"throughputs: {options.throughputs or 'default catalog'}."), "",
            f"Command: `{data.get('command', 'python benchmarks/headline.py')}`", "",
            table(["experiment", "thesis", "ours"], summary), ""]
    text = "\n".join(head + sections)
    (out / "headline.md").write_text(text + "\n")
    return text


def _window(spec: str) -> tuple[int, int]:
    first, sep, last = spec.partition(":")
    try:
        window = (int(first), int(last))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected FIRST:LAST job ids, got {spec!r}") from None
    if not sep or not 0 <= window[0] < window[1]:
        raise argparse.ArgumentTypeError(f"expected 0 <= FIRST < LAST, got {spec!r}")
    return window


def _positive(kind):
    def parse(text: str):
        value = kind(text)
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value
    return parse


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small traces (~1 minute)")
    parser.add_argument("--out", type=Path, default=Path("headline"),
                        help="output folder (default: ./headline)")
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1,
                        help="parallel simulations (default: all cores)")
    parser.add_argument("--report-only", action="store_true",
                        help="rewrite the report from OUT/results.json, simulating nothing")
    parser.add_argument("--only", nargs="+", choices=NAMES, default=(), metavar="NAME",
                        help=f"run only these experiments: {', '.join(NAMES)}")
    parser.add_argument("--throughputs", type=Path, default=None, metavar="PATH",
                        help="throughput table for the continuous and makespan experiments "
                             "(native YAML/JSON or Gavel's JSON); default: the catalog")
    parser.add_argument("--rates", nargs="+", type=_positive(float), default=None,
                        metavar="JOBS_PER_HOUR", help="input rates of the continuous experiments")
    parser.add_argument("--window", type=_window, default=None, metavar="FIRST:LAST",
                        help="job ids [FIRST, LAST) averaged by the continuous experiments")
    parser.add_argument("--jobs", type=_positive(int), default=None, metavar="N",
                        help="trace length of the continuous experiments")
    parser.add_argument("--seeds", nargs="+", type=int, default=None, metavar="SEED",
                        help="seeds of every experiment but cost")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    args.out.mkdir(parents=True, exist_ok=True)
    saved = args.out / "results.json"
    if args.report_only:
        data = json.loads(saved.read_text())
    else:
        options = Options(only=tuple(args.only),
                          throughputs=None if args.throughputs is None else str(args.throughputs),
                          rates=None if args.rates is None else tuple(args.rates),
                          window=args.window, jobs=args.jobs,
                          seeds=None if args.seeds is None else tuple(args.seeds))
        try:
            exps = experiments(args.quick, options)
        except (ValueError, OSError) as err:
            parser.error(str(err))
        data = simulate_all(exps, args.processes)
        data["options"] = options.to_dict()
        data["command"] = " ".join(["python benchmarks/headline.py",
                                    *(sys.argv[1:] if argv is None else argv)])
        saved.write_text(json.dumps(data))
    print(report(args.quick, data, args.out))
    print(f"\nwrote {args.out / 'headline.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
