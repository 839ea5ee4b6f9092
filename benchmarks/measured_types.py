"""What a heterogeneity-aware policy does with measured GPU types beside the catalog's
(issue #31: a second measured type's row, simulated with the first beside the catalog's).

A cluster of the catalog's types (``--catalog``, thesis §5.7.1's V100, P100 and K80) plus
``--count`` GPUs of each measured type (``--measured``: rows that ``gavelsched profile``
wrote under ``traces/data/measured``, e.g. the H200's) replays generated traces (§5.7.1,
``--jobs`` at ``--rate`` jobs/h, one per seed) under Gavel's heterogeneity-aware LAS
(``max_min_fairness_perf``, §5.4.1) and the heterogeneity-agnostic one
(``max_min_fairness``), with each job type's GPU-hours on each worker type recorded
(``SimConfig.record_type_use``). Prints, as markdown:

1. average JCT, makespan and utilisation per policy (means over the seeds), and the aware
   policy's average JCT over the agnostic one's;
2. per model (a job type's batch sizes together): how much faster the measured types are
   than the catalog's V100 for it, and the share of its GPU-hours on each type under each
   policy (summed over the seeds).

The same run is ``gavelsched simulate --cluster ... --type-use`` once per policy and seed.

    python benchmarks/measured_types.py                       # BENCHMARKS.md (~10 s)
    python benchmarks/measured_types.py --measured h200,h100  # with a second measured row
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

AWARE, AGNOSTIC = "max_min_fairness_perf", "max_min_fairness"


def model(job_type: str) -> str:
    """A job type's model: its name without the batch size."""
    return job_type.split(" (batch size")[0]


def speedups(table, measured: list[str], base: str = "v100") -> dict[str, dict[str, float]]:
    """model -> measured type -> median over its batch sizes of steps/s there over ``base``'s
    (1-GPU rows)."""
    out: dict[str, dict[str, list[float]]] = {}
    for (job_type, scale), rate in table.solo[base].items():
        if scale != 1 or rate <= 0:
            continue
        for t in measured:
            other = table.solo[t].get((job_type, 1))
            if other:
                out.setdefault(model(job_type), {}).setdefault(t, []).append(other / rate)
    return {m: {t: statistics.median(v) for t, v in row.items()} for m, row in out.items()}


def run(args) -> dict:
    from simulator import SimConfig, make_policy, simulate
    from traces.catalog import default_table
    from traces.counts import parse_counts
    from traces.generator import generate_trace
    from traces.profiles import table_for_types

    cluster = {**parse_counts(args.catalog, what="--catalog"),
               **{t: args.count for t in args.measured}}
    table = table_for_types(default_table(), cluster)
    runs = []
    for seed in args.seeds:
        jobs = generate_trace(args.jobs, args.rate, seed=seed, table=table)
        for name in (AWARE, AGNOSTIC):
            began = time.perf_counter()
            result = simulate(jobs, table, cluster, make_policy(name, seed=seed),
                              sim=SimConfig(record_type_use=True), seed=seed)
            runs.append({"policy": name, "seed": seed, "avg_jct_s": result.avg_jct_s,
                         "makespan_s": result.makespan_s, "utilization": result.utilization,
                         "type_gpu_s": result.type_gpu_s,
                         "wall_s": time.perf_counter() - began})
            print(f"seed {seed} {name}: average JCT {result.avg_jct_s / 3600:.2f} h",
                  file=sys.stderr, flush=True)
    return {"cluster": cluster, "measured": args.measured, "jobs": args.jobs,
            "rate": args.rate, "seeds": args.seeds,
            "speedups": speedups(table, args.measured), "runs": runs}


def markdown(out: dict) -> str:
    runs, cluster = out["runs"], out["cluster"]
    types = list(cluster)
    mean = {p: {k: statistics.mean(r[k] for r in runs if r["policy"] == p)
                for k in ("avg_jct_s", "makespan_s", "utilization")} for p in (AWARE, AGNOSTIC)}
    lines = ["| policy | average JCT h | makespan h | utilisation | average JCT / agnostic's |",
             "|---|---|---|---|---|"]
    for p in (AWARE, AGNOSTIC):
        m = mean[p]
        lines.append(f"| `{p}` | {m['avg_jct_s'] / 3600:.2f} | {m['makespan_s'] / 3600:.1f} | "
                     f"{m['utilization']:.1%} | "
                     f"{m['avg_jct_s'] / mean[AGNOSTIC]['avg_jct_s']:.2f} |")
    per = {p: {} for p in (AWARE, AGNOSTIC)}     # policy -> model -> type -> GPU-s
    for r in runs:
        for job_type, row in r["type_gpu_s"].items():
            into = per[r["policy"]].setdefault(model(job_type), {})
            for t, s in row.items():
                into[t] = into.get(t, 0.0) + s
    measured = out["measured"]
    head = ("| model | " + " | ".join(f"{t} / v100" for t in measured)
            + " | " + " | ".join(f"aware: {t}" for t in types)
            + " | " + " | ".join(f"agnostic: {t}" for t in types) + " |")
    lines += ["", head, "|---" * (1 + len(measured) + 2 * len(types)) + "|"]
    for name in sorted(set(per[AWARE]) | set(per[AGNOSTIC])):
        cells = [f"{out['speedups'].get(name, {}).get(t, float('nan')):.1f}x" for t in measured]
        for p in (AWARE, AGNOSTIC):
            row = per[p].get(name, {})
            total = sum(row.values()) or 1.0
            cells += [f"{row.get(t, 0.0) / total:.0%}" for t in types]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--measured", default="h200",
                        help="measured types (comma-separated; rows under traces/data/measured)")
    parser.add_argument("--count", type=int, default=8, help="GPUs of each measured type")
    parser.add_argument("--catalog", default="v100=8,p100=8,k80=8",
                        help="the catalog's types beside them")
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--rate", type=float, default=4.0, help="arrivals per hour")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--json", type=Path, help="also write every run's figures here")
    args = parser.parse_args(argv)
    args.measured = [t.strip() for t in args.measured.split(",") if t.strip()]
    args.seeds = [int(s) for s in args.seeds.split(",")]
    if not args.measured or args.count < 1 or args.jobs < 1 or not args.rate > 0:
        parser.error("--measured names a type; --count and --jobs are at least 1; --rate > 0")
    began = time.perf_counter()
    out = run(args)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    print(f"{args.jobs} jobs at {args.rate:g}/h on "
          + ", ".join(f"{n} {t}" for t, n in out["cluster"].items())
          + f", seeds {','.join(map(str, args.seeds))}; {platform.node() or 'this machine'}, "
          f"Python {platform.python_version()}, {time.perf_counter() - began:.0f} s\n")
    print(markdown(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
