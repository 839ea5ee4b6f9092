"""What water filling's polish costs by each solver at production size (issue #30).

The polish (``policies/water_filling.py: WaterFilling._polish``) keeps every job's level
and hands out what is left. Its feasible set is thin (each level kept to 1e-8), so
Clarabel may end it inaccurate; it is then solved again at a vertex (``VERTEX_SOLVERS``).
This catches the polish LP of ``max_min_fairness_water_filling_packed``'s first plan of N
waiting jobs on 2,048 GPUs (``policy_scale.first_plan``: the daemon's way), then solves it
precisely with each solver, each in a fresh process: seconds, outcome, objective, the
worst row violation, peak RSS. Usage::

    python benchmarks/polish_solvers.py                       # 10,000 jobs, 8 partners
    python benchmarks/polish_solvers.py --jobs 20000 --partners 16
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import tempfile
import time
from pathlib import Path

from host import describe
from policy_scale import first_plan, fresh

POLICY = "max_min_fairness_water_filling_packed"
SOLVERS = ("CLARABEL", "HIGHS_IPM", "HIGHS")


def catch(jobs: int, partners: int, into: Path) -> dict:
    """Plan as ``first_plan`` does, keeping the first polish LP in ``into`` (pickled)."""
    import policies.water_filling as wf

    real = wf.solve_lp

    def keeping(lp, solver, what, precise=False):
        if what.endswith("(polish)") and not into.exists():
            into.write_bytes(pickle.dumps(lp))
        return real(lp, solver, what, precise=precise)
    wf.solve_lp = keeping
    return first_plan(jobs, partners, POLICY)


def solve(lp_file: Path, solver: str) -> dict:
    """The polish LP by ``solver`` alone (precise, as the polish asks)."""
    import numpy as np

    from policies.errors import PolicyError
    from policies.lp import solve_lp

    lp = pickle.loads(lp_file.read_bytes())
    start = time.perf_counter()
    try:
        result = solve_lp(lp, solver, "polish", precise=True)
    except PolicyError as err:
        return {"s": time.perf_counter() - start, "outcome": str(err)}
    seconds = time.perf_counter() - start
    return {"s": seconds, "outcome": "optimal", "objective": -result.value,
            "violation": max(float(np.max(lp.A @ result.x - lp.b)), 0.0),
            "columns": int(lp.c.size), "rows": int(lp.b.size)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs waiting (default %(default)s)")
    parser.add_argument("--partners", type=int, default=8,
                        help="pair partners per job (default %(default)s)")
    parser.add_argument("--timeout", type=float, default=600.0, help="per process (s)")
    parser.add_argument("--catch", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--solve", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.catch:
        print(json.dumps(catch(int(args.catch[0]), int(args.catch[1]), Path(args.catch[2]))))
        return 0
    if args.solve:
        print(json.dumps(solve(Path(args.solve[0]), args.solve[1])))
        return 0
    if args.jobs < 1 or args.partners < 0 or not args.timeout > 0:
        parser.error("--jobs: 1 or more; --partners: 0 or more; --timeout: seconds > 0")
    print(f"# {describe()}")
    with tempfile.TemporaryDirectory() as tmp:
        lp_file = Path(tmp) / "polish.pickle"
        wall, rss, out = fresh([sys.executable, __file__, "--catch", str(args.jobs),
                                str(args.partners), str(lp_file)], args.timeout)
        if out is None or not lp_file.exists():
            print(f"the plan failed or ran past {args.timeout:.0f} s ({wall:.0f} s)")
            return 1
        plan = json.loads(out)
        print(f"\n## {POLICY}: the polish of {args.jobs:,} waiting jobs, {plan['pairs']:,} "
              f"pairs ({args.partners} partners), 2,048 GPUs; the whole plan took "
              f"{plan['plan_s']:.1f} s, {rss:.0f} MiB\n")
        print("| solver | s | outcome | objective | worst row violation | peak RSS |")
        print("|---|---|---|---|---|---|")
        for solver in SOLVERS:
            wall, rss, out = fresh([sys.executable, __file__, "--solve", str(lp_file), solver],
                                   args.timeout)
            if out is None:
                print(f"| {solver} | killed after {wall:.0f} s | | | | {rss:.0f} MiB |", flush=True)
                continue
            row = json.loads(out)
            if row["outcome"] != "optimal":
                print(f"| {solver} | {row['s']:.1f} | {row['outcome']} | | | {rss:.0f} MiB |",
                      flush=True)
                continue
            print(f"| {solver} | {row['s']:.1f} | optimal ({row['columns']:,} columns, "
                  f"{row['rows']:,} rows) | {row['objective']:.12g} | {row['violation']:.1e} | "
                  f"{rss:.0f} MiB |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
