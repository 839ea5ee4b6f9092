"""Space-sharing policies at production size: every pair of jobs against each job's best
partners (``CoreConfig.pair_partners``; thesis §5.3.1: "in practice we only need to consider
combinations that actually perform well").

Two tables, each row a fresh process (its peak memory its own):

- **One plan** (``--plans``): N jobs of the thesis's generated traces (§5.7.1, 30% on
  several GPUs) waiting on 2,048 GPUs (683:683:682); the core's first plan under the
  policy: the pairs it listed, the plan's and the solve's seconds, peak RSS. Every pair is run up to ``--every-pair-up-to`` jobs,
  each within ``--timeout`` seconds.
- **Simulations** (``--simulations``): ``gavelsched simulate`` as a user runs it, jobs all
  arriving at once, with every pair and with 8 and 16 partners: wall time, peak RSS,
  average JCT.

Usage::

    python benchmarks/space_sharing.py                       # both tables
    python benchmarks/space_sharing.py --plans --sizes 2000,20000 --policy max_min_fairness_packed
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from host import describe
from policy_scale import first_plan, fresh

PARTNERS = (8, 16)       # partners per job, against every pair (0)
# (policy, jobs, cluster, with every pair too) of the simulations, each with PARTNERS (every
# pair of 1,000 jobs ran past 300 s)
SIMULATIONS = (("max_min_fairness_packed", 200, "8:8:8", True),
               ("finish_time_fairness_packed", 200, "8:8:8", True),
               ("gandiva", 200, "8:8:8", True),
               ("max_min_fairness_packed", 1000, "36:36:36", False),
               ("finish_time_fairness_packed", 1000, "36:36:36", False))


def plans(sizes: list[int], policy: str, every_up_to: int, timeout: float) -> None:
    print(f"\n## One plan of N waiting jobs on 2,048 GPUs under {policy}\n")
    print("| jobs | partners | pairs listed | plan s | of it the solve s | peak RSS |")
    print("|---|---|---|---|---|---|")
    for n in sizes:
        for partners in (0, *PARTNERS):
            label = "every pair" if partners == 0 else str(partners)
            if partners == 0 and n > every_up_to:
                print(f"| {n:,} | {label} | {n * (n - 1) // 2:,} candidates | not run "
                      f"(--every-pair-up-to {every_up_to:,}) | | |", flush=True)
                continue
            cmd = [sys.executable, __file__, "--plan-child", str(n), str(partners), policy]
            _, rss, out = fresh(cmd, timeout)
            if out is None:
                print(f"| {n:,} | {label} | | killed after {timeout:.0f} s | | {rss:,.0f} MiB "
                      f"by then |", flush=True)
                continue
            row = json.loads(out)
            print(f"| {n:,} | {label} | {row['pairs']:,} | {row['plan_s']:.2f} | "
                  f"{row['solve_s']:.2f} | {row['rss_mib']:.0f} MiB |", flush=True)


def simulations(timeout: float) -> None:
    print("\n## Simulations (`gavelsched simulate --jobs N --rate 100000`, all at once)\n")
    print("| policy | jobs | cluster | pairs | wall s | peak RSS | avg JCT h | JCT vs every pair |")
    print("|---|---|---|---|---|---|---|---|")
    for policy, n, cluster, with_every in SIMULATIONS:
        every = None
        for partners in (0, *PARTNERS) if with_every else PARTNERS:
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "run.json"
                cmd = [sys.executable, "-m", "gavelsched", "simulate", "--policy", policy,
                       "--jobs", str(n), "--rate", "100000", "--cluster", cluster,
                       "--pair-partners", str(partners), "--quiet", "--json", str(out)]
                wall, rss, text = fresh(cmd, timeout)
                jct = (json.loads(out.read_text())["avg_jct_s"] / 3600
                       if text is not None else None)
            label = "every" if partners == 0 else f"{partners} partners"
            if jct is None:
                print(f"| {policy} | {n:,} | {cluster} | {label} | killed after "
                      f"{timeout:.0f} s | {rss:,.0f} MiB by then | | |", flush=True)
                continue
            every = jct if partners == 0 else every
            vs = "" if partners == 0 or every is None else f"{100 * (jct / every - 1):+.2f}%"
            print(f"| {policy} | {n:,} | {cluster} | {label} | {wall:.1f} | {rss:.0f} MiB | "
                  f"{jct:.2f} | {vs} |", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plans", action="store_true", help="only the one-plan table")
    parser.add_argument("--simulations", action="store_true", help="only the simulations")
    parser.add_argument("--sizes", default="500,1000,2000,5000,20000",
                        help="jobs of the one-plan table (comma-separated)")
    parser.add_argument("--policy", default="max_min_fairness_packed",
                        help="policy of the one-plan table")
    parser.add_argument("--every-pair-up-to", type=int, default=2000, metavar="N",
                        help="list every pair only up to N jobs (5,000 took over 5 minutes "
                             "and 10 GB)")
    parser.add_argument("--timeout", type=float, default=300.0, help="per process (s)")
    parser.add_argument("--plan-child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plan_child:
        n, partners, policy = args.plan_child
        print(json.dumps(first_plan(int(n), int(partners), policy)))
        return 0
    print(f"# {describe()}")
    both = not (args.plans or args.simulations)
    if args.plans or both:
        plans([int(s) for s in args.sizes.split(",")], args.policy, args.every_pair_up_to,
              args.timeout)
    if args.simulations or both:
        simulations(args.timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
