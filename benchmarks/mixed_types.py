"""Measured gain of running jobs on several GPU types at once (issue #9; VirtualFlow §6.5.2,
Figure 15: Gavel's LAS with heterogeneous allocations, up to 29.2% lower average JCT on
4 V100 + 8 P100 + 16 K80, simulated, 6-minute rounds).

For each cluster, trace kind, load (jobs/hour) and seed, the same generated trace (thesis
§5.7.1) is simulated under ``max_min_fairness_perf`` (Gavel's heterogeneity-aware LAS, one
type per job per round) and ``max_min_fairness_mixed`` (the same LP with configuration
columns; every job mixed-capable, ``CoreConfig.mixed_jobs="all"``). Each simulation runs
in a fresh process (its wall time and peak RSS are its own, the mixed one includes building
the configurations with the split solver). Prints one row per run and, per (cluster, kind,
load), the mean ratio of average JCTs (mixed / perf; < 1 means mixing helps). Usage::

    python benchmarks/mixed_types.py                 # the table of BENCHMARKS.md
    python benchmarks/mixed_types.py --jobs 60 --seeds 0 --rates 2   # a quick look
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

from host import describe  # (a sibling: this file runs as a script)

CLUSTERS = {
    "vf-4-8-16": {"v100": 4, "p100": 8, "k80": 16},      # VirtualFlow §6.5.2
    "3x-12-24-48": {"v100": 12, "p100": 24, "k80": 48},  # the same mix, 3x larger
}
KINDS = {"single": False, "multi": True}  # §5.7.1 'continuous-single' / '-multiple'
POLICIES = ("max_min_fairness_perf", "max_min_fairness_mixed")


def build_all() -> dict:
    """The one-time cost: configurations of every catalog key on the VirtualFlow cluster."""
    from gavelsched.core.configurations import Configurations
    from traces.catalog import default_table

    table = default_table()
    keys = sorted({key for rows in table.solo.values() for key in rows})
    start = time.perf_counter()
    mixer = Configurations(table)
    count = sum(len(mixer.options(job_type, sf, CLUSTERS["vf-4-8-16"])) for job_type, sf in keys)
    return {"keys": len(keys), "configurations": count, "build_s": time.perf_counter() - start,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def run_one(spec: dict) -> dict:
    """One simulation (in this process): average JCT, makespan, utilisation, wall time, peak
    RSS."""
    if spec.get("one_time"):
        return build_all()
    from gavelsched.core.driver import config_for
    from simulator import make_policy, simulate
    from traces.catalog import default_table
    from traces.generator import generate_trace

    table = default_table()
    cluster = CLUSTERS[spec["cluster"]]
    jobs = generate_trace(spec["jobs"], spec["rate"], table=table, seed=spec["seed"],
                          multi_gpu=KINDS[spec["kind"]])
    policy = make_policy(spec["policy"], seed=spec["seed"])
    config = config_for(policy, table, tuple(cluster), seed=spec["seed"], mixed_jobs="all")
    start = time.perf_counter()
    result = simulate(jobs, table, cluster, policy, core_config=config, seed=spec["seed"])
    return {**spec, "avg_jct_h": result.avg_jct_s / 3600, "makespan_h": result.makespan_s / 3600,
            "utilization": result.utilization, "wall_s": time.perf_counter() - start,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", nargs="+", choices=sorted(CLUSTERS), default=list(CLUSTERS))
    parser.add_argument("--kinds", nargs="+", choices=sorted(KINDS), default=list(KINDS))
    parser.add_argument("--rates", nargs="+", type=float, default=None, metavar="R",
                        help="jobs/hour (default: 0.5 2 8 on the VirtualFlow cluster, "
                             "x3 on the larger one)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--jobs", type=int, default=100, help="jobs per trace")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(json.loads(args.child))))
        return 0
    print(f"# {describe()}; {args.jobs} jobs a trace, round 360 s, "
          f"every job mixed-capable; JCT in hours")
    header = (f"{'cluster':<12} {'kind':<6} {'rate':>5} {'seed':>4} {'JCT perf':>9} "
              f"{'JCT mixed':>9} {'ratio':>6} {'util perf':>9} {'util mix':>8} "
              f"{'wall perf':>9} {'wall mix':>8} {'RSS perf':>8} {'RSS mix':>7}")
    print(header)
    print("-" * len(header))
    summary = []
    for cluster in args.clusters:
        scale = sum(CLUSTERS[cluster].values()) / 28
        rates = args.rates or [r * scale for r in (0.5, 2.0, 8.0)]
        for kind in args.kinds:
            for rate in rates:
                ratios = []
                for seed in args.seeds:
                    runs = {}
                    for policy in POLICIES:
                        spec = {"cluster": cluster, "kind": kind, "rate": rate, "seed": seed,
                                "jobs": args.jobs, "policy": policy}
                        out = subprocess.run([sys.executable, __file__, "--child",
                                              json.dumps(spec)],
                                             capture_output=True, text=True, check=True)
                        runs[policy] = json.loads(out.stdout.strip().splitlines()[-1])
                    p, m = (runs[name] for name in POLICIES)
                    ratio = m["avg_jct_h"] / p["avg_jct_h"]
                    ratios.append(ratio)
                    print(f"{cluster:<12} {kind:<6} {rate:>5g} {seed:>4} {p['avg_jct_h']:>9.2f} "
                          f"{m['avg_jct_h']:>9.2f} {ratio:>6.3f} {p['utilization']:>9.1%} "
                          f"{m['utilization']:>8.1%} {p['wall_s']:>9.1f} {m['wall_s']:>8.1f} "
                          f"{p['peak_rss_mib']:>8.0f} {m['peak_rss_mib']:>7.0f}", flush=True)
                summary.append((cluster, kind, rate, sum(ratios) / len(ratios),
                                min(ratios), max(ratios)))
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps({"one_time": True})],
                         capture_output=True, text=True, check=True)
    once = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"\n# one-time cost, fresh process: configurations of all {once['keys']} (job type, "
          f"scale factor) keys of the catalog on vf-4-8-16: {once['build_s']:.2f} s "
          f"({once['configurations']} configurations), peak RSS {once['peak_rss_mib']:.0f} MiB")
    print("\n# mean ratio of average JCT, mixed / perf (min .. max over seeds); "
          "JCT reduction = 1 - ratio")
    for cluster, kind, rate, mean, lo, hi in summary:
        print(f"{cluster:<12} {kind:<6} {rate:>5g}  {mean:.3f}  ({lo:.3f} .. {hi:.3f})  "
              f"reduction {1 - mean:+.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
