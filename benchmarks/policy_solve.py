"""Policy solve times at scale (issue #2 targets), like the thesis's Figure 5.14.

n single-GPU jobs drawn uniformly from the default catalog's job types, n/4 GPUs of each of
3 types; times are end to end (``policy.solve``: problem matrices, cvxpy compilation and
solve), the median of ``--repeat`` runs. Jobs drawn from a catalog repeat each other, and
fairness policies merge identical jobs into one LP row; the "distinct" column perturbs
every throughput by a random ±10% (as measured throughputs would be) so that no two jobs
are alike and the full-size program is solved. The HiGHS column solves the distinct
problems with HiGHS instead of Clarabel, in the same run, so the ratio is free of machine
noise.

    python benchmarks/policy_solve.py            # full table (several minutes)
    python benchmarks/policy_solve.py --quick    # small sizes, a smoke test
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np

from policies import Job, Problem, get_policy
from policies.packing import select_pairs
from traces.catalog import default_table

TYPES = ("v100", "p100", "k80")

# (policy, jobs, target seconds, compare with HiGHS)
TARGETS = [
    ("max_min_fairness_perf", 2048, 0.2, True),
    ("max_min_fairness_perf", 16384, 3.0, True),
    ("finish_time_fairness_perf", 2048, 1.0, False),
    ("min_total_duration_perf", 2048, 1.0, True),
    ("max_min_fairness_water_filling_perf", 2048, 10.0, False),
    ("max_min_fairness_water_filling_perf (mixed)", 2048, None, False),  # beyond the issue
    ("max_min_fairness_packed", 512, 5.0, True),
    ("max_min_fairness_packed", 2048, 60.0, False),
]
QUICK = [("max_min_fairness_perf", 256, None, True),
         ("finish_time_fairness_perf", 256, None, False),
         ("max_min_fairness_water_filling_perf", 256, None, False),
         ("max_min_fairness_packed", 128, None, True)]


def make_problem(num_jobs: int, *, seed: int = 0, packed: bool = False, mixed: bool = False,
                 distinct: bool = False, max_partners: int = 8) -> Problem:
    """A Figure 5.14-style problem drawn from the default catalog. ``mixed`` makes water
    filling work harder: scale factors 1/2/4/8 at 70/10/15/5%, 20% of jobs at weight 5, and
    15% of (job, type) entries unable to run, so jobs saturate at many different levels."""
    table = default_table()
    rng = np.random.default_rng(seed)
    kinds = [table.job_types[k] for k in rng.integers(len(table.job_types), size=num_jobs)]
    jobs = []
    for i, kind in enumerate(kinds):
        throughputs = {t: table.get(t, kind, 1) for t in TYPES}
        minutes = 10 ** (rng.uniform(1.5, 3) if rng.random() < 0.8 else rng.uniform(3, 4))
        job = Job(str(i), throughputs, remaining_steps=minutes * 60 * throughputs["v100"],
                  elapsed_s=float(rng.uniform(0, 3600)))
        if mixed:
            sf = int(rng.choice([1, 2, 4, 8], p=[0.7, 0.1, 0.15, 0.05]))
            job = Job(job.id, {t: table.get(t, kind, sf) if rng.random() > 0.15 else 0.0
                               for t in TYPES}, scale_factor=sf,
                      weight=5.0 if rng.random() < 0.2 else 1.0,
                      remaining_steps=job.remaining_steps, elapsed_s=job.elapsed_s)
        if distinct:
            job = Job(job.id, {t: v * rng.uniform(0.9, 1.1) for t, v in job.throughputs.items()},
                      scale_factor=job.scale_factor, weight=job.weight,
                      remaining_steps=job.remaining_steps, elapsed_s=job.elapsed_s)
        jobs.append(job)
    pairs = ()
    if packed:
        def together(a, b):
            out = {t: table.pair(t, (a, 1), (b, 1)) for t in TYPES}
            return {t: v for t, v in out.items() if v}
        pairs = select_pairs(jobs, kinds, together, max_partners=max_partners)
    return Problem(cluster={t: num_jobs / 4 for t in TYPES}, jobs=jobs, pairs=pairs)


def timed(policy, problem, repeat: int) -> tuple[float, float]:
    """(median seconds, objective)."""
    times, objective = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        objective = policy.solve(problem).objective
        times.append(time.perf_counter() - start)
    return statistics.median(times), objective


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--repeat", type=int, default=3, help="runs per row (median)")
    parser.add_argument("--pop-jobs", type=int, default=100_000,
                        help="jobs in the POP row (0 skips it)")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {platform.processor() or platform.system()}, "
          f"python {platform.python_version()}")
    print(f"{'policy':44s} {'jobs':>6s} {'target':>7s} {'catalog s':>10s} {'distinct s':>10s} "
          f"{'ok':>3s} {'HiGHS s':>8s} {'HiGHS/ours':>10s}")
    for label, n, target, compare in (QUICK if args.quick else TARGETS):
        name = label.split()[0]
        shape = {"packed": get_policy(name).traits.needs_pairs, "mixed": "mixed" in label}
        catalog_s, _ = timed(get_policy(name), make_problem(n, **shape), args.repeat)
        distinct = make_problem(n, distinct=True, **shape)
        distinct_s, objective = timed(get_policy(name), distinct, args.repeat)
        worst = max(catalog_s, distinct_s)
        ok = "" if target is None else ("yes" if worst <= target else "NO")
        highs = ratio = ""
        if compare:
            h_seconds, h_objective = timed(get_policy(name, solver="HIGHS"), distinct, 1)
            assert abs(h_objective - objective) <= 1e-5 * abs(objective), (h_objective, objective)
            highs, ratio = f"{h_seconds:8.3f}", f"{h_seconds / distinct_s:9.1f}x"
        print(f"{label:44s} {n:6d} {target or '':>7} {catalog_s:10.3f} {distinct_s:10.3f} "
              f"{ok:>3s} {highs:>8s} {ratio:>10s}", flush=True)
    if not args.quick:
        partners_gap(256)
    if args.pop_jobs and not args.quick:
        pop(args.pop_jobs)


def partners_gap(n: int) -> None:
    """What capping pairs per job (``select_pairs``) costs the packed max-min objective."""
    print(f"\nmax_min_fairness_packed, {n} catalog jobs: pairs offered per job")
    print(f"{'partners':>9s} {'pairs':>7s} {'seconds':>8s} {'objective':>10s} {'gap vs all':>10s}")
    rows = []
    for k in (4, 8, 16, n):
        problem = make_problem(n, packed=True, max_partners=k)
        seconds, objective = timed(get_policy("max_min_fairness_packed"), problem, 1)
        rows.append((k, len(problem.pairs), seconds, objective))
    best = rows[-1][3]
    for k, pairs, seconds, objective in rows:
        label = "all" if k == n else str(k)
        print(f"{label:>9s} {pairs:7d} {seconds:8.2f} {objective:10.5f} "
              f"{100 * (best - objective) / best:9.2f}%", flush=True)


def pop(n: int) -> None:
    """POP at ``n`` distinct jobs: time and objective gap against the exact solve, one run."""
    problem = make_problem(n, distinct=True)
    print(f"\nPOP, max_min_fairness_perf, {n} jobs")
    exact_s, exact = timed(get_policy("max_min_fairness_perf"), problem, 1)
    print(f"exact solve: {exact_s:.2f} s, objective {exact:.5f}")
    print(f"{'partitions':>10s} {'processes':>9s} {'seconds':>9s} {'objective':>10s} "
          f"{'gap vs exact':>12s}")
    for k, processes in ((4, 1), (4, 2), (16, 2), (64, 2)):
        policy = get_policy("max_min_fairness_perf", partitions=k, processes=processes)
        seconds, objective = timed(policy, problem, 1)
        print(f"{k:10d} {processes:9d} {seconds:9.2f} {objective:10.5f} "
              f"{100 * (exact - objective) / exact:11.3f}%", flush=True)


if __name__ == "__main__":
    main()
