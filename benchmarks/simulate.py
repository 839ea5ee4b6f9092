"""Simulator speed: generated §5.7.1 traces on the 36:36:36 cluster of the thesis.

Each case runs in a fresh process (so peak memory is its own) and prints one row: wall
and CPU time, the CPU time spent in the policy (``policy.solve``) and the rest (core +
planner + executor), rounds, re-solves, the average JCT and peak RSS. With ``--repeat N``
each case runs N times and the row shows the fastest run (timings on a shared machine are
noisy; the header gives the load average when the benchmark started). Usage::

    python benchmarks/simulate.py            # all cases
    python benchmarks/simulate.py --case continuous-1500 --repeat 3
    python benchmarks/simulate.py --profile continuous-1500-random   # where the time goes
    python benchmarks/simulate.py --stages continuous-1500    # the same, per stage, no profiler
    python benchmarks/simulate.py --stages continuous-1500 --instructions   # stages, counted
    git worktree add /tmp/before COMMIT   # an older tree, run by this file, side by side:
    python benchmarks/simulate.py --before /tmp/before --repeat 3
    python benchmarks/simulate.py --before /tmp/before --case continuous-1500 --instructions
    python benchmarks/simulate.py --before /tmp/before --cli --instructions   # the README's

With ``--before DIR`` every case also runs on the tree in DIR (its packages first on
``PYTHONPATH``), alternating run by run with this tree, and a last column gives this
tree's fastest wall time over the older tree's.

``--growth 1500,24000,100000`` runs the ``continuous-1500`` shape (36:36:36,
``max_min_fairness_perf``, 6 jobs/h, seed 0) at each size, each in a fresh process (what a
user pays): wall seconds of the simulation, its cost per job and per round, re-solves and
the process's peak RSS (and CPU seconds, steadier than wall time on a shared machine); the
imports a fresh process pays once are a row of their own.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

CASES = {
    # name: (jobs, rate per hour, policy, multi-GPU, window)
    "continuous-1500": (1500, 6.0, "max_min_fairness_perf", False, None),
    # the same trace shape on a random table of 26 job types that share nothing with the
    # catalog (``random_table``): nothing can lean on the catalog's repeated numbers
    "continuous-1500-random": (1500, 6.0, "max_min_fairness_perf", False, None),
    "continuous-1500-las": (1500, 6.0, "max_min_fairness", False, None),
    "paper-5200-window": (5200, 5.0, "max_min_fairness_perf", False, (4000, 5000)),
    "multi-gpu-1500": (1500, 2.6, "max_min_fairness_perf", True, None),
    # finish-time fairness, a cone program (its direct path: policies/finish_time.py)
    "continuous-1500-ftf": (1500, 6.0, "finish_time_fairness_perf", False, None),
    # makespan: the exact LP, then Gavel's ECOS point (policies/makespan.py)
    "continuous-1500-makespan": (1500, 6.0, "min_total_duration_perf", False, None),
    # the weighted-sum LPs (policies/throughput.py: sum_data), with and without pairs
    "continuous-1500-max-sum": (1500, 6.0, "max_sum_throughput_perf", False, None),
    "continuous-300-fifo-packed": (300, 6.0, "fifo_packed", False, None),
    # every pair of active jobs is in each problem (core/lookups.py: PairRecords)
    "continuous-1500-gandiva": (1500, 6.0, "gandiva", False, None),
}
CLUSTER = {"v100": 36, "p100": 36, "k80": 36}
REPO = Path(__file__).resolve().parents[1]


RANDOM_TABLE_SEED = 7


def random_table(seed: int = RANDOM_TABLE_SEED, job_types: int = 26):
    """A throughput table like Figure 5.14's inputs but of made-up job types ``rand-00`` ..:
    V100 steps/s ~ U(1, 200), P100 = V100 / U(1.1, 3), K80 = V100 / U(3.3, 10); on 2, 4, 8
    workers a job runs sf * U(0.6, 0.95) times its 1-worker speed on each type."""
    from traces.types import ThroughputTable

    rng = np.random.default_rng(seed)
    solo: dict[str, dict] = {"v100": {}, "p100": {}, "k80": {}}
    for k in range(job_types):
        v100 = rng.uniform(1, 200)
        one = {"v100": v100, "p100": v100 / rng.uniform(1.1, 3), "k80": v100 / rng.uniform(3.3, 10)}
        for sf in (1, 2, 4, 8):
            for worker, speed in one.items():
                scale = 1.0 if sf == 1 else sf * rng.uniform(0.6, 0.95)
                solo[worker][(f"rand-{k:02d}", sf)] = float(speed * scale)
    return ThroughputTable(solo)


def run_growth(jobs_n: int, rate: float) -> dict:
    """One simulation of ``jobs_n`` jobs of the ``continuous-1500`` shape (``--growth``)."""
    start = time.perf_counter()
    from simulator import SimConfig, make_policy, simulate
    from traces.catalog import default_table
    from traces.generator import generate_trace
    imports = time.perf_counter() - start
    table = default_table()
    jobs = generate_trace(jobs_n, rate, table=table, seed=0)
    wall, cpu = time.perf_counter(), time.process_time()
    result = simulate(jobs, table, CLUSTER, make_policy("max_min_fairness_perf"),
                      sim=SimConfig())
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"jobs": jobs_n, "rate": rate, "imports_s": imports, "wall_s": wall, "cpu_s": cpu,
            "rounds": result.rounds, "resolves": result.resolves,
            "avg_jct_h": (result.avg_jct_s or 0.0) / 3600,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def growth(sizes: list[int], rate: float) -> int:
    """``--growth``: one fresh process per size, one row each."""
    from host import describe  # (a sibling: this file runs as a script)

    print(f"# {describe()}, cluster 36:36:36, max_min_fairness_perf, {rate:g} jobs/h, "
          f"one fresh process per size")
    print(f"{'jobs':>8} {'wall s':>8} {'cpu s':>8} {'ms/job':>7} {'us/round':>9} {'rounds':>8} "
          f"{'solves':>7} {'JCT h':>7} {'RSS MiB':>8}")
    imports = []
    for n in sizes:
        out = subprocess.run([sys.executable, __file__, "--growth-child", str(n),
                              "--rate", str(rate)], capture_output=True, text=True, check=True,
                             env=child_env(REPO))
        r = json.loads(out.stdout.strip().splitlines()[-1])
        imports.append(r["imports_s"])
        print(f"{n:>8} {r['wall_s']:>8.2f} {r['cpu_s']:>8.2f} {1e3 * r['wall_s'] / n:>7.2f} "
              f"{1e6 * r['wall_s'] / max(r['rounds'], 1):>9.0f} {r['rounds']:>8} "
              f"{r['resolves']:>7} {r['avg_jct_h']:>7.2f} {r['peak_rss_mib']:>8.0f}",
              flush=True)
    print(f"{'imports':>8} {min(imports):>8.2f}   (once per process, not in the rows above)")
    return 0


def run_case(name: str) -> dict:
    from simulator import SimConfig, make_policy, simulate
    from traces.catalog import default_table
    from traces.generator import generate_trace

    jobs_n, rate, policy_name, multi, window = CASES[name]
    table = random_table() if name.endswith("-random") else default_table()
    jobs = generate_trace(jobs_n, rate, table=table, seed=0, multi_gpu=multi)
    policy = make_policy(policy_name)
    solver_cpu = [0.0]
    solve = policy.solve

    def timed_solve(problem):  # the policy's CPU time (wall time: noisy on shared machines)
        start = time.process_time()
        try:
            return solve(problem)
        finally:
            solver_cpu[0] += time.process_time() - start

    policy.solve = timed_solve
    wall, cpu = time.perf_counter(), time.process_time()
    result = simulate(jobs, table, CLUSTER, policy, sim=SimConfig(window=window))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "case": name, "jobs": jobs_n, "rate": rate, "policy": policy_name,
        "window": f"{window[0]}:{window[1]}" if window else "all",
        "wall_s": wall, "cpu_s": cpu, "solver_cpu_s": solver_cpu[0],
        "rest_cpu_s": cpu - solver_cpu[0], "rounds": result.rounds,
        "resolves": result.resolves,
        "avg_jct_h": (result.avg_jct_s or 0.0) / 3600,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


# Where a simulation's time goes: (label, path fragment of the functions whose cumulative
# time the row shows). Rows overlap (the policy includes the solver).
PROFILE_ROWS = [
    ("policy.solve (all of the policy)", "policies/base.py", "solve"),
    ("  column model (build_columns)", "policies/columns.py", "build_columns"),
    ("  cvxpy: compile + solve (Problem.solve)", "cvxpy/problems/problem.py", "solve"),
    ("  direct LP path (policies/lp.py solve_lp)", "policies/lp.py", "solve_lp"),
    ("  Clarabel's own solve", "~", "<method 'solve' of 'builtins.DefaultSolver' objects>"),
    ("core: start_round (planner, problem building)", "gavelsched/core/core.py", "start_round"),
    ("core: end_round", "gavelsched/core/core.py", "end_round"),
]


def profile(name: str) -> None:
    """Run ``name`` in this process under cProfile; print the rows of ``PROFILE_ROWS`` and the
    functions with the most time of their own."""
    import cProfile
    import io
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    run_case(name)
    profiler.disable()
    stats = pstats.Stats(profiler)
    total = max(v[3] for v in stats.stats.values())
    print(f"# {name} under cProfile (times inflated by profiling): {total:.2f} s in all")
    for label, path, func in PROFILE_ROWS:
        cum = sum(v[3] for (file, _, f), v in stats.stats.items()
                  if f == func and file.endswith(path) or (path == "~" and f == func))
        print(f"{label:50s} {cum:7.2f} s  {100 * cum / total:5.1f}%")
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(12)
    print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[-1500:])


# Where a simulation's time goes without a profiler's inflation (``--stages``): (label,
# module, attribute holding the callable, its name) of each stage timed; indented rows are
# parts of the row above them.
STAGES = [
    ("re-solve begun (begin_resolve)", "gavelsched.core.core", "SchedulerCore",
     "begin_resolve"),
    ("  its problem (build_problem)", "gavelsched.core.core", None, "build_problem"),
    ("  closing the period", "gavelsched.core.periods", None, "close_period"),
    ("re-solve run (_resolve_now)", "gavelsched.core.core", "SchedulerCore", "_resolve_now"),
    ("  the policy (policy.solve)", "policies.base", "Policy", "solve"),
    ("  installing X (install)", "gavelsched.core.core", None, "install"),
    ("the planner (plan_round)", "gavelsched.core.core", None, "plan_round"),
    ("its inputs (_demand)", "gavelsched.core.core", "SchedulerCore", "_demand"),
    ("the round's tasks (build_batch)", "gavelsched.core.core", None, "build_batch"),
    ("admissions (_admit)", "gavelsched.core.core", "SchedulerCore", "_admit"),
    ("the engine's round (execute)", "simulator.engine", "_Run", "execute"),
    ("  crediting steps (credit)", "gavelsched.core.driver", "RoundDriver", "credit"),
    ("ending the round (end_round)", "gavelsched.core.core", "SchedulerCore", "end_round"),
]


# The stages of ``STAGES`` that change nothing but their result (called twice, the run is
# the same, and the second call's instructions are the stage's own), each called once a
# re-solve or once a round.
PURE_STAGES = {"  the policy (policy.solve)": "resolves", "  its problem (build_problem)":
               "resolves", "the planner (plan_round)": "rounds",
               "its inputs (_demand)": "rounds", "the round's tasks (build_batch)": "rounds"}


def _stage(label: str):
    """(the object holding stage ``label`` of ``STAGES``, its attribute name)."""
    import importlib

    _, module, owner, attr = next(stage for stage in STAGES if stage[0] == label)
    holder = importlib.import_module(module)
    return (getattr(holder, owner) if owner else holder), attr


def stages(name: str, run: Callable[[], dict] | None = None) -> dict:
    """Run ``name`` once with each of ``STAGES`` timed by ``perf_counter`` around its calls
    (about half a microsecond a call added, not cProfile's several per Python call): wall
    seconds, share of the simulation, calls and microseconds a round. ``run``: what to run
    instead of the case (a callable returning ``run_case``'s keys; ``sim_budget.py``)."""
    spent: dict[str, float] = {}
    calls: dict[str, int] = {}
    undo = []
    for label, *_ in STAGES:
        holder, attr = _stage(label)
        inner = getattr(holder, attr)
        spent[label], calls[label] = 0.0, 0

        def timed(*args, _inner=inner, _label=label, **kwargs):
            start = time.perf_counter()
            try:
                return _inner(*args, **kwargs)
            finally:
                spent[_label] += time.perf_counter() - start
                calls[_label] += 1

        setattr(holder, attr, timed)
        undo.append((holder, attr, inner))
    try:
        row = run() if run is not None else run_case(name)
    finally:
        for holder, attr, inner in undo:
            setattr(holder, attr, inner)
    wall, rounds = row["wall_s"], max(row["rounds"], 1)
    print(f"# {name}: {wall:.2f} s wall, {rounds} rounds, {row['resolves']} re-solves, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'stage':<34} {'s':>6} {'share':>6} {'calls':>7} {'us/round':>9}")
    for label, _, _, _ in STAGES:
        print(f"{label:<34} {spent[label]:>6.3f} {100 * spent[label] / wall:>5.1f}% "
              f"{calls[label]:>7} {1e6 * spent[label] / rounds:>9.1f}")
    return row


def call_twice(label: str) -> None:
    """Make stage ``label`` (one of ``PURE_STAGES``) do its work twice a call."""
    holder, attr = _stage(label)
    inner = getattr(holder, attr)

    def twice(*args, **kwargs):
        inner(*args, **kwargs)
        return inner(*args, **kwargs)

    setattr(holder, attr, twice)


def _callgrind(valgrind: str, child: list[str], tree: Path, cwd: str) -> tuple[int, str]:
    """The instructions a fresh ``python child...`` ran under callgrind with ``tree`` on
    its path (``PYTHONHASHSEED=0``), and its standard output."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        env = child_env(tree, PYTHONHASHSEED="0")
        run = subprocess.run([valgrind, "--tool=callgrind", f"--callgrind-out-file={out}",
                              sys.executable, *child], capture_output=True, text=True,
                             check=True, env=env, cwd=cwd)
        total = next(int(line.split()[1]) for line in out.read_text().splitlines()
                     if line.startswith("totals:"))
    return total, run.stdout


def child_env(tree: Path, **extra: str) -> dict[str, str]:
    """The environment of a fresh process on ``tree`` (its packages first on the path)
    that reads their bytecode from cache, as a user's installed package does: a shell with
    ``PYTHONDONTWRITEBYTECODE`` set makes every process compile every module it imports, a
    cost a user pays once (``--instructions`` reports it on a row of its own)."""
    env = {**os.environ, "PYTHONPATH": str(tree), **extra}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def packages(tree: Path) -> list[str]:
    """The packages ``pip install`` puts in place from ``tree``: its folders with an
    ``__init__.py``, but its tests."""
    return sorted(str(d) for d in tree.iterdir()
                  if (d / "__init__.py").is_file() and d.name != "tests")


# Which round loops a tree runs: its compiled ones (``gavelsched/mechanism/loops.py``), their
# Python twins (built without a C compiler, or GAVELSCHED_PURE_PYTHON=1), or a tree before them.
LOOPS_CHILD = ("try:\n    from gavelsched.mechanism.loops import compiled\n"
               "except ImportError:\n    print('Python round loops: a tree before the compiled ones')\n"
               "else:\n    print('compiled round loops' if compiled else "
               "'Python round loops: not compiled, or GAVELSCHED_PURE_PYTHON=1')\n")


def round_loops(tree: Path) -> str:
    """Which round loops ``tree`` runs (``LOOPS_CHILD``), from a fresh process on it."""
    out = subprocess.run([sys.executable, "-c", LOOPS_CHILD], capture_output=True, text=True,
                         check=True, env=child_env(tree), cwd=tempfile.gettempdir())
    return out.stdout.strip()


def compile_tree(tree: Path) -> None:
    """Cache the bytecode of ``tree``'s packages (what ``pip install`` does)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", *packages(tree)], check=True,
                   env=child_env(tree))


def build_loops(tree: Path) -> float | None:
    """CPU seconds (children's) of building ``tree``'s compiled loops (its ``setup.py``'s
    extension, what ``pip install`` compiles) into a scratch folder; None without one."""
    if not (tree / "setup.py").is_file():
        return None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--force",
                        "--build-lib", out, "--build-temp", out], cwd=tree, check=True,
                       capture_output=True, env=child_env(tree))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def _valgrind() -> str | None:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("simulate.py: --instructions needs valgrind (apt install valgrind)",
              file=sys.stderr)
    return valgrind


def stage_instructions(name: str) -> int:
    """``--stages CASE --instructions``: each of ``PURE_STAGES``'s instructions in a run of
    ``name``, as a run with that stage called twice less a plain run (one fresh process
    under callgrind each); share of the plain run, per call and per round. Work a stage
    caches on its inputs (a ``Problem``'s cached properties) counts only once: a floor."""
    valgrind = _valgrind()
    if valgrind is None:
        return 2
    child = [__file__, "--child", name]
    with tempfile.TemporaryDirectory() as away:
        plain, out = _callgrind(valgrind, child, REPO, away)
        row = json.loads(out.strip().splitlines()[-1])
        print(f"# {name}: {plain / 1e9:.3f} G instructions, {row['rounds']} rounds, "
              f"{row['resolves']} re-solves (callgrind, a stage: twice less once)")
        print(f"{'stage':<34} {'G':>6} {'share':>6} {'k a call':>9} {'k a round':>10}")
        for label, per in PURE_STAGES.items():
            twice, _ = _callgrind(valgrind, child + ["--twice", label], REPO, away)
            extra = twice - plain
            print(f"{label:<34} {extra / 1e9:>6.3f} {100 * extra / plain:>5.1f}% "
                  f"{extra / max(row[per], 1) / 1e3:>9.0f} "
                  f"{extra / max(row['rounds'], 1) / 1e3:>10.0f}", flush=True)
    return 0


def instructions(names: list[str], trees: dict[str, Path]) -> int:
    """``--instructions``: each case on each tree in a fresh process under valgrind's
    callgrind (``PYTHONHASHSEED=0``): the instructions the whole process ran (imports
    included, their bytecode cached: ``child_env``) and their change against ``--before``;
    first, per tree, what compiling its packages costs once. The case ``cli`` (``--cli
    --instructions``) is the README's ``gavelsched simulate`` on the defaults. A machine's
    load moves wall and CPU times by more than a few percent; it does not move these."""
    valgrind = _valgrind()
    if valgrind is None:
        return 2
    print(f"# instructions under callgrind, {platform.python_implementation()} "
          f"{platform.python_version()}, one run per case and tree, bytecode cached")
    for label, tree in trees.items():    # the one-time cost the rows below do not pay
        n, _ = _callgrind(valgrind, ["-m", "compileall", "-q", "-f", *packages(tree)], tree,
                          str(tree))
        print(f"{label + 'compiling the packages':<28} {n / 1e9:8.3f} G instructions "
              f"(once, at install: not in the rows below)", flush=True)
        cpu = build_loops(tree)
        if cpu is not None:
            print(f"{label + 'building the C loops':<28} {cpu:8.1f} CPU s (Cython and the C "
                  f"compiler, once, at install; their instructions are not counted)", flush=True)
    for name in names:
        got = {}
        for label, tree in trees.items():
            with tempfile.TemporaryDirectory() as tmp:
                child = (["-c", CLI_CHILD] if name == "cli"    # (run from ``tmp``: see
                         else [__file__, "--child", name])     # ``cli_runs``)
                got[label], _ = _callgrind(valgrind, child, tree, tmp)
        for label, n in got.items():
            change = (f"  {100 * (n / got['before '] - 1):+.1f}% against before"
                      if label == "after " else "")
            print(f"{label + name:<28} {n / 1e9:8.3f} G instructions{change}", flush=True)
    return 0


# A fresh process running the README's first command, reporting its own peak RSS (KiB).
CLI_CHILD = ("import atexit, resource, sys\n"
             "atexit.register(lambda: print('RSS', resource.getrusage(resource.RUSAGE_SELF)"
             ".ru_maxrss, file=sys.stderr))\n"
             "from gavelsched.cli import main\nsys.exit(main(['simulate']))\n")


def cli_runs(args, trees: dict[str, Path]) -> int:
    """``gavelsched simulate`` in a fresh interpreter, per tree, alternating: wall seconds
    (interpreter start and imports included: the one-time cost a user pays every run) and
    peak RSS."""
    got: dict[str, list[tuple[float, float]]] = {label: [] for label in trees}
    # Run from an empty folder: ``python -c`` puts its working directory first on the path,
    # and from a tree's root that tree's packages would shadow PYTHONPATH's (every row then
    # measured this tree).
    away = tempfile.mkdtemp(prefix="gavel-cli-")
    for _ in range(max(1, args.repeat)):
        for label, tree in trees.items():
            env = child_env(tree)
            start = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", CLI_CHILD], capture_output=True,
                                 text=True, check=True, env=env, cwd=away)
            wall = time.perf_counter() - start
            rss = next(float(line.split()[1]) for line in out.stderr.splitlines()
                       if line.startswith("RSS "))
            got[label].append((wall, rss / 1024))
    print(f"# fresh `gavelsched simulate` on the defaults, load average "
          f"{os.getloadavg()[0]:.2f}, {max(1, args.repeat)} runs per tree")
    for label, runs in got.items():
        walls = sorted(w for w, _ in runs)
        print(f"{label or 'this tree '}wall s {walls[0]:.2f}-{walls[-1]:.2f}  peak RSS "
              f"{max(r for _, r in runs):.0f} MiB")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", choices=sorted(CASES), action="append",
                        help="run only these cases (repeatable)")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="run each case N times; report the fastest")
    parser.add_argument("--profile", choices=sorted(CASES), metavar="CASE",
                        help="run CASE once under cProfile and print where the time went")
    parser.add_argument("--stages", choices=sorted(CASES), metavar="CASE",
                        help="run CASE once with the round's stages timed (no profiler): "
                             "seconds, share and microseconds a round of each")
    parser.add_argument("--before", metavar="DIR",
                        help="also run every case on the tree in DIR (e.g. a git worktree of "
                             "an older commit), alternating with this one, and compare")
    parser.add_argument("--cli", action="store_true",
                        help="time what a user runs: a fresh `gavelsched simulate` on the "
                             "defaults (wall s and peak RSS, per tree with --before)")
    parser.add_argument("--growth", metavar="N,N,...",
                        help="run the continuous-1500 shape at these job counts, each in a "
                             "fresh process: wall s, per job, per round, re-solves, peak RSS")
    parser.add_argument("--rate", type=float, default=6.0, metavar="JOBS_PER_H",
                        help="arrival rate of --growth's traces (default 6, as continuous-1500)")
    parser.add_argument("--instructions", action="store_true",
                        help="count each case's instructions under valgrind (per tree with "
                             "--before; with --cli, of the README's command; with --stages, "
                             "of each stage that can run twice): a comparison the machine's "
                             "load does not move")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--twice", choices=list(PURE_STAGES), help=argparse.SUPPRESS)
    parser.add_argument("--growth-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.twice:
            call_twice(args.twice)
        print(json.dumps(run_case(args.child)))
        return 0
    if args.growth_child:
        print(json.dumps(run_growth(args.growth_child, args.rate)))
        return 0
    trees = {"": REPO} if not args.before else {"before ": Path(args.before).resolve(),
                                                   "after ": REPO}
    for label, tree in trees.items():  # each fresh process below reads its bytecode from cache
        compile_tree(tree)
        print(f"# {label.strip() or 'this tree'}: {tree} ({round_loops(tree)})")
    if args.growth:
        try:
            sizes = [int(x) for x in args.growth.split(",")]
        except ValueError:
            parser.error(f"--growth: expected job counts joined by commas, got {args.growth!r}")
        if not sizes or min(sizes) < 1:
            parser.error(f"--growth: job counts must be >= 1, got {args.growth!r}")
        return growth(sizes, args.rate)
    if args.profile:
        profile(args.profile)
        return 0
    if args.stages:
        if args.instructions:
            return stage_instructions(args.stages)
        stages(args.stages)
        return 0
    if args.cli:
        return instructions(["cli"], trees) if args.instructions else cli_runs(args, trees)
    names = args.case or list(CASES)
    if args.instructions:
        return instructions(names, trees)
    from host import describe

    print(f"# {describe()}, cluster 36:36:36, round 360 s, best of {max(1, args.repeat)}")
    header = (f"{'case':<20} {'policy':<22} {'jobs':>5} {'rate':>5} {'window':>10} "
              f"{'wall s':>7} {'cpu s':>6} {'solver cpu':>10} {'rest cpu':>8} {'rounds':>7} "
              f"{'solves':>6} {'JCT h':>7} {'RSS MiB':>8}")
    print(header)
    print("-" * len(header))
    for name in names:
        runs: dict[str, list[dict]] = {label: [] for label in trees}
        for _ in range(max(1, args.repeat)):
            for label, tree in trees.items():       # alternate: same load for both trees
                env = child_env(tree)
                out = subprocess.run([sys.executable, __file__, "--child", name],
                                     capture_output=True, text=True, check=True, env=env)
                runs[label].append(json.loads(out.stdout.strip().splitlines()[-1]))
        best = {label: min(got, key=lambda x: x["wall_s"]) for label, got in runs.items()}
        for label, r in best.items():
            ratio = (f"  x{r['wall_s'] / best['before ']['wall_s']:.2f} of before"
                     if label == "after " else "")
            print(f"{label + r['case']:<20} {r['policy']:<22} {r['jobs']:>5} {r['rate']:>5g} "
                  f"{r['window']:>10} {r['wall_s']:>7.2f} {r['cpu_s']:>6.2f} "
                  f"{r['solver_cpu_s']:>10.2f} {r['rest_cpu_s']:>8.2f} {r['rounds']:>7} "
                  f"{r['resolves']:>6} {r['avg_jct_h']:>7.2f} {r['peak_rss_mib']:>8.0f}"
                  f"{ratio}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
