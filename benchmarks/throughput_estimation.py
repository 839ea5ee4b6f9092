"""Thesis Figure 5.16 (§5.7.6): space sharing with *estimated* pair throughputs.

On a heterogeneous 12-GPU cluster (4 V100, 4 P100, 4 K80), continuous single-GPU traces at a
sweep of input rates, three lines of average JCT (steady-state window):

- ``max_min_fairness_perf``: LAS without space sharing;
- ``max_min_fairness_packed``, oracle: space sharing planned on the measured co-located
  throughputs of the catalog;
- ``max_min_fairness_packed``, estimated: planned on throughputs estimated by matrix
  completion from a few profiled pairs (``gavelsched.estimator``, §5.3.3), replaced by the
  measured ones once a pair has run on a type. Jobs always progress at the true rates.

The thesis reports that the estimator costs very little average JCT at high load. Usage::

    python benchmarks/throughput_estimation.py --out DIR [--rates 0.2 0.35 ...] [--seeds 0 1]

Writes DIR/estimation.csv and DIR/jct_vs_rate.png and prints a table with the relative
difference of the estimated line to the oracle one.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from simulator.plots import plot_sweep
from simulator.sweep import SweepPoint, SweepSpec, run_points, write_csv

CLUSTER = {"v100": 4, "p100": 4, "k80": 4}
NO_SHARING, SHARING = "max_min_fairness_perf", "max_min_fairness_packed"
ESTIMATED = f"{SHARING} (estimated)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("estimation"), help="output folder")
    parser.add_argument("--rates", type=float, nargs="+", default=[0.2, 0.35, 0.5, 0.65],
                        help="input job rates (jobs/hour)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--jobs", type=int, default=300, help="jobs per trace")
    parser.add_argument("--window", type=int, nargs=2, default=(100, 200), metavar=("FIRST", "LAST"))
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    oracle = SweepSpec(jobs=args.jobs, cluster=CLUSTER, window=tuple(args.window))
    estimated = replace(oracle, estimate_pairs=True)
    tasks = [(SweepPoint(policy, rate, seed), spec)
             for rate in sorted(args.rates, reverse=True) for seed in args.seeds
             for policy, spec in ((SHARING, estimated), (SHARING, oracle), (NO_SHARING, oracle))]
    start = time.perf_counter()
    rows = run_points(tasks, processes=args.processes, progress=True)
    for (_, spec), row in zip(tasks, rows):
        if spec.estimate_pairs:
            row["policy"] = ESTIMATED
    wall = time.perf_counter() - start
    rows.sort(key=lambda r: (r["policy"], r["rate"], r["seed"]))
    write_csv(rows, args.out / "estimation.csv")
    plot_sweep(rows, args.out / "jct_vs_rate.png")

    def jct(policy: str, rate: float) -> float:
        return float(np.mean([r["avg_jct_s"] for r in rows
                              if r["policy"] == policy and r["rate"] == rate])) / 3600

    print(f"# {platform.machine()}, {os.cpu_count()} CPUs, cluster 4:4:4, {args.jobs} jobs, "
          f"window {args.window[0]}-{args.window[1]}, seeds {args.seeds}, {wall:.0f} s")
    print(f"{'rate':>6} {'no sharing h':>13} {'oracle h':>9} {'estimated h':>12} "
          f"{'estimated vs oracle':>20}")
    for rate in sorted(args.rates):
        base, ora, est = jct(NO_SHARING, rate), jct(SHARING, rate), jct(ESTIMATED, rate)
        print(f"{rate:>6g} {base:>13.2f} {ora:>9.2f} {est:>12.2f} {100 * (est / ora - 1):>+19.1f}%")
    print(f"wrote {args.out / 'estimation.csv'} and {args.out / 'jct_vs_rate.png'}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
