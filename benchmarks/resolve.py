"""Responsive re-solving and refills against Gavel's rules, in the simulator (issue #18;
thesis §5.3, §5.7.4; ``gavelsched/core/resolving.py``, ``SchedulerCore.place_freed``).

``gavel``: a reset event re-solves the policy at most once every 1,920 s (Gavel's
``minimum_time_between_allocation_resets``), and a GPU freed mid-round stays idle until the
round ends; ``responsive``: re-solve at the next round boundary after any event while the
last solve took under a tenth of a round; ``responsive+refill`` (the daemon's defaults):
also give a GPU freed mid-round to a waiting job for the rest of the round.
Two traces on the thesis's 36:36:36 cluster, 360 s rounds:

- ``readme``: what ``gavelsched simulate`` runs with no flags (100 single-GPU jobs at 20
  jobs/hour, seed 0);
- ``multi-gpu``: a continuous multi-GPU trace (thesis §5.7.1, 30% of jobs on 2, 4 or 8
  GPUs), 1,500 jobs at 2.6 jobs/hour, as ``gavelsched trace generate --jobs 1500 --rate 2.6
  --multi-gpu --seed S``, averaged over ``--seeds``.

Average JCT is over every job (as ``gavelsched simulate`` reports it). Solves are the
policy's (``SimulationResult.resolves``); solve CPU s is the CPU time spent in
``policy.solve`` per simulation, and the longest solve its largest ``Allocation.solve_s``
(wall time: it depends on the load, printed in the header), against the 36 s (10% of a
round) under which ``responsive`` counts a solve as cheap. Means over the seeds. Prints a
markdown table. Usage::

    python benchmarks/resolve.py                      # the table of BENCHMARKS.md
    python benchmarks/resolve.py --policies max_min_fairness_perf --seeds 0   # a quick look
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from multiprocessing import Pool
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from headline import table  # noqa: E402  (markdown table)
from policy_solve import header  # noqa: E402  (the machine line)

CLUSTER = {"v100": 36, "p100": 36, "k80": 36}
# name: (jobs, jobs per hour, multi-GPU, label)
TRACES = {
    "readme": (100, 20.0, False, "README default: 100 single-GPU jobs, 20/h"),
    "multi-gpu": (1500, 2.6, True, "continuous multi-GPU: 1,500 jobs, 2.6/h"),
}
POLICIES = ("max_min_fairness_perf", "max_min_fairness", "finish_time_fairness_perf")
# mode: the core's fields (``responsive+refill``: the scheduler daemon's defaults, a GPU
# freed mid-round also going to a waiting job for the rest of the round, ``refill_freed``)
MODES = {"gavel": {"resolve": "gavel"}, "responsive": {"resolve": "responsive"},
         "responsive+refill": {"resolve": "responsive", "refill_freed": True}}


def run_one(task: tuple[str, str, str, int]) -> dict:
    """One simulation: (policy, trace, mode, seed) -> its figures."""
    from gavelsched.core.driver import config_for
    from simulator import make_policy, simulate
    from traces.catalog import default_table
    from traces.generator import generate_trace

    policy_name, trace, mode, seed = task
    jobs_n, rate, multi, _ = TRACES[trace]
    table_ = default_table()
    jobs = generate_trace(jobs_n, rate, table=table_, seed=seed, multi_gpu=multi)
    policy = make_policy(policy_name, seed=seed)
    config = config_for(policy, table_, tuple(CLUSTER), seed=seed, **MODES[mode])
    solve, cpu, longest = policy.solve, [0.0], [0.0]

    def timed_solve(problem):   # CPU time (wall time is noisy on a shared machine)
        start = time.process_time()
        try:
            allocation = solve(problem)
        finally:
            cpu[0] += time.process_time() - start
        longest[0] = max(longest[0], allocation.solve_s)
        return allocation

    policy.solve = timed_solve
    result = simulate(jobs, table_, CLUSTER, policy, core_config=config, seed=seed)
    return {"policy": policy_name, "trace": trace, "mode": mode, "seed": seed,
            "jct_h": result.avg_jct_s / 3600, "makespan_h": result.makespan_s / 3600,
            "solves": result.resolves, "solve_cpu_s": cpu[0], "longest_s": longest[0]}


def report(rows: list[dict], seeds: dict[str, list[int]]) -> str:
    out = []
    for trace in (t for t in TRACES if any(r["trace"] == t for r in rows)):
        for policy in dict.fromkeys(r["policy"] for r in rows):
            base = None
            for mode in MODES:
                got = [r for r in rows if (r["policy"], r["trace"], r["mode"]) ==
                       (policy, trace, mode)]
                if not got:
                    continue
                jct = statistics.mean(r["jct_h"] for r in got)
                base = jct if base is None else base
                out.append([f"`{policy}`", f"{TRACES[trace][3]} (seeds "
                            f"{','.join(map(str, seeds[trace]))})", mode, f"{jct:.2f}",
                            "" if mode == "gavel" else f"{jct / base - 1:+.1%}",
                            f"{statistics.mean(r['makespan_h'] for r in got):.1f}",
                            f"{statistics.mean(r['solves'] for r in got):.0f}",
                            f"{statistics.mean(r['solve_cpu_s'] for r in got):.2f}",
                            f"{max(r['longest_s'] for r in got):.3f}"])
    return table(["policy", "trace", "mode", "avg JCT h", "vs gavel", "makespan h",
                  "solves", "solve CPU s", "longest solve s"], out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policies", nargs="+", default=list(POLICIES))
    parser.add_argument("--traces", nargs="+", choices=sorted(TRACES), default=list(TRACES))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2],
                        help="seeds of the multi-GPU trace (the README's is seed 0)")
    parser.add_argument("--processes", type=int, default=None,
                        help="simulations in parallel (default: one per CPU)")
    args = parser.parse_args()
    seeds = {"readme": [0], "multi-gpu": args.seeds}
    tasks = [(p, t, m, s) for t in args.traces for p in args.policies
             for s in seeds[t] for m in MODES]
    print(header() + f"; {len(tasks)} simulations, cluster 36:36:36, round 360 s, "
          "JCT and makespan in hours; solves and solve CPU seconds per simulation")
    tasks.sort(key=lambda x: x[1] != "multi-gpu")           # the long ones first
    with Pool(args.processes) as pool:
        rows = pool.map(run_one, tasks, chunksize=1)
    print(report(rows, seeds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
