"""Every policy at production size: the scheduler's first plan with N jobs waiting on 2,048
GPUs, under each registered policy with the daemon's defaults (16 partners per job for the
space-sharing ones, ``gavelsched/daemon/config.py: PAIR_PARTNERS``; the catalog's prices).

Each row is a fresh process (its peak memory its own): N jobs of the thesis's generated
traces (§5.7.1, 30% on several GPUs, SLOs of §5.7.3; single-GPU jobs for a policy whose traits
say it schedules only those) submitted to a ``SchedulerCore``, then one plan through ``RoundDriver``
as the daemon plans a round: the pairs listed, the plan's seconds and the solve's among
them, peak RSS. A plan must fit in the plan lead, 30% of a round before its start: 9 s of
the 30-s rounds of the daemon benchmarks, 108 s of the thesis's 360-s rounds.

Usage::

    python benchmarks/policy_scale.py                                # every policy
    python benchmarks/policy_scale.py --policies finish_time_fairness_packed --sizes 2000
    python benchmarks/policy_scale.py --policies min_total_duration_packed \\
        --options partitions=8                                       # POP on top
    python benchmarks/policy_scale.py --policies allox --cluster 22:21:21   # 64 GPUs
    python benchmarks/policy_scale.py --policies max_min_fairness_water_filling \\
        --entities 20 --entity-cap 256                               # 20 teams, capped
    python benchmarks/policy_scale.py --policies max_min_fairness_water_filling_perf \\
        --sizes 20000 --entities 20 --measured --lps       # and its LPs, by kind
    python benchmarks/policy_scale.py --policies max_sum_throughput_normalized_by_cost_perf_SLOs \\
        --keep-going                     # strict SLOs: the jobs refused, the rest planned

With ``--entities N`` the jobs belong to N teams in turn (``team0``, ...: weights 1, 2, 3
and inner policies fairness and FIFO in turn, thesis §5.4.3), each capped at
``--entity-cap`` GPUs if given: the hierarchical policies' case, where every job has a row
of the LP of its own. With ``--measured`` each job plans on its own steps/s (its type's
within +-10%, as once the daemon has measured it, thesis §5.3.3), so no two jobs are alike.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml
from host import describe

ROOT = Path(__file__).resolve().parent.parent

CLUSTER = {"v100": 683, "p100": 683, "k80": 682}     # 2,048 GPUs
LEADS = (("30-s", 9.0), ("360-s", 108.0))            # (round, its plan lead in s)
# The options a policy needs beyond the defaults.
OPTIONS = {"min_makespan_with_budget": {"budget": 1e7}}


def team_specs(count: int, cap: int | None = None) -> dict:
    """``count`` entities as cluster.yaml and the Problem JSON write them, ``team0`` ...:
    weights 1, 2, 3 and inner policies fairness and FIFO in turn, each capped at ``cap``
    GPUs (None: uncapped)."""
    return {f"team{k}": {"weight": 1.0 + k % 3, "policy": ("fairness", "fifo")[k % 2],
                         **({"max_gpus": cap} if cap else {})} for k in range(count)}


def teams(count: int, cap: int | None = None) -> dict:
    """``team_specs`` as the policies' ``Entity`` objects."""
    from policies import Entity

    return {name: Entity(name, **spec) for name, spec in team_specs(count, cap).items()}


def first_plan(n: int, partners: int, policy_name: str, options: dict | None = None,
               cluster: dict[str, int] = CLUSTER, entities: int = 0,
               entity_cap: int | None = None, measured: bool = False,
               lps: bool = False, keep: bool = False) -> dict:
    """The first plan of ``n`` waiting jobs on ``cluster`` under ``policy_name`` (this
    process): the pairs its solve listed, the plan's and the solve's seconds, peak RSS.
    ``entities``: the jobs belong to that many ``teams`` in turn; ``measured``: each job
    has its own steps/s, its type's within +-10% (one seeded draw); ``lps``: also the
    direct path's LPs by kind (``counted_lps``); ``keep``: a refusal drops the jobs it
    names and solves again, as the daemon does (its solves and the jobs refused)."""
    import dataclasses
    import resource

    import numpy as np

    from gavelsched.core import CoreConfig, SchedulerCore
    from gavelsched.core.driver import RoundDriver, spec_of
    from gavelsched.mechanism import ClusterView
    from policies import PolicyError, get_policy
    from traces import default_table
    from traces.catalog import default_prices
    from traces.generator import generate_trace

    policy = get_policy(policy_name, **{**OPTIONS.get(policy_name, {}), **(options or {})})
    solves = []
    solve = policy.solve

    def timed(problem):
        start = time.perf_counter()
        try:
            return solve(problem)
        finally:            # (a refusal too: with ``keep``, its time is the plan's)
            solves.append((len(problem.pairs), time.perf_counter() - start))
    policy.solve = timed
    core = SchedulerCore(policy, ClusterView.build(cluster), default_table(),
                         CoreConfig.for_policy(policy, pair_partners=partners,
                                               on_solve_error="keep" if keep else "raise"),
                         prices=default_prices(), entities=teams(entities, entity_cap))
    jobs = generate_trace(n, 1e6, table=default_table(), seed=0, slos=True,
                          multi_gpu=not policy.traits.single_gpu)
    if entities:
        jobs = [dataclasses.replace(job, entity=f"team{i % entities}")
                for i, job in enumerate(jobs)]
    table = default_table()
    noise = np.random.default_rng(0).uniform(0.9, 1.1, (n, len(cluster)))
    for i, job in enumerate(jobs):
        own = {t: table.get(t, job.job_type, job.scale_factor) * noise[i, k]
               for k, t in enumerate(cluster)} if measured else None
        core.submit(spec_of(str(i), job), 0.0, throughputs=own)
    counts = counted_lps() if lps else None
    start = time.perf_counter()
    try:
        step = RoundDriver(core).plan(0.0)
    except PolicyError as err:      # the one line the daemon would log, as the row's result
        return {"error": str(err), "after_s": time.perf_counter() - start,
                "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    plan_s = time.perf_counter() - start
    return {"pairs": solves[0][0], "plan_s": plan_s, "solve_s": sum(s for _, s in solves),
            "solves": len(solves), "refused": len(step.round.rejected),
            "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            **({"lps": counts} if counts is not None else {})}


def counted_lps() -> dict[str, list[float]]:
    """From now on in this process, every LP the policies hand ``policies.lp.solve_lp``
    (the direct path), infeasible ones too: {kind: [LPs, seconds]}, the kind being what
    the policy names in brackets ("polish", "dead columns"), "step" otherwise."""
    import policies.lp

    counts: dict[str, list[float]] = {}
    real = policies.lp.solve_lp

    def solve_lp(lp, solver, what, **kwargs):
        start = time.perf_counter()
        try:
            return real(lp, solver, what, **kwargs)
        finally:
            kind = what.rpartition("(")[2].rstrip(")") if what.endswith(")") else "step"
            tally = counts.setdefault(kind, [0, 0.0])
            tally[0] += 1
            tally[1] += time.perf_counter() - start
    for module in list(sys.modules.values()):     # every policy module that bound it
        if (getattr(module, "__name__", "").startswith("policies")
                and getattr(module, "solve_lp", None) is real):
            module.solve_lp = solve_lp
    return counts


def fresh(cmd: list[str], timeout: float) -> tuple[float, float, str | None]:
    """Run ``cmd`` in a fresh process: (wall seconds, its peak RSS in MiB, its stdout);
    stdout None when it failed or ran past ``timeout`` (then killed)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, cwd=ROOT)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)     # (its own rusage: peak RSS)
        wall = time.perf_counter() - start
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            if wall < timeout:
                print(f"  failed: {' '.join(cmd)}\n{err.read()[-2000:]}", file=sys.stderr)
            return wall, usage.ru_maxrss / 1024, None
        return wall, usage.ru_maxrss / 1024, out.read()


def fits(plan_s: float) -> str:
    """The rounds whose plan lead the plan fits in."""
    return ", ".join(name for name, lead in LEADS if plan_s <= lead) or "neither"


def main() -> int:
    from gavelsched.daemon.config import PAIR_PARTNERS
    from policies.registry import policy_names
    from traces.counts import parse_counts

    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policies", help="comma-separated (default: every registered one)")
    parser.add_argument("--sizes", default="2000,20000", help="jobs waiting (comma-separated)")
    parser.add_argument("--partners", type=int, default=PAIR_PARTNERS,
                        help="pair partners per job (default: the daemon's, %(default)s)")
    parser.add_argument("--options", default="", metavar="K=V,...",
                        help="policy options for every row (e.g. partitions=8: POP)")
    parser.add_argument("--cluster", default="683:683:682", metavar="V100:P100:K80",
                        help="GPUs of each type, or TYPE=N,... (default: %(default)s, 2,048)")
    parser.add_argument("--entities", type=int, default=0, metavar="N",
                        help="the jobs belong to N teams in turn (default: none)")
    parser.add_argument("--entity-cap", type=int, metavar="GPUS",
                        help="with --entities, each team's cap in GPUs (default: none)")
    parser.add_argument("--measured", action="store_true",
                        help="each job plans on its own steps/s (its type's within +-10%%)")
    parser.add_argument("--lps", action="store_true",
                        help="a column of the direct path's LPs by kind: how many, seconds")
    parser.add_argument("--keep-going", action="store_true",
                        help="as the daemon: a solve that refuses jobs (admission control, "
                             "policies/admission.py) drops them and solves again; the solve "
                             "column sums the solves and says how many jobs were refused")
    parser.add_argument("--timeout", type=float, default=300.0, help="per process (s)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(first_plan(**json.loads(args.child))))
        return 0
    if args.entities < 0 or (args.entity_cap is not None and args.entity_cap < 1):
        parser.error("--entities: 0 or more teams; --entity-cap: 1 GPU or more")
    # each value as the daemon's YAML would read it (``partitions=8``: the integer 8)
    options = {key: yaml.safe_load(value) for key, value in
               (pair.split("=", 1) for pair in args.options.split(",") if pair)}
    names = args.policies.split(",") if args.policies else policy_names()
    try:
        cluster = parse_counts(args.cluster, what="--cluster")
    except ValueError as err:
        parser.error(str(err))
    print(f"# {describe()}")
    teamed = (f", {args.entities} teams" + (f" capped at {args.entity_cap} GPUs"
                                             if args.entity_cap else "")) if args.entities else ""
    print(f"\n## The first plan of N waiting jobs on {sum(cluster.values()):,} GPUs "
          f"({args.cluster}, {args.partners} partners"
          f"{', options ' + args.options if options else ''}{teamed}"
          f"{', each job its own steps/s' if args.measured else ''})\n")
    print("| policy | jobs | pairs | plan s | of it the solve s | peak RSS | fits the plan lead of |"
          + (" LPs: how many, seconds |" if args.lps else ""))
    print("|---" * (8 if args.lps else 7) + "|")
    for name in names:
        for n in (int(s) for s in args.sizes.split(",")):
            cmd = [sys.executable, __file__, "--child", json.dumps({
                "n": n, "partners": args.partners, "policy_name": name, "options": options,
                "cluster": cluster, "entities": args.entities, "entity_cap": args.entity_cap,
                "measured": args.measured, "lps": args.lps, "keep": args.keep_going})]
            wall, rss, out = fresh(cmd, args.timeout)
            if out is None:
                why = (f"killed after {args.timeout:.0f} s" if wall >= args.timeout
                       else "failed (above)")
                print(f"| {name} | {n:,} | | {why} | | {rss:,.0f} MiB | neither |", flush=True)
                continue
            row = json.loads(out)
            if "error" in row:
                print(f"| {name} | {n:,} | | refused after {row['after_s']:.2f} s: "
                      f"{row['error']} | | {row['rss_mib']:.0f} MiB | neither |", flush=True)
                continue
            lps = "; ".join(f"{kind} {count:,}, {seconds:.2f} s" for kind, (count, seconds)
                            in row.get("lps", {}).items())
            solve = f"{row['solve_s']:.2f}" + (
                f" ({row['solves']} solves; {row['refused']:,} jobs refused)"
                if args.keep_going else "")
            print(f"| {name} | {n:,} | {row['pairs']:,} | {row['plan_s']:.2f} | "
                  f"{solve} | {row['rss_mib']:.0f} MiB | {fits(row['plan_s'])} |"
                  + (f" {lps} |" if args.lps else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
