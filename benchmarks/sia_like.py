"""Restart-aware rounds on a Sia-like workload (issue #32): average JCT of the Sia mix
(``gavelsched trace generate --mix sia``: 160 jobs of five applications, Helios-like
arrivals, on Sia's 64 GPUs of T4, A100 and RTX 2080 Ti; ``traces/sia.py``) under the
restart rule (``tenure``, ``gavelsched/core/restarts.py``) and under Gavel's mechanism
(``gavel``), in one run:

- rigid jobs (fixed GPU count, the policy picks the type) under ``max_min_fairness_perf``,
  and elastic ones (``min_scale_factor: 1``: any count from 1 to the job's own that the
  scaling model covers, ``core/scaling.py``) under ``max_min_fairness_mixed``;
- rounds of 60, 120 and 360 s;
- restarts free, or at Sia's costs (the table's ``restart_s``: cifar10 50 s, deepspeech2
  25 s, bert 120 s, yolov3 80 s, imagenet 250 s).

Each cell is the mean over ``--seeds`` traces; the checks of the issue's targets follow.

    python benchmarks/sia_like.py                  # BENCHMARKS.md (~10 min on 2 cores)
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


def one(jobs_kind: str, round_s: float, restarts: bool, rule: str, seed: int) -> float:
    """Average JCT (hours) of one simulation."""
    from gavelsched.core.driver import config_for
    from gavelsched.mechanism import ClusterView
    from simulator.config import SimConfig, preemption_overheads
    from simulator.engine import make_policy, simulate
    from traces.sia import SIA_CLUSTER, SIA_GPUS_PER_SERVER, generate_sia_trace, sia_table

    table = sia_table()
    jobs = generate_sia_trace(seed=seed, elastic_fraction=1.0 if jobs_kind == "elastic" else 0.0)
    policy = make_policy(POLICIES[jobs_kind], seed=seed)
    types = ClusterView.build(SIA_CLUSTER, SIA_GPUS_PER_SERVER).worker_types
    config = config_for(policy, table, types, seed=seed).but(round_seconds=round_s,
                                                             restart_rule=rule)
    overhead = preemption_overheads("table" if restarts else "0",
                                    (j.job_type for j in jobs), table)
    result = simulate(jobs, table, SIA_CLUSTER, policy, core_config=config,
                      sim=SimConfig(preemption_overhead_s=overhead),
                      gpus_per_server=SIA_GPUS_PER_SERVER, seed=seed)
    return result.avg_jct_s / 3600.0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--seeds", type=int, default=3, help="traces per cell (default 3)")
    p.add_argument("--rounds", default="60,120,360", help="round lengths, seconds")
    p.add_argument("--kinds", default="rigid,elastic", help="rigid, elastic or both")
    p.add_argument("--processes", type=int, default=2)
    args = p.parse_args(argv)
    rounds = [float(r) for r in args.rounds.split(",")]
    kinds = [k for k in POLICIES if k in args.kinds.split(",")]
    cells = list(itertools.product(kinds, rounds, (False, True), RULES))
    started = time.perf_counter()
    with ProcessPoolExecutor(args.processes) as pool:
        futures = {cell: [pool.submit(one, *cell, seed) for seed in range(args.seeds)]
                   for cell in cells}
        jct = {cell: statistics.mean(f.result() for f in fs) for cell, fs in futures.items()}
    print(f"# Sia-like mix, {args.seeds} traces of 160 jobs, 64 GPUs; "
          f"{platform.machine()}, Python {platform.python_version()}, "
          f"{time.perf_counter() - started:.0f} s")
    print("| jobs | round s | restarts | tenure: avg JCT h | gavel: avg JCT h |")
    print("|---|---|---|---|---|")
    for kind, R, restarts in itertools.product(kinds, rounds, (False, True)):
        print(f"| {kind} | {R:g} | {'Sia' if restarts else 'free'} | "
              f"{jct[kind, R, restarts, 'tenure']:.2f} | {jct[kind, R, restarts, 'gavel']:.2f} |")
    short = min(rounds)
    for kind in kinds:
        ratio = jct[kind, short, True, "tenure"] / jct[kind, short, False, "tenure"]
        best = min(jct[kind, R, True, "gavel"] for R in rounds)
        print(f"\n{kind}: restarts at {short:g} s rounds cost {ratio:.2f}x the free run "
              f"(target <= 1.25); tenure {jct[kind, short, True, 'tenure']:.2f} h against "
              f"Gavel's best round length {best:.2f} h")
    if len(kinds) == 2:
        gain = 1 - jct["elastic", short, True, "tenure"] / jct["rigid", short, True, "tenure"]
        print(f"elastic below rigid at {short:g} s rounds with restarts: {gain:.0%} "
              f"(target >= 30%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
