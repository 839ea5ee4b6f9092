"""What a simulation's time goes to outside the solver, against a target (issue #30: 100,000
jobs in 60 s). Usage::

    python benchmarks/sim_budget.py                        # 100,000 jobs, 4 jobs/h, 60 s
    python benchmarks/sim_budget.py --jobs 10000 --target 6
    python benchmarks/sim_budget.py --stages               # and where the rest goes

A fresh process runs the ``--growth`` shape of ``benchmarks/simulate.py``
(``run_growth``: the continuous-1500 trace shape, 36:36:36, max_min_fairness_perf, Gavel's
defaults) with Clarabel's own calls timed: building each ``DefaultSolver`` (its set-up:
scaling, the KKT matrix, its ordering) and its ``solve``. With "identical results" (the
same JSON as before on the architecture issue's traces), Clarabel's input and so its work
cannot change; what the target leaves for everything else (the rounds, admissions, the
policy's own Python, the re-solves' set-up) is the budget per round printed last, beside
what everything else costs now.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def timed_run(jobs: int, rate: float, staged: bool = False) -> dict:
    """``simulate.run_growth`` with Clarabel's set-up and solve timed (wall seconds); with
    ``staged``, also the round's stages (``simulate.stages``, printed as they are).
    ``imports_s``: what the process paid once to import Clarabel and the simulator."""
    start = time.perf_counter()
    import clarabel

    import simulator  # noqa: F401  (imported here: the one-time cost, whatever runs below)

    real = clarabel.DefaultSolver
    spent = {"build_s": 0.0, "solve_s": 0.0}

    class Timed:        # what ``policies/lp.py`` builds, timed around the real one
        def __init__(self, *args):
            start = time.perf_counter()
            self.solver = real(*args)
            spent["build_s"] += time.perf_counter() - start

        def solve(self):
            start = time.perf_counter()
            try:
                return self.solver.solve()
            finally:
                spent["solve_s"] += time.perf_counter() - start

    sys.path.insert(0, str(HERE))
    from simulate import run_growth, stages
    imported = time.perf_counter() - start
    clarabel.DefaultSolver = Timed
    try:
        if not staged:
            row = run_growth(jobs, rate)
        else:
            row = stages(f"{jobs:,} jobs at {rate:g} jobs/h",
                         run=lambda: run_growth(jobs, rate))
    finally:
        clarabel.DefaultSolver = real
    return {**row, **spent, "imports_s": imported + row["imports_s"]}


def report(r: dict, target_s: float) -> None:
    rounds, solves = max(r["rounds"], 1), max(r["resolves"], 1)
    clarabel = r["build_s"] + r["solve_s"]
    rest = r["wall_s"] - clarabel
    print(f"# {r['jobs']:,} jobs ({r['rate']:g} jobs/h): {r['wall_s']:.1f} s wall, "
          f"{r['rounds']:,} rounds, {r['resolves']:,} re-solves, {r['peak_rss_mib']:.0f} MiB")
    print(f"{'part':<32} {'s':>8} {'share':>6} {'per re-solve':>13} {'per round':>10} "
          f"{'per job':>8}")
    for label, s in (("Clarabel: building the solver", r["build_s"]),
                     ("Clarabel: its solve", r["solve_s"]), ("everything else", rest)):
        per_solve = f"{1e6 * s / solves:>10.0f} us" if label.startswith("Clarabel") else ""
        print(f"{label:<32} {s:>8.2f} {100 * s / r['wall_s']:>5.1f}% {per_solve:>13} "
              f"{1e6 * s / rounds:>7.0f} us {1e6 * s / max(r['jobs'], 1):>5.0f} us")
    print(f"{'imports':<32} {r['imports_s']:>8.2f}   (once per process, not in the rows above)")
    print(f"with no solver time at all, everything else alone is {rest:.1f} s: "
          f"{rest / target_s:.2f}x the target of {target_s:g} s")
    left = target_s - clarabel
    if left <= 0:
        print(f"target {target_s:g} s: Clarabel alone takes {clarabel:.1f} s")
        return
    print(f"target {target_s:g} s: everything else must fit in {left:.1f} s, "
          f"{1e6 * left / rounds:.0f} us a round against {1e6 * rest / rounds:.0f} us now "
          f"({rest / left:.1f}x less)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=100_000, metavar="N",
                        help="jobs in the trace (default 100,000)")
    parser.add_argument("--rate", type=float, default=4.0, metavar="JOBS_PER_H",
                        help="arrival rate (default 4, as the growth rows of BENCHMARKS.md)")
    parser.add_argument("--target", type=float, default=60.0, metavar="S",
                        help="the wall time to meet (default 60 s, issue #30)")
    parser.add_argument("--stages", action="store_true",
                        help="also time the round's stages (simulate.py --stages' table): "
                             "where everything else goes")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.jobs < 1 or not args.rate > 0 or not args.target > 0:
        parser.error("--jobs, --rate and --target must be positive")
    if args.child:
        print(json.dumps(timed_run(args.jobs, args.rate, args.stages)))
        return 0
    from host import describe  # (a sibling: this file runs as a script)

    print(f"# {describe()}", flush=True)
    out = subprocess.run([sys.executable, __file__, "--child", "--jobs", str(args.jobs),
                          "--rate", str(args.rate)] + (["--stages"] if args.stages else []),
                         capture_output=True, text=True, check=True)
    *staged, last = out.stdout.strip().splitlines()
    if staged:
        print("\n".join(staged))
    report(json.loads(last), args.target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
