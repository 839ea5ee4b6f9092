"""Fidelity against Gavel's own simulator: average JCT and makespan, ours vs Gavel's.

For every (policy, case, seed) this generates a §5.7.1 trace (seeded), writes it in Gavel's
``.trace`` format together with a Gavel-format throughput JSON, runs Gavel's simulator on
it in a subprocess (``scheduler.Scheduler(simulate=True).simulate(...)`` of a Gavel
checkout, the call its ``scripts/drivers/simulate_scheduler_with_trace.py`` makes) and runs
ours in-process on the same trace, throughputs, cluster and round length, then prints::

    policy  case  seed  Gavel JCT  ours  diff%  Gavel makespan  ours  diff%  Gavel s  ours s

with each side's simulation wall time and our speed-up (each measured around the simulate
call alone, imports left out), and, per (policy, case), the mean over seeds. Issue #30's
speed row, the 1,500-job trace with nothing beside either side::

    python benchmarks/gavel_fidelity.py --gavel-dir DIR --cases continuous-1500 --seeds 0 \\
        --policies max_min_fairness_perf --jobs 1 --ours-runs 3

Ours runs in this process, or with ``--ours-runs N`` N times, each in a fresh process (a
first call, as a user pays it), right after Gavel's run: on a machine whose speed drifts
over minutes, Gavel's minute-long run averages the drift and one 2-s run of ours samples
it. The row then shows the median of ours' times and lists them all.

Both sides get the same seed, so the random choices of Gandiva and agnostic FIFO, which
draw from Gavel's generator, are the same. Both makespans are last completion - first
arrival.

Usage::

    python benchmarks/gavel_fidelity.py --gavel-dir /tmp/gavel_ref \\
        [--gavel-python /tmp/gavel_ref/venv/bin/python] [--policies fifo gandiva] \\
        [--cases static-single] [--seeds 0 1 2] [--throughputs gavel.json] [--jobs 6]

``--gavel-dir`` is a Gavel checkout (the folder holding ``scheduler/``); Gavel needs
cvxpy with ECOS (its default solver) in ``--gavel-python``. Without ``--gavel-dir`` the
script explains what it needs and exits with status 2. ``--throughputs`` defaults to our
catalog written in Gavel's JSON format (any Gavel JSON works, e.g. Gavel's own
``simulation_throughputs.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

POLICIES = ("max_min_fairness", "max_min_fairness_perf", "fifo", "finish_time_fairness_perf",
            "min_total_duration_perf", "gandiva")

# name: (jobs, rate per hour (0: static), multi-GPU, cluster V100:P100:K80)
CASES = {
    "static-single": (60, 0.0, False, "4:4:4"),
    "continuous-single": (200, 2.0, False, "8:8:8"),
    "static-multi": (60, 0.0, True, "8:8:8"),
    "continuous-multi": (160, 1.0, True, "12:12:12"),
    "continuous-36": (360, 6.0, False, "36:36:36"),
    # issue #30's speed case: the simulator benchmark's continuous-1500 (--jobs 1, one seed
    # and one policy, so that nothing else runs beside either simulation)
    "continuous-1500": (1500, 6.0, False, "36:36:36"),
}
DEFAULT_CASES = ("static-single", "continuous-single", "static-multi", "continuous-multi")
ROUND_SECONDS = 360

# Gavel's classes for the policy names its utils.get_policy may lack.
_GAVEL_CLASSES = {
    "min_total_duration_perf": ("min_total_duration", "MinTotalDurationPolicyWithPerf"),
    "max_min_fairness_perf": ("max_min_fairness", "MaxMinFairnessPolicyWithPerf"),
    "finish_time_fairness_perf": ("finish_time_fairness", "FinishTimeFairnessPolicyWithPerf"),
}


# ---- the Gavel side (runs in Gavel's interpreter; imports nothing of ours) ---------------
def gavel_child(args: argparse.Namespace) -> int:
    """Run Gavel's simulator on one trace and write per-job completion times as JSON."""
    import contextlib
    import logging

    sys.path.insert(0, os.path.join(args.gavel_dir, "scheduler"))
    import job as gavel_job
    import scheduler as gavel_scheduler
    import utils as gavel_utils

    jobs, arrivals = [], []
    with open(args.trace) as handle:
        for line in handle:
            (job_type, command, working_dir, num_steps_arg, needs_data_dir, total_steps,
             scale_factor, priority_weight, slo, arrival) = line.rstrip("\n").split("\t")
            jobs.append(gavel_job.Job(
                job_id=None, job_type=job_type, command=command,
                working_directory=working_dir, num_steps_arg=num_steps_arg,
                total_steps=int(total_steps), duration=None, scale_factor=int(scale_factor),
                priority_weight=float(priority_weight), SLO=float(slo),
                needs_data_dir=bool(int(needs_data_dir))))
            arrivals.append(float(arrival))
    try:
        policy = gavel_utils.get_policy(args.policy, solver="ECOS", seed=args.seed)
    except ValueError:
        module, cls = _GAVEL_CLASSES[args.policy]
        policy = getattr(__import__(f"policies.{module}", fromlist=[cls]), cls)(solver="ECOS")
    sched = gavel_scheduler.Scheduler(policy, simulate=True, throughputs_file=args.throughputs,
                                      seed=args.seed, time_per_iteration=args.round_seconds)
    logging.getLogger("scheduler").setLevel(logging.ERROR)
    v100, p100, k80 = (int(x) for x in args.cluster.split(":"))
    start = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):
        sched.simulate({"v100": v100, "p100": p100, "k80": k80}, arrivals, jobs,
                       num_gpus_per_server={"v100": 1, "p100": 1, "k80": 1})
    wall = time.perf_counter() - start
    jct = {int(j[0]): t for j, t in sched._job_completion_times.items()}
    out = {"jct": [jct.get(i) for i in range(len(jobs))], "arrival": arrivals,
           "end_s": sched._current_timestamp, "wall_s": wall}
    Path(args.out).write_text(json.dumps(out))
    return 0


# ---- our side --------------------------------------------------------------------------
def ours_fresh(runs: int, trace: Path, throughputs: Path, cluster: str, policy: str,
               seed: int) -> dict:
    """``ours`` in ``runs`` fresh processes, one after another: the first run's results,
    with the median wall time (every run's in ``walls_s``); the runs must agree."""
    outs = []
    for _ in range(runs):
        cmd = [sys.executable, __file__, "--ours-child", "--trace", str(trace),
               "--throughputs", str(throughputs), "--cluster", cluster, "--policy", policy,
               "--seed", str(seed)]
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"ours failed on {trace.name} / {policy}:\n{proc.stderr[-3000:]}")
        outs.append(json.loads(proc.stdout))
    if any(o["jct"] != outs[0]["jct"] for o in outs):
        raise RuntimeError(f"ours: the runs on {trace.name} / {policy} disagree")
    walls = [o["wall_s"] for o in outs]
    return {**outs[0], "wall_s": sorted(walls)[len(walls) // 2], "walls_s": walls}


def ours(trace: Path, throughputs: Path, cluster: str, policy: str, seed: int) -> dict:
    from simulator import simulate
    from traces.counts import parse_counts
    from traces.formats import load_trace
    from traces.throughputs import load_table

    table = load_table(throughputs)
    counts = parse_counts(cluster, what="--cluster")
    jobs = load_trace(trace, table=table, cluster=counts)
    start = time.perf_counter()
    result = simulate(jobs, table, counts, policy, seed=seed)
    return {"jct": [j.jct_s for j in result.jobs], "arrival": [j.arrival_s for j in result.jobs],
            "end_s": result.end_s, "wall_s": time.perf_counter() - start}


def summarise(run: dict) -> tuple[float, float]:
    """(average JCT, makespan = last completion - first arrival), both in seconds."""
    done = [(a, j) for a, j in zip(run["arrival"], run["jct"]) if j is not None]
    if len(done) != len(run["jct"]):
        raise RuntimeError(f"{len(run['jct']) - len(done)} jobs did not finish")
    avg = sum(j for _, j in done) / len(done)
    makespan = max(a + j for a, j in done) - min(run["arrival"])
    return avg, makespan


def make_inputs(workdir: Path, case: str, seed: int, throughputs: Path | None) -> tuple[Path, Path]:
    from traces.formats import write_trace
    from traces.generator import generate_trace
    from traces.throughputs import dump_table, load_table

    if throughputs is None:
        from traces.catalog import default_table
        throughputs = workdir / "throughputs.json"
        if not throughputs.exists():
            dump_table(default_table(), throughputs, fmt="gavel")
    table = load_table(throughputs)
    n, rate, multi, _ = CASES[case]
    trace = workdir / f"{case}-s{seed}.trace"
    write_trace(trace, generate_trace(n, rate, table=table, seed=seed, multi_gpu=multi))
    return trace, throughputs


def run_gavel(python: str, gavel_dir: Path, trace: Path, throughputs: Path, cluster: str,
              policy: str, seed: int, out: Path, timeout: float) -> dict:
    cmd = [python, __file__, "--gavel-child", "--gavel-dir", str(gavel_dir), "--trace",
           str(trace), "--throughputs", str(throughputs), "--cluster", cluster, "--policy",
           policy, "--seed", str(seed), "--round-seconds", str(ROUND_SECONDS), "--out", str(out)]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"Gavel failed on {trace.name} / {policy}:\n{proc.stderr[-3000:]}")
    return json.loads(out.read_text())


def _diff(gavel: float, mine: float) -> float:
    return 100.0 * (mine - gavel) / gavel


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gavel-dir", type=Path, help="Gavel checkout (holds scheduler/)")
    parser.add_argument("--gavel-python", default=None,
                        help="interpreter with Gavel's dependencies (default: GAVEL_DIR/venv/"
                             "bin/python if present, else this one)")
    parser.add_argument("--policies", nargs="+", default=list(POLICIES))
    parser.add_argument("--cases", nargs="+", default=list(DEFAULT_CASES), choices=sorted(CASES),
                        help="default: all but continuous-36 (the 36:36:36 cluster of the "
                             "thesis, slow in Gavel's simulator)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--throughputs", type=Path, help="Gavel-format throughput JSON")
    parser.add_argument("--jobs", type=int, default=2, help="Gavel runs in parallel")
    parser.add_argument("--timeout", type=float, default=3600.0, help="per Gavel run (s)")
    parser.add_argument("--workdir", type=Path, help="keep traces and Gavel outputs here")
    parser.add_argument("--json", type=Path, help="write all rows here")
    parser.add_argument("--ours-runs", type=int, default=0, metavar="N",
                        help="run ours N times, each in a fresh process, and show the median "
                             "time (default: once, in this process)")
    # child mode (Gavel's interpreter)
    parser.add_argument("--gavel-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--trace", help=argparse.SUPPRESS)
    parser.add_argument("--cluster", help=argparse.SUPPRESS)
    parser.add_argument("--policy", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--round-seconds", type=int, default=ROUND_SECONDS, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--ours-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.gavel_child:
        return gavel_child(args)
    if args.ours_runs < 0:
        parser.error(f"--ours-runs: a count of runs, 0 or more, not {args.ours_runs}")
    if args.ours_child:
        print(json.dumps(ours(Path(args.trace), Path(args.throughputs), args.cluster,
                              args.policy, args.seed)))
        return 0
    if args.gavel_dir is None or not (args.gavel_dir / "scheduler" / "scheduler.py").exists():
        print("gavel_fidelity: needs --gavel-dir, a checkout of stanford-futuredata/gavel (the "
              "folder holding scheduler/scheduler.py), and an interpreter with cvxpy + ECOS "
              "for it (--gavel-python); see this script's docstring.", file=sys.stderr)
        return 2
    python = args.gavel_python or (str(args.gavel_dir / "venv" / "bin" / "python")
                                   if (args.gavel_dir / "venv" / "bin" / "python").exists()
                                   else sys.executable)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="gavel_fidelity_"))
    workdir.mkdir(parents=True, exist_ok=True)
    tasks = []
    for case in args.cases:
        for seed in args.seeds:
            trace, throughputs = make_inputs(workdir, case, seed, args.throughputs)
            for policy in args.policies:
                tasks.append((policy, case, seed, trace, throughputs))

    def gavel_task(task):
        policy, case, seed, trace, throughputs = task
        out = workdir / f"gavel-{policy}-{case}-s{seed}.json"
        if out.exists():
            return json.loads(out.read_text())
        return run_gavel(python, args.gavel_dir, trace, throughputs, CASES[case][3], policy,
                         seed, out, args.timeout)

    from host import describe  # (a sibling: this file runs as a script)

    print(f"# {describe()}")
    print(f"# Gavel: {args.gavel_dir} ({python}); round {ROUND_SECONDS} s; workdir {workdir}")
    header = (f"{'policy':<26} {'case':<18} {'seed':>4} {'Gavel JCT h':>11} {'ours h':>8} "
              f"{'diff %':>7} {'Gavel mk h':>10} {'ours h':>8} {'diff %':>7} "
              f"{'Gavel s':>8} {'ours s':>7} {'speed-up':>8}")
    print(header)
    print("-" * len(header), flush=True)
    rows = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(gavel_task, t) for t in tasks]
        for task, future in zip(tasks, futures):
            policy, case, seed, trace, throughputs = task
            g = future.result()
            o = (ours_fresh(args.ours_runs, trace, throughputs, CASES[case][3], policy, seed)
                 if args.ours_runs > 0 else ours(trace, throughputs, CASES[case][3], policy, seed))
            (gj, gm), (oj, om) = summarise(g), summarise(o)
            rows.append({"policy": policy, "case": case, "seed": seed, "gavel_jct_s": gj,
                         "ours_jct_s": oj, "gavel_makespan_s": gm, "ours_makespan_s": om,
                         "gavel_wall_s": g["wall_s"], "ours_wall_s": o["wall_s"],
                         "ours_walls_s": o.get("walls_s", [o["wall_s"]])})
            print(f"{policy:<26} {case:<18} {seed:>4} {gj / 3600:>11.2f} {oj / 3600:>8.2f} "
                  f"{_diff(gj, oj):>+7.1f} {gm / 3600:>10.2f} {om / 3600:>8.2f} "
                  f"{_diff(gm, om):>+7.1f} {g['wall_s']:>8.2f} {o['wall_s']:>7.2f} "
                  f"{g['wall_s'] / o['wall_s']:>7.1f}x"
                  + (f"  (ours: {', '.join(f'{w:.2f}' for w in o['walls_s'])} s)"
                     if "walls_s" in o else ""), flush=True)
    print()
    print("mean over seeds")
    header = header[:header.index(" Gavel s")]     # (speed: per run, above)
    print(header.replace(" seed", "     "))
    print("-" * len(header))
    for policy in args.policies:
        for case in args.cases:
            sel = [r for r in rows if r["policy"] == policy and r["case"] == case]
            if not sel:
                continue
            mean = {k: sum(r[k] for r in sel) / len(sel)
                    for k in ("gavel_jct_s", "ours_jct_s", "gavel_makespan_s", "ours_makespan_s")}
            print(f"{policy:<26} {case:<18} {len(sel):>4} {mean['gavel_jct_s'] / 3600:>11.2f} "
                  f"{mean['ours_jct_s'] / 3600:>8.2f} "
                  f"{_diff(mean['gavel_jct_s'], mean['ours_jct_s']):>+7.1f} "
                  f"{mean['gavel_makespan_s'] / 3600:>10.2f} {mean['ours_makespan_s'] / 3600:>8.2f} "
                  f"{_diff(mean['gavel_makespan_s'], mean['ours_makespan_s']):>+7.1f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
