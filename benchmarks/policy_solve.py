"""Policy solve times at scale, cold and warm, with peak memory (issues #2 and #7).

Problems are built like the thesis's Figure 5.14, with *distinct* throughputs per job (as
measured throughputs are): n single-GPU jobs and n/4 GPUs of each of 3 types; a job's V100
throughput is drawn from U(1, 200) steps/s, its P100 one is V100 / U(1.1, 3) and its K80 one
V100 / U(3.3, 10). Variants (``make_problem``):

- ``mixed``: scale factors 1/2/4/8 at 70/10/15/5%, 20% of jobs at weight 5 and 15% of
  (job, type) entries unable to run, so water filling's jobs saturate at many levels;
- ``entities``: four entities of weights 1-4 with FIFO inside (hierarchical, §5.4.3);
- ``all pairs``: every pair of jobs listed in ``Problem.pairs``, each pair's co-located
  throughputs a U(0.35, 0.85) fraction of each job's own on every type;
- ``8 partners``: the pairs ``policies.packing.select_pairs`` offers (8 per job) of a
  catalog-drawn problem (pairs need a pair throughput table).

Every measurement runs in a fresh process (``--child``): *import* is the one-time cost of
``import policies`` (numpy, scipy.sparse; cvxpy only on first use, timed on its own as
*cvxpy* for the policies that build a cvxpy program); *cold* is the first solve in the
process (``Allocation.solve_s``: matrices, any compilation, the solve, the allocation), as
``gavelsched solve`` or a restarted scheduler pays it; *warm* is the re-solve of a problem
of the same shape with new numbers in the same process. Peak RSS is the process's. The
*CLI* rows time ``gavelsched solve problem.json`` end to end (fresh interpreter, imports,
JSON parse, solve, output). ``--solvers`` runs the comparison of solvers and backends.

    python benchmarks/policy_solve.py                 # targets, CLI rows, solver table
    python benchmarks/policy_solve.py --quick         # small sizes, a smoke test
    python benchmarks/policy_solve.py --imports       # import policies, gavelsched solve
    python benchmarks/policy_solve.py --prune         # water filling, pruned LPs or not
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import numpy as np

TYPES = ("v100", "p100", "k80")


@dataclass(frozen=True)
class Case:
    """One row: a policy, a problem size and variant, options, and its target."""

    policy: str
    jobs: int
    variant: str = "plain"
    target_s: float | None = None
    target_rss_mib: float | None = None
    options: tuple[tuple[str, object], ...] = ()

    @property
    def label(self) -> str:
        opts = ", ".join(f"{k}={v}" for k, v in self.options)
        extra = "" if self.variant == "plain" else f" ({self.variant})"
        return f"{self.policy}{extra}" + (f" [{opts}]" if opts else "")


TARGETS = [
    Case("max_min_fairness_perf", 2048, target_s=0.2),
    Case("max_min_fairness_perf", 16384, target_s=3.0, target_rss_mib=2048),
    Case("finish_time_fairness_perf", 2048, target_s=1.0),
    Case("min_total_duration_perf", 2048, target_s=1.0),
    Case("max_min_fairness_water_filling_perf", 2048, target_s=10.0),
    Case("max_min_fairness_water_filling_perf", 2048, "mixed", target_s=10.0),
    Case("max_min_fairness_water_filling_perf", 2048, "entities", target_s=10.0),
    Case("max_min_fairness_packed", 512, "all pairs", target_s=5.0),
    Case("max_min_fairness_packed", 2048, "8 partners", target_s=60.0),
    Case("max_min_fairness_water_filling_perf", 512, "entities"),  # where the 2048 one is
]
QUICK = [
    Case("max_min_fairness_perf", 256),
    Case("finish_time_fairness_perf", 256),
    Case("max_min_fairness_water_filling_perf", 256, "entities"),
    Case("max_min_fairness_packed", 64, "all pairs"),
]
# The solver comparison: each case with (backend, solver) pairs, cold and warm in a fresh
# process each. Finish-time fairness (a cone program) and makespan have a direct path with
# Clarabel only.
COMPARED = [
    (Case("max_min_fairness_perf", 2048), (
        ("direct", "CLARABEL"), ("direct", "HIGHS"), ("direct", "HIGHS_IPM"),
        ("cvxpy", "CLARABEL"), ("cvxpy", "HIGHS"))),
    (Case("max_min_fairness_perf", 16384), (("direct", "CLARABEL"), ("direct", "HIGHS_IPM"))),
    (Case("max_min_fairness_packed", 512, "all pairs"), (
        ("direct", "HIGHS"), ("direct", "HIGHS_IPM"), ("direct", "CLARABEL"))),
    (Case("max_min_fairness_water_filling_perf", 2048, "mixed"), (
        ("direct", "CLARABEL"), ("direct", "HIGHS_IPM"), ("cvxpy", "CLARABEL"))),
    (Case("finish_time_fairness_perf", 2048), (
        ("direct", "CLARABEL"), ("cvxpy", "CLARABEL"), ("cvxpy", "ECOS"))),
    (Case("min_total_duration_perf", 2048), (
        ("direct", "CLARABEL"), ("cvxpy", "CLARABEL"), ("cvxpy", "HIGHS"))),
]
# Water filling with and without its pruned LPs (``prune=False``: every column in every LP,
# the method before), each in a fresh process. FIFO entities at 2,048 jobs without pruning
# do not finish within TIMEOUT_S (BENCHMARKS.md): that run only with --prune-all.
PRUNE = [
    Case("max_min_fairness_water_filling_perf", 256, "entities"),
    Case("max_min_fairness_water_filling_perf", 512, "entities"),
    Case("max_min_fairness_water_filling_perf", 1024, "entities"),
    Case("max_min_fairness_water_filling_perf", 2048, "mixed"),
    Case("max_min_fairness_water_filling_perf", 2048),
]
PRUNE_ALL = [Case("max_min_fairness_water_filling_perf", 2048, "entities")]
# cvxpy's DPP compilation of the 16,384-job program peaks near 19 GB: only on request.
COMPARED_BIG = [(Case("max_min_fairness_perf", 16384), (("cvxpy", "CLARABEL"),))]
# The policies with a direct path (``backend=``), and its solvers.
HAS_DIRECT = {"max_min_fairness_perf": ("CLARABEL", "HIGHS", "HIGHS_IPM"),
              "max_min_fairness_packed": ("CLARABEL", "HIGHS", "HIGHS_IPM"),
              "max_min_fairness_water_filling_perf": ("CLARABEL", "HIGHS", "HIGHS_IPM"),
              "finish_time_fairness_perf": ("CLARABEL",),
              "min_total_duration_perf": ("CLARABEL",)}


def uses_cvxpy(case: Case) -> bool:
    """Whether ``case`` solves through cvxpy (which its child then imports on its own)."""
    options = dict(case.options)
    return (options.get("backend") == "cvxpy"
            or options.get("solver", "CLARABEL") not in HAS_DIRECT.get(case.policy, ()))


def make_problem(num_jobs: int, variant: str = "plain", *, seed: int = 0):
    """A Figure 5.14-style problem with distinct throughputs (module docstring)."""
    from policies import Entity, Job, Pair, Problem

    if variant == "8 partners":
        return _catalog_packed(num_jobs, seed)
    rng = np.random.default_rng(seed)
    v100 = rng.uniform(1, 200, num_jobs)
    speeds = np.column_stack([v100, v100 / rng.uniform(1.1, 3, num_jobs),
                              v100 / rng.uniform(3.3, 10, num_jobs)])
    minutes = 10 ** rng.uniform(1.5, 3.5, num_jobs)
    elapsed = rng.uniform(0, 3600, num_jobs)
    sf = np.ones(num_jobs, dtype=int)
    weight = np.ones(num_jobs)
    entity = [None] * num_jobs
    entities = {}
    if variant == "mixed":
        sf = rng.choice([1, 2, 4, 8], p=[0.7, 0.1, 0.15, 0.05], size=num_jobs)
        weight = np.where(rng.random(num_jobs) < 0.2, 5.0, 1.0)
        speeds = np.where(rng.random(speeds.shape) < 0.15, 0.0, speeds)
        speeds[speeds.max(axis=1) == 0, 0] = v100[speeds.max(axis=1) == 0]
    elif variant == "entities":
        entities = {f"e{k}": Entity(f"e{k}", weight=float(k + 1), policy="fifo")
                    for k in range(4)}
        entity = [f"e{k}" for k in rng.integers(4, size=num_jobs)]
    jobs = [Job(str(i), dict(zip(TYPES, speeds[i].tolist())), scale_factor=int(sf[i]),
                weight=float(weight[i]), remaining_steps=float(minutes[i] * 60 * v100[i]),
                elapsed_s=float(elapsed[i]), entity=entity[i]) for i in range(num_jobs)]
    pairs = []
    if variant == "all pairs":
        a, b = np.triu_indices(num_jobs, 1)
        fraction = rng.uniform(0.35, 0.85, (a.size, len(TYPES), 2))
        together = np.stack([speeds[a] * fraction[..., 0], speeds[b] * fraction[..., 1]], -1)
        pairs = [Pair((str(x), str(y)), dict(zip(TYPES, map(tuple, together[k].tolist()))))
                 for k, (x, y) in enumerate(zip(a.tolist(), b.tolist()))]
    return Problem(cluster={t: num_jobs / 4 for t in TYPES}, jobs=jobs, pairs=pairs,
                   entities=entities)


def _catalog_packed(num_jobs: int, seed: int, *, max_partners: int = 8, distinct: bool = True):
    """Catalog job types (they have pair throughputs), each throughput perturbed by ±10%
    when ``distinct``, with the pairs ``select_pairs`` offers (``max_partners`` per job)."""
    from policies import Job, Problem
    from policies.packing import select_pairs
    from traces.catalog import default_table

    table = default_table()
    rng = np.random.default_rng(seed)
    kinds = [table.job_types[k] for k in rng.integers(len(table.job_types), size=num_jobs)]
    jobs = []
    for i, kind in enumerate(kinds):
        speeds = {t: table.get(t, kind, 1) * (rng.uniform(0.9, 1.1) if distinct else 1.0)
                  for t in TYPES}
        jobs.append(Job(str(i), speeds, remaining_steps=600 * speeds["v100"]))

    def together(a, b):
        out = {t: table.pair(t, (a, 1), (b, 1)) for t in TYPES}
        return {t: v for t, v in out.items() if v}

    pairs = select_pairs(jobs, kinds, together, max_partners=max_partners)
    return Problem(cluster={t: num_jobs / 4 for t in TYPES}, jobs=jobs, pairs=pairs)


def child(case: Case) -> dict:
    """Cold and warm solves of ``case`` in this (fresh) process."""
    start = time.perf_counter()
    from policies import get_policy
    imported = time.perf_counter() - start
    cvxpy_s = None
    if uses_cvxpy(case):
        start = time.perf_counter()  # cvxpy is imported on first use: time it on its own
        import cvxpy  # noqa: F401
        cvxpy_s = time.perf_counter() - start
    policy = get_policy(case.policy, **dict(case.options))
    cold = policy.solve(make_problem(case.jobs, case.variant, seed=0))
    warm = policy.solve(make_problem(case.jobs, case.variant, seed=1))
    return {"import_s": imported, "cvxpy_s": cvxpy_s, "cold_s": cold.solve_s,
            "warm_s": warm.solve_s, "objective": cold.objective, "solver": cold.solver,
            "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


TIMEOUT_S = 600  # a measurement that takes longer is reported as such
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fresh(case: Case) -> dict:
    spec = json.dumps([case.policy, case.jobs, case.variant, list(case.options)])
    try:
        out = subprocess.run([sys.executable, __file__, "--child", spec], check=False,
                             capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"error": f"not done after {TIMEOUT_S} s"}
    if out.returncode:
        return {"error": out.stderr.strip().splitlines()[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def cli(case: Case, env: dict | None = None) -> dict:
    """``gavelsched solve`` on the case's cold problem, end to end in a fresh process."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "problem.json")
        with open(path, "w") as f:
            json.dump(make_problem(case.jobs, case.variant, seed=0).to_dict(), f)
        size = os.path.getsize(path)
        cmd = [sys.executable, "-m", "gavelsched", "solve", path, "--policy", case.policy]
        start = time.perf_counter()
        try:
            out = subprocess.run(cmd, check=False, capture_output=True, text=True,
                                 timeout=TIMEOUT_S, env=env, cwd=tmp if env else None)
        except subprocess.TimeoutExpired:
            return {"error": f"not done after {TIMEOUT_S} s"}
        wall = time.perf_counter() - start
        if out.returncode:
            return {"error": out.stderr.strip().splitlines()[-1]}
        return {"wall_s": wall, "solve_s": json.loads(out.stdout)["solve_s"],
                "json_mib": size / 2**20}


def header() -> str:
    lscpu = subprocess.run(["lscpu"], check=False, capture_output=True, text=True).stdout
    model = next((line.split(":", 1)[1].strip() for line in lscpu.splitlines()
                  if line.startswith("Model name")), platform.processor())
    return (f"# {model}, {os.cpu_count()} CPUs, python {platform.python_version()}, "
            f"load average {os.getloadavg()[0]:.2f} at start")


def targets(cases: list[Case]) -> None:
    print(f"\n{'case':58s} {'jobs':>6s} {'target':>7s} {'cold s':>7s} {'warm s':>7s} {'ok':>3s} "
          f"{'RSS MiB':>8s} {'solver':>9s} {'import s':>8s} {'cvxpy s':>7s} {'objective':>10s}")
    for case in cases:
        r = fresh(case)
        if "error" in r:
            print(f"{case.label:58s} {case.jobs:6d} FAILED: {r['error']}", flush=True)
            continue
        ok = ""
        if case.target_s is not None:
            ok = "yes" if r["cold_s"] <= case.target_s and (
                case.target_rss_mib is None or r["rss_mib"] <= case.target_rss_mib) else "NO"
        target = "" if case.target_s is None else f"{case.target_s:g}"
        print(f"{case.label:58s} {case.jobs:6d} {target:>7s} {r['cold_s']:7.3f} "
              f"{r['warm_s']:7.3f} {ok:>3s} {r['rss_mib']:8.0f} {r['solver']:>9s} "
              f"{r['import_s']:8.2f} {_seconds(r['cvxpy_s']):>7s} {r['objective']:10.6g}",
              flush=True)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


IMPORT_PROBE = """
import json, sys, time
start = time.perf_counter()
import policies
print(json.dumps({"s": time.perf_counter() - start, "cvxpy": "cvxpy" in sys.modules,
                  "scipy_optimize": "scipy.optimize" in sys.modules}))
"""


def imports(root: str, repeat: int = 5) -> None:
    """The one-time costs a ``gavelsched solve`` on the direct path pays, each in a fresh
    interpreter with the source tree ``root`` first on the path (``--root`` measures
    another checkout, e.g. one from before cvxpy was imported lazily): ``import policies``
    (median of ``repeat``), and the CLI end to end on 2,048 jobs."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [root, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    runs = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", IMPORT_PROBE], check=True, env=env,
                             capture_output=True, text=True, cwd=tempfile.gettempdir())
        runs.append(json.loads(out.stdout))
    runs.sort(key=lambda r: r["s"])
    median = runs[len(runs) // 2]
    print(f"\n{'one-time cost (fresh interpreter), source ' + root:58s} {'median s':>9s} "
          f"{'min s':>6s} {'cvxpy loaded':>12s} {'scipy.optimize':>14s}")
    print(f"{'import policies':58s} {median['s']:9.3f} {runs[0]['s']:6.3f} "
          f"{median['cvxpy']!s:>12s} {median['scipy_optimize']!s:>14s}", flush=True)
    case = Case("max_min_fairness_perf", 2048)
    walls = [cli(case, env) for _ in range(repeat)]
    walls = sorted(walls, key=lambda r: r.get("wall_s", float("inf")))
    r = walls[len(walls) // 2]
    if "error" in r:
        print(f"{'gavelsched solve, max_min_fairness_perf, 2,048 jobs':58s} FAILED: {r['error']}")
        return
    print(f"{'gavelsched solve, max_min_fairness_perf, 2,048 jobs (wall)':58s} "
          f"{r['wall_s']:9.3f} {walls[0]['wall_s']:6.3f}   (solve_s inside {r['solve_s']:.3f})",
          flush=True)


def cli_rows(cases: list[Case]) -> None:
    print(f"\n{'gavelsched solve problem.json --policy ...':58s} {'jobs':>6s} {'JSON MiB':>8s} "
          f"{'wall s':>7s} {'solve_s':>7s}")
    for case in cases:
        r = cli(case)
        if "error" in r:
            print(f"{case.label:58s} {case.jobs:6d} FAILED: {r['error']}", flush=True)
            continue
        print(f"{case.label:58s} {case.jobs:6d} {r['json_mib']:8.1f} {r['wall_s']:7.2f} "
              f"{r['solve_s']:7.3f}", flush=True)


def solvers(big: bool = False) -> None:
    print(f"\n{'solver comparison (fresh process each)':58s} {'jobs':>6s} {'backend':>8s} "
          f"{'solver':>9s} {'cold s':>7s} {'warm s':>7s} {'RSS MiB':>8s} {'objective':>12s}")
    for case, runs in COMPARED + (COMPARED_BIG if big else []):
        for backend, solver in runs:
            options = (("solver", solver),)
            if backend == "cvxpy" and case.policy in HAS_DIRECT:
                options += (("backend", "cvxpy"),)
            r = fresh(Case(case.policy, case.jobs, case.variant, options=options))
            if "error" in r:
                print(f"{case.label:58s} {case.jobs:6d} {backend:>8s} {solver:>9s} "
                      f"FAILED: {r['error'][:60]}", flush=True)
                continue
            print(f"{case.label:58s} {case.jobs:6d} {backend:>8s} {solver:>9s} "
                  f"{r['cold_s']:7.3f} {r['warm_s']:7.3f} {r['rss_mib']:8.0f} "
                  f"{r['objective']:12.8g}", flush=True)


def prune_rows(cases: list[Case]) -> None:
    """Each case with ``prune`` true (default) and false, a fresh process each."""
    print(f"\n{'water filling: pruned LPs or every column':58s} {'jobs':>6s} {'prune':>6s} "
          f"{'cold s':>7s} {'warm s':>7s} {'RSS MiB':>8s} {'objective':>12s}")
    for case in cases:
        for prune in (True, False):
            options = () if prune else (("prune", False),)
            r = fresh(Case(case.policy, case.jobs, case.variant, options=options))
            label = f"{case.label:58s} {case.jobs:6d} {str(prune).lower():>6s}"
            if "error" in r:
                print(f"{label} FAILED: {r['error'][:60]}", flush=True)
                continue
            print(f"{label} {r['cold_s']:7.3f} {r['warm_s']:7.3f} {r['rss_mib']:8.0f} "
                  f"{r['objective']:12.6g}", flush=True)


def partners_gap(n: int) -> None:
    """What capping pairs per job (``select_pairs``) costs the packed max-min objective, on
    catalog jobs (one process, warm)."""
    from policies import get_policy

    print(f"\nmax_min_fairness_packed, {n} catalog jobs: pairs offered per job")
    print(f"{'partners':>9s} {'pairs':>7s} {'seconds':>8s} {'objective':>10s} {'gap vs all':>10s}")
    rows = []
    for k in (4, 8, 16, n):
        problem = _catalog_packed(n, 0, max_partners=k)
        allocation = get_policy("max_min_fairness_packed").solve(problem)
        rows.append((k, len(problem.pairs), allocation.solve_s, allocation.objective))
    best = rows[-1][3]
    for k, pairs, seconds, objective in rows:
        label = "all" if k == n else str(k)
        print(f"{label:>9s} {pairs:7d} {seconds:8.2f} {objective:10.5f} "
              f"{100 * (best - objective) / best:9.2f}%", flush=True)


def pop(n: int) -> None:
    """POP at ``n`` distinct jobs: time and objective gap against the exact solve."""
    from policies import get_policy

    problem = make_problem(n)
    print(f"\nPOP, max_min_fairness_perf, {n} jobs (one process)")
    exact = get_policy("max_min_fairness_perf").solve(problem)
    print(f"exact solve: {exact.solve_s:.2f} s, objective {exact.objective:.5f}")
    print(f"{'partitions':>10s} {'processes':>9s} {'seconds':>9s} {'objective':>10s} "
          f"{'gap vs exact':>12s}")
    for k, processes in ((4, 1), (4, 2), (16, 2), (64, 2)):
        policy = get_policy("max_min_fairness_perf", partitions=k, processes=processes)
        got = policy.solve(problem)
        print(f"{k:10d} {processes:9d} {got.solve_s:9.2f} {got.objective:10.5f} "
              f"{100 * (exact.objective - got.objective) / exact.objective:11.3f}%",
              flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--no-cli", action="store_true", help="skip the CLI rows")
    parser.add_argument("--cli-only", action="store_true", help="only the CLI rows")
    parser.add_argument("--solvers", action="store_true", help="only the solver comparison")
    parser.add_argument("--with-19gb-row", action="store_true",
                        help="with --solvers: also cvxpy at 16,384 jobs (needs ~19 GB)")
    parser.add_argument("--case", type=int, action="append", metavar="I",
                        help="only the I-th target row (0-based; repeatable)")
    parser.add_argument("--partners", type=int, metavar="N",
                        help="only the cost of capping partners per job, at N catalog jobs")
    parser.add_argument("--pop", type=int, metavar="N", help="only POP at N distinct jobs")
    parser.add_argument("--prune", action="store_true",
                        help="only water filling with and without its pruned LPs")
    parser.add_argument("--prune-all", action="store_true",
                        help="with --prune: also 2,048 FIFO-entity jobs unpruned (> 600 s)")
    parser.add_argument("--imports", action="store_true",
                        help="only the one-time costs: import policies, gavelsched solve")
    parser.add_argument("--root", default=ROOT, metavar="DIR",
                        help="with --imports: the source tree to measure (default: this one)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        policy, jobs, variant, options = json.loads(args.child)
        print(json.dumps(child(Case(policy, jobs, variant,
                                    options=tuple(map(tuple, options))))))
        return 0
    print(header())
    if args.partners:
        partners_gap(args.partners)
        return 0
    if args.pop:
        pop(args.pop)
        return 0
    if args.solvers:
        solvers(args.with_19gb_row)
        return 0
    if args.prune:
        prune_rows(PRUNE + (PRUNE_ALL if args.prune_all else []))
        return 0
    if args.imports:
        imports(os.path.abspath(args.root))
        return 0
    cases = QUICK if args.quick else TARGETS
    if args.case:
        cases = [cases[i] for i in args.case]
    if not args.cli_only:
        targets(cases)
    if not args.no_cli:
        cli_rows(cases if args.quick else [c for c in cases if c.jobs <= 2048])
    return 0


if __name__ == "__main__":
    sys.exit(main())
