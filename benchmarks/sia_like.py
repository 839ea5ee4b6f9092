"""Restart-aware rounds on a Sia-like workload (issue #32): average JCT of the Sia mix
(``gavelsched trace generate --mix sia``: 160 jobs of five applications, Helios-like
arrivals, on Sia's 64 GPUs of T4, A100 and RTX 2080 Ti; ``traces/sia.py``) under the
restart rule (``tenure``, ``gavelsched/core/restarts.py``) and under Gavel's mechanism
(``gavel``), in one run:

- rigid jobs (fixed GPU count, the policy picks the type) under ``max_min_fairness_perf``,
  and elastic ones (``min_scale_factor: 1``: any count from 1 to the job's own that the
  scaling model covers, ``traces/scaling.py``) under ``max_min_fairness_mixed``;
- rounds of 60, 120 and 360 s;
- restarts free; at Sia's costs (the table's ``restart_s``: cifar10 50 s, deepspeech2
  25 s, bert 120 s, yolov3 80 s, imagenet 250 s); or at Sia's costs on each job's first
  start only (``SimConfig.first_start_only``: what start-ups alone cost, whatever the
  mechanism does);
- re-solves as the daemon makes them (``--resolve responsive``: after any arrival or
  completion) or as Gavel's simulator does (``--resolve gavel``: at most every 1,920 s).

Each cell is the mean over ``--seeds`` traces; the checks of the issue's targets follow.
A simulation stops at ``--horizon-h``: one that thrashes would take thousands of hours.

    python benchmarks/sia_like.py                   # BENCHMARKS.md (~2.5 min on 2 cores)
    python benchmarks/sia_like.py --resolve gavel   # BENCHMARKS.md (~1.5 min)
    python benchmarks/sia_like.py --seeds 1 --rounds 360   # smoke
"""

from __future__ import annotations

import argparse
import itertools
import platform
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

POLICIES = {"rigid": "max_min_fairness_perf", "elastic": "max_min_fairness_mixed"}
RULES = ("tenure", "gavel")
CHARGES = {"free": "free", "sia": "Sia", "first": "Sia, first start only"}


def one(jobs_kind: str, round_s: float, charge: str, rule: str, seed: int,
        horizon_h: float, resolve: str) -> tuple[float, int]:
    """(average JCT in hours, jobs unfinished) of one simulation, stopped at ``horizon_h``
    hours: a job still running then counts as finishing at the horizon, so a thrashing
    cell's figure is a lower bound."""
    from gavelsched.core.driver import config_for
    from gavelsched.mechanism import ClusterView
    from simulator.config import SimConfig, preemption_overheads
    from simulator.engine import make_policy, simulate
    from traces.sia import SIA_CLUSTER, SIA_GPUS_PER_SERVER, generate_sia_trace, sia_table

    table = sia_table()
    jobs = generate_sia_trace(seed=seed, elastic_fraction=1.0 if jobs_kind == "elastic" else 0.0)
    policy = make_policy(POLICIES[jobs_kind], seed=seed)
    types = ClusterView.build(SIA_CLUSTER, SIA_GPUS_PER_SERVER).worker_types
    config = config_for(policy, table, types, seed=seed).but(
        round_seconds=round_s, restart_rule=rule, resolve=resolve)
    overhead = preemption_overheads("0" if charge == "free" else "table",
                                    (j.job_type for j in jobs), table)
    horizon_s = horizon_h * 3600.0
    sim = SimConfig(preemption_overhead_s=overhead, horizon_s=horizon_s,
                    first_start_only=charge == "first")
    result = simulate(jobs, table, SIA_CLUSTER, policy, core_config=config, sim=sim,
                      gpus_per_server=SIA_GPUS_PER_SERVER, seed=seed)
    jcts = [j.jct_s if j.completion_s is not None else horizon_s - j.arrival_s
            for j in result.jobs]
    return statistics.mean(jcts) / 3600.0, len(jcts) - result.completed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--seeds", type=int, default=6, help="traces per cell (default 6)")
    p.add_argument("--rounds", default="60,120,360", help="round lengths, seconds")
    p.add_argument("--kinds", default="rigid,elastic", help="rigid, elastic or both")
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--resolve", choices=("responsive", "gavel"), default="responsive",
                   help="when a stale allocation is re-solved: 'responsive', at the next "
                        "round after an arrival or a completion (the daemon's default), "
                        "or 'gavel', at most every 1,920 s (the simulator's default)")
    p.add_argument("--horizon-h", type=float, default=200.0,
                   help="stop each simulation at this many hours (default 200); a cell "
                        "with jobs left then shows '>=' and how many")
    args = p.parse_args(argv)
    rounds = [float(r) for r in args.rounds.split(",")]
    kinds = [k for k in POLICIES if k in args.kinds.split(",")]
    cells = list(itertools.product(kinds, rounds, CHARGES, RULES))
    started = time.perf_counter()
    with ProcessPoolExecutor(args.processes) as pool:
        futures = {cell: [pool.submit(one, *cell, seed, args.horizon_h, args.resolve)
                          for seed in range(args.seeds)] for cell in cells}
        runs = {cell: [f.result() for f in fs] for cell, fs in futures.items()}
    jct = {cell: statistics.mean(h for h, _ in got) for cell, got in runs.items()}
    left = {cell: sum(n for _, n in got) for cell, got in runs.items()}

    def shown(cell) -> str:
        return (f"{jct[cell]:.2f}" if not left[cell] else
                f">= {jct[cell]:.2f} ({left[cell]} unfinished at {args.horizon_h:g} h)")

    print(f"# Sia-like mix, {args.seeds} traces of 160 jobs, 64 GPUs, {args.resolve} "
          f"re-solves; {platform.machine()}, Python {platform.python_version()}, "
          f"{time.perf_counter() - started:.0f} s")
    print("| jobs | round s | restarts | tenure: avg JCT h | gavel: avg JCT h |")
    print("|---|---|---|---|---|")
    for kind, R, charge in itertools.product(kinds, rounds, CHARGES):
        print(f"| {kind} | {R:g} | {CHARGES[charge]} | {shown((kind, R, charge, 'tenure'))} "
              f"| {shown((kind, R, charge, 'gavel'))} |")
    short = min(rounds)
    for kind in kinds:
        free = jct[kind, short, "free", "tenure"]
        ratio = jct[kind, short, "sia", "tenure"] / free
        floor = jct[kind, short, "first", "tenure"] / free
        best = min(jct[kind, R, "sia", "gavel"] for R in rounds)
        print(f"\n{kind}: restarts at {short:g} s rounds cost {ratio:.3f}x the free run "
              f"(target <= 1.25; first starts alone {floor:.3f}x); tenure "
              f"{jct[kind, short, 'sia', 'tenure']:.2f} h against Gavel's best round "
              f"length {best:.2f} h")
    if len(kinds) == 2:
        gain = 1 - jct["elastic", short, "sia", "tenure"] / jct["rigid", short, "sia", "tenure"]
        print(f"elastic below rigid at {short:g} s rounds with restarts: {gain:.0%} "
              f"(target >= 30%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
