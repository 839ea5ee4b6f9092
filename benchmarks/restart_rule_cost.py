"""What the restart rule costs a round (issue #32; ``gavelsched/core/restarts.py``).

A scheduler core as the daemon runs it (``max_min_fairness_perf``, 60 s rounds) holds
``--jobs`` jobs of a §5.7.1 trace (``traces.generator``, 1- to 8-GPU jobs) with restart
costs drawn from Sia's five (25-250 s) on ``--gpus`` GPUs of the catalog's three types in
servers of 8. Each rule (``tenure`` and ``gavel``) runs in a fresh process: the first round
(the policy's solve included: what a scheduler pays once), then ``--rounds`` rounds, each
a ``RoundDriver`` plan and start (the last round ends, every task having held its workers
the whole round, and this one is planned).
A re-solve is forced half way, with runs going on. Reported per rule: the first round,
the median and p90 of the later rounds, the rule's own share (``Runs.holds`` and
``Runs.ended_round``, timed inside the same rounds), what re-arranging the allocation for
fewer moves costs at each of the two re-solves (``policies/moves.py``), the GPUs busy per
round, how many tasks kept their workers, and the process's peak RSS.

    python benchmarks/restart_rule_cost.py                 # BENCHMARKS.md (~1 min)
    python benchmarks/restart_rule_cost.py --jobs 200 --rounds 5   # smoke
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RESTARTS_S = (25.0, 50.0, 80.0, 120.0, 250.0)     # Sia's five applications (issue #32)
ROUND_S = 60.0


def child(rule: str, jobs: int, gpus: int, rounds: int, seed: int) -> dict:
    """One rule's rounds in this (fresh) process."""
    import numpy as np

    from gavelsched.core import SchedulerCore
    from gavelsched.core.driver import RoundDriver, config_for, spec_of
    from gavelsched.core.restarts import Runs
    from gavelsched.mechanism import ClusterView
    from policies import get_policy
    from traces.catalog import default_table
    from traces.generator import generate_trace

    rule_s = [0.0]

    def timed(method):
        def wrapper(*args, **kw):
            t = time.perf_counter()
            try:
                return method(*args, **kw)
            finally:
                rule_s[0] += time.perf_counter() - t
        return wrapper

    Runs.holds = timed(Runs.holds)
    Runs.ended_round = timed(Runs.ended_round)
    import gavelsched.core.solving as solving
    moves_s = []

    def fewer_moves(*args, _plain=solving.fewer_moves):
        t = time.perf_counter()
        try:
            return _plain(*args)
        finally:
            moves_s.append(time.perf_counter() - t)

    solving.fewer_moves = fewer_moves
    table = default_table()
    per_type = gpus // 3
    view = ClusterView.build({"v100": per_type, "p100": per_type, "k80": gpus - 2 * per_type}, 8)
    policy = get_policy("max_min_fairness_perf")
    config = config_for(policy, table, view.worker_types).but(
        round_seconds=ROUND_S, restart_rule=rule, resolve="gavel",
        min_resolve_interval_s=1e9)
    core = SchedulerCore(policy, view, table, config)
    rng = np.random.default_rng(seed)
    trace = generate_trace(jobs, 0.0, table=table, multi_gpu=True, seed=seed)
    from dataclasses import replace
    for i, job in enumerate(trace):
        core.submit(replace(spec_of(str(i), job), restart_s=float(rng.choice(RESTARTS_S))), 0.0)
    driver = RoundDriver(core)
    times, tasks, kept = [], [], []
    now, held = 0.0, None
    for k in range(rounds + 1):
        if k == rounds // 2:
            core.force_resolve()
        rule_s[0] = 0.0
        t = time.perf_counter()
        driver.plan(now, held)             # ends the last round, then plans this one
        batch = driver.start(now).round.batch
        held = np.full(len(batch), ROUND_S)  # every task held its workers the whole round
        times.append((time.perf_counter() - t, rule_s[0]))
        tasks.append(int(batch.size.sum()))
        kept.append(int(batch.extended.sum()))
        now += ROUND_S
    later = [t for t, _ in times[1:]]
    rule = [r for _, r in times[1:]]
    return {"first_s": times[0][0], "median_s": statistics.median(later),
            "p90_s": float(np.percentile(later, 90)), "rule_median_s": statistics.median(rule),
            "moves_s": moves_s,
            "tasks": statistics.median(tasks[1:]), "kept": statistics.median(kept[1:]),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--jobs", type=int, default=2048)
    p.add_argument("--gpus", type=int, default=2048)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--child", choices=("tenure", "gavel"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.jobs, args.gpus, args.rounds, args.seed)))
        return 0
    rows = {}
    for rule in ("gavel", "tenure"):
        out = subprocess.run([sys.executable, __file__, "--child", rule, "--jobs",
                              str(args.jobs), "--gpus", str(args.gpus), "--rounds",
                              str(args.rounds), "--seed", str(args.seed)],
                             capture_output=True, text=True, check=True)
        rows[rule] = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"# {args.jobs} jobs on {args.gpus} GPUs, {args.rounds} rounds of {ROUND_S:g} s; "
          f"{platform.processor() or platform.machine()}, Python {platform.python_version()}")
    print("| rule | first round (solve) s | later rounds: median / p90 ms | the rule's own, "
          "median ms | fewer moves at the two re-solves, ms | GPUs busy a round | "
          "kept their workers | peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|")
    for rule, r in rows.items():
        moves = " / ".join(f"{m * 1e3:.0f}" for m in r["moves_s"]) or "-"
        print(f"| {rule} | {r['first_s']:.2f} | {r['median_s'] * 1e3:.1f} / "
              f"{r['p90_s'] * 1e3:.1f} | {r['rule_median_s'] * 1e3:.2f} | {moves} | "
              f"{r['tasks']:.0f} | "
              f"{r['kept']:.0f} | {r['peak_rss_mb']:.0f} |")
    ratio = rows["tenure"]["median_s"] / rows["gavel"]["median_s"]
    print(f"\nlater rounds, tenure / gavel: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
