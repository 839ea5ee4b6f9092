"""Physical against simulated (issue #8; the thesis reports its simulator within 8% of its
physical cluster, §5.7.2).

1. Run one small trace for real: ``gavelsched local-cluster`` (a scheduler and emulated
   typed workers on loopback, real torch jobs), keeping its state directory.
2. Replay the same jobs (types, steps, arrival times) in ``simulator.simulate`` with the
   throughputs the daemon measured for each job (steps/s per worker type, from its store;
   a type a job never ran on gets the daemon's own estimate: the table's prior scaled by
   the job's measured/prior ratio), the same policy, cluster, round length and re-solve
   interval and refills of GPUs freed mid-round, the daemon's plan lead, rounds of fixed
   length as the daemon's, and the start-up of a fresh run the daemon measured per job
   type (from its round's start to its first InitJob) as the preemption overhead of a run
   that was not extended: the kept run's ``DaemonRules`` (``simulator/twin.py``). The
   daemon's leases are round-aligned with a floor (docs/runtime.md): a fresh run makes
   steps for its round minus its start-up, but for at least MIN_LEASE_FRACTION of a round;
   so the main row charges the rules' capped start-up. Rows with the start-up in full and
   not at all bracket it.
3. Report average JCT and makespan of both, their difference (target: within 10%), and
   each job's JCT in both.

    python benchmarks/physical_vs_simulated.py                     # 10 s rounds, ~4 min
    python benchmarks/physical_vs_simulated.py --round-seconds 30  # jobs 3x bigger, ~5 min
    python benchmarks/physical_vs_simulated.py --workload steps    # no torch start-up
    python benchmarks/physical_vs_simulated.py --replay DIR [DIR ...]  # runs kept with --keep
    python benchmarks/physical_vs_simulated.py --replay DIR --runs-on-the-round-clock  # a what-if
    python benchmarks/physical_vs_simulated.py --trace T.trace --time-scale 0.01 --steps-scale 0.001
                                                   # a trace of yours (gavelsched replay)

Issue #20's table (BENCHMARKS.md; ~30 min): a Gavel-format trace, three policies, 30 s rounds::

    gavelsched trace generate --jobs 15 --rate 30 --seed 1 -o gavel15.trace
    python benchmarks/physical_vs_simulated.py --trace gavel15.trace --time-scale 0.1 \
        --steps-scale 0.001 --workload steps --round-seconds 30 --workers k80=2,p100=2,v100=2 \
        --policy max_min_fairness_perf,fifo_perf,min_total_duration_perf --keep runs

With ``--trace`` the loopback cluster replays that trace (``local-cluster --trace``: each
job at its arrival time x S, with its steps x K) instead of the demo mix, and the report adds
the distribution of per-job JCT error (median, 90th percentile, worst).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, replace
import statistics
import multiprocessing
import os
import platform
import queue
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from gavelsched.daemon.config import load_config
from gavelsched.daemon.jobs import DONE
from gavelsched.daemon.local import subprocess_env
from gavelsched.daemon.meta import EXIT_S, RESTART_S, STARTUP_S
from gavelsched.daemon.store import Store
from gavelsched.core.online import OnlineThroughputs
from policies import get_policy
from simulator.engine import SimulationError, simulate
from simulator.twin import DaemonRules, sim_config
from traces import ThroughputTable, TraceJob, default_table
from traces.counts import counts_text


@dataclass(frozen=True)
class Measured:
    """A daemon run's finished jobs as a trace (``measured_trace``)."""

    jobs: list[TraceJob]          # each with the steps/s the daemon measured for it
    ids: list[str]                # the daemon's id of each job
    table: ThroughputTable        # the worker types (every job carries its own rates)
    startup_s: dict[str, float]   # start-up of a fresh run per job type (its mean)
    priors: ThroughputTable       # what the daemon started with
    waits: dict[str, float]       # per job id: seconds from arrival to its first start
    cluster: dict[str, int]       # the GPUs of each type that registered
    exit_s: dict[str, float]      # a finished run's exit after its last step per job type


def measured_trace(state_dir: Path) -> Measured:
    """The finished jobs of a daemon run as a trace, each job with the steps/s the daemon
    measured for it (``TraceJob.throughputs``) and the restart cost its restart rule
    weighed (``TraceJob.restart_s``; None in a run from before it was kept: the start-up),
    the startup seconds the daemon measured for a fresh run of each job type (the
    simulator's preemption overhead) and for a finished run's exit, the priors the daemon
    started with (``local-cluster``'s ``throughputs.json``), and how long each waited for
    its first start."""
    from traces.throughputs import load_table

    kept = state_dir.parent / "throughputs.json"
    start = load_table(kept) if kept.exists() else default_table()
    store = Store(state_dir)
    try:
        rows = sorted((j for j in store.jobs() if j.state == DONE), key=lambda j: int(j.id))
        online = OnlineThroughputs(prior=default_table())
        online.restore(store.throughputs())
        startup = {row.spec.job_type: float(store.get_meta(STARTUP_S.key(row.spec.job_type))
                                            or 0.0) for row in rows}
        # the restart cost the daemon's restart rule weighed (start-up and save, banded)
        weighed = {kind: store.get_meta(RESTART_S.key(kind)) for kind in startup}
        exits = {kind: float(store.get_meta(EXIT_S.key(kind)) or 0.0) for kind in startup}
        cluster: dict[str, int] = {}
        for server in store.servers():
            cluster[server.worker_type] = cluster.get(server.worker_type, 0) + len(server.workers)
    finally:
        store.close()
    types = default_table().worker_types
    jobs = [TraceJob(job_type=row.spec.job_type, scale_factor=row.spec.scale_factor,
                     total_steps=row.spec.total_steps, arrival_s=row.arrival_s,
                     throughputs=online.row(row.id, row.spec.job_type, row.spec.scale_factor,
                                            types),
                     restart_s=float(weighed[row.spec.job_type] or 0.0) or None)
            for row in rows]
    return Measured(jobs, [row.id for row in rows], ThroughputTable({t: {} for t in types}),
                    startup, start, {row.id: row.started_s - row.arrival_s for row in rows},
                    cluster, exits)


def kept_rules(run_dir: Path, measured: Measured) -> DaemonRules:
    """The rules the daemon of a kept run (``run_dir/cluster.yaml``) ran by, with the
    start-ups and exits it measured."""
    return replace(load_config(run_dir / "cluster.yaml").rules, startup_s=measured.startup_s,
                   exit_s=measured.exit_s)


def simulate_within(seconds: float, *args, **kw) -> dict | str | None:
    """``simulate(*args, **kw).to_dict()`` in a forked process, with ``"started_s"``: each
    job's first round with steps; None when it has not finished after ``seconds`` (a replay
    whose start-ups all exceed the round can make no progress in fresh runs, and the
    simulator has no time limit of its own); the simulator's one-line refusal when it
    cannot model the replay (``SimulationError``: the daemon's priors with co-located
    pairs)."""
    def run():
        try:
            result = simulate(*args, **kw)
        except SimulationError as exc:
            results.put(str(exc))
            return
        results.put({**result.to_dict(), "started_s": [j.started_s for j in result.jobs]})

    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    proc = ctx.Process(target=run)
    proc.start()
    try:
        return results.get(timeout=seconds)
    except queue.Empty:
        return None
    finally:
        proc.kill()
        proc.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="k80=1,p100=1,v100=1")
    parser.add_argument("--jobs", type=int, default=6)
    parser.add_argument("--round-seconds", type=float, default=10.0)
    parser.add_argument("--policy", default="max_min_fairness_perf",
                        help="a policy, or several separated by commas (one run each, then "
                             "a summary table)")
    parser.add_argument("--workload", help="run this reference workload for every job "
                        "(e.g. steps: no torch, so a fresh run starts in ~1 s)")
    parser.add_argument("--trace", help="replay this trace (.jsonl or Gavel .trace) instead "
                        "of the demo mix")
    parser.add_argument("--time-scale", type=float, default=1.0, metavar="S",
                        help="with --trace: arrival times x S")
    parser.add_argument("--steps-scale", type=float, default=1.0, metavar="K",
                        help="with --trace: steps x K")
    parser.add_argument("--keep", help="keep the daemon's state and logs here (with several "
                        "policies, in a folder per policy)")
    parser.add_argument("--replay", metavar="DIR", nargs="+", help="replay runs kept with "
                        "--keep DIR instead of running the cluster again")
    parser.add_argument("--sim-timeout", type=float, default=120.0, metavar="S",
                        help="give up on a replay after S seconds (default 120)")
    parser.add_argument("--restart-rule", choices=("tenure", "gavel"),
                        help="replay under this restart rule instead of the daemon's (a "
                             "what-if: which part of a difference the rule makes)")
    parser.add_argument("--runs-on-the-round-clock", action="store_true",
                        help="replay with every kept run starting its lease at its round's "
                             "start, not ahead of the clock as the daemon's do (a what-if; "
                             "SimConfig.kept_runs_ahead off)")
    args = parser.parse_args()
    policies = args.policy.split(",")
    summaries = []
    if args.replay:
        for folder in args.replay:
            summaries.append(compare(Path(folder), args.sim_timeout, args.restart_rule,
                                     not args.runs_on_the_round_clock))
    for policy in [] if args.replay else policies:
        with tempfile.TemporaryDirectory(prefix="gavel-pvs-") as tmp:
            root = Path(args.keep or tmp)
            if args.keep and len(policies) > 1:
                root = root / policy
            load_before = os.getloadavg()[0]
            jobs_flags = (["--trace", str(Path(args.trace).resolve()), "--time-scale",
                           str(args.time_scale), "--steps-scale", str(args.steps_scale)]
                          if args.trace else ["--jobs", str(args.jobs)])
            # -v: the scheduler logs each re-solve's allocation (what a difference is traced to)
            subprocess.run([sys.executable, "-m", "gavelsched", "-v", "local-cluster",
                            "--workers", args.workers, *jobs_flags,
                            "--round-seconds", str(args.round_seconds), "--policy", policy,
                            "--json", str(root / "physical.json"), "--keep", str(root / "run"),
                            *(["--workload", args.workload] if args.workload else [])],
                           check=True, env=subprocess_env())
            (root / "load.json").write_text(json.dumps(
                {"before": load_before, "after": os.getloadavg()[0]}))
            summaries.append(compare(root, args.sim_timeout))
    if len(summaries) > 1:
        print("\n" + summary_table(summaries))
    return 0


def compare(root: Path, sim_timeout: float, restart_rule: str | None = None,
            kept_runs_ahead: bool = True) -> dict:
    """Replay the run kept in ``root`` in the simulator, print the comparison, and return
    its summary (``summary_table``); the load averages are the run's (``load.json``).
    ``restart_rule`` and ``kept_runs_ahead``: what-ifs (the daemon's rule; its kept runs
    going on ahead of the round clock)."""
    physical = json.loads((root / "physical.json").read_text())
    policy_name = yaml.safe_load((root / "run" / "cluster.yaml").read_text())["policy"]
    measured = measured_trace(root / "run" / "state")
    rules = kept_rules(root / "run", measured)
    if restart_rule is not None:
        rules = replace(rules, restart_rule=restart_rule)
    round_seconds, jobs, table = rules.round_seconds, measured.jobs, measured.table
    cluster = measured.cluster
    load = root / "load.json"
    load = json.loads(load.read_text()) if load.exists() else {"before": None, "after": None}
    shown = "unknown" if load["after"] is None else \
        f"{load['before']:.1f} before the run, {load['after']:.1f} after"
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load average "
          f"{shown}; cluster {counts_text(cluster)}, {len(jobs)} jobs, "
          f"{round_seconds:g} s rounds, {policy_name}")
    print("| start-up charged | measure | physical (local-cluster) | simulated | difference |")
    print("|---|---|---|---|---|")
    runs, missing = {}, {}
    # the main row charges the rules' capped start-ups; the next two bracket it
    charged = {"capped": {}, "in full": {"preemption_overhead_s": dict(rules.startup_s)},
               "none": {"preemption_overhead_s": {}},
               "capped, daemon's knowledge": {"priors": measured.priors}}
    for scale, more in charged.items():
        policy = get_policy(policy_name)
        config = rules.core_config(policy, table, tuple(cluster),
                                   rows=[job.throughputs for job in jobs])
        simulated = simulate_within(
            sim_timeout, jobs, table, cluster, policy, core_config=config,
            sim=sim_config(rules, arrivals=True, kept_runs_ahead=kept_runs_ahead, **more))
        runs[scale] = simulated if isinstance(simulated, dict) else None
        if runs[scale] is None:
            missing[scale] = simulated or f"replay did not finish in {sim_timeout:g} s"
            print(f"| {scale} | ({missing[scale]}) | | | |")
            continue
        for key, name in (("avg_jct_s", "average JCT (s)"), ("makespan_s", "makespan (s)")):
            diff = 100.0 * (simulated[key] - physical[key]) / physical[key]
            print(f"| {scale} | {name} | {physical[key]:.1f} | {simulated[key]:.1f} | "
                  f"{diff:+.1f}% |")
    print()
    errors = {rule: per_job(rule, measured, physical, runs[rule], rules) if runs[rule] else ()
              for rule in ("capped", "capped, daemon's knowledge")}
    return {"policy": policy_name, "load": (load["before"], load["after"]), "physical": physical,
            "runs": runs, "missing": missing, "errors": errors, "rounds": round_seconds,
            "jobs": len(jobs)}


def summary_table(summaries: list[dict]) -> str:
    """One row per run: physical, and each replay's difference (oracle: the final measured
    rates from the start; knowledge: the daemon's priors until each job's first report)."""
    lines = ["| policy | load avg before / after | physical avg JCT / makespan (s) | "
             "simulated, oracle: avg JCT / makespan | per-job error, oracle: median / 90th / "
             "worst | simulated, daemon's knowledge: avg JCT / makespan | per-job error, "
             "daemon's knowledge: median / 90th / worst |", "|---|---|---|---|---|---|---|"]
    for s in summaries:
        real = s["physical"]
        cells = []
        for rule in ("capped", "capped, daemon's knowledge"):
            sim = s["runs"].get(rule)
            if sim is None:
                cells += [f"({s['missing'].get(rule, 'did not finish')})", ""]
                continue
            cells.append(" / ".join(f"{100 * (sim[k] - real[k]) / real[k]:+.1f}%"
                                    for k in ("avg_jct_s", "makespan_s")))
            cells.append(" / ".join(f"{v:.1f}%" for v in s["errors"][rule]))
        load = " / ".join("-" if v is None else f"{v:.1f}" for v in s["load"])
        lines.append(f"| `{s['policy']}` | {load} | {real['avg_jct_s']:.1f} / "
                     f"{real['makespan_s']:.1f} | {cells[0]} | {cells[1]} | {cells[2]} | "
                     f"{cells[3]} |")
    return "\n".join(lines)


def per_job(rule: str, measured: Measured, physical: dict, simulated: dict,
            rules: DaemonRules) -> tuple[float, ...]:
    """Each job's JCT in both, the distribution of the per-job error, and where each
    difference comes from: waiting for the first start (the order jobs got GPUs in) or
    running (the types and leases it got once started). Returns the error's (median, 90th
    percentile, worst) in %."""
    charged = ", ".join(f"{t} {c:.1f} s" for t, c in sorted(rules.startup_charges().items()))
    print(f"\nPer job, start-ups charged {charged or 'none'}, {rule} (seconds):")
    print("| job | type | steps | start-up | physical wait / JCT | simulated wait / JCT | "
          "difference | of which waiting |")
    print("|---|---|---|---|---|---|---|---|")
    errors = []
    starts = simulated.get("started_s", ())
    for job, job_id, real, sim, started in zip(measured.jobs, measured.ids, physical["jobs"],
                                               simulated.get("jobs", ()), starts):
        errors.append(100.0 * (sim["jct_s"] - real["jct_s"]) / real["jct_s"])
        wait = measured.waits[job_id]
        sim_wait = (started if started is not None else sim["completion_s"]) - sim["arrival_s"]
        print(f"| {real['id']} | {real['job_type']} | {job.total_steps} | "
              f"{rules.startup_s.get(job.job_type, 0.0):.1f} | {wait:.1f} / "
              f"{real['jct_s']:.1f} | "
              f"{sim_wait:.1f} / {sim['jct_s']:.1f} | {errors[-1]:+.1f}% | "
              f"{sim_wait - wait:+.1f} s of {sim['jct_s'] - real['jct_s']:+.1f} s |")
    if not errors:
        return ()
    size = sorted(abs(e) for e in errors)
    spread = (statistics.median(size), size[min(len(size) - 1, int(0.9 * len(size)))], size[-1])
    print(f"\nPer-job JCT error ({rule}; |simulated - physical| / physical, {len(size)} "
          f"jobs): median {spread[0]:.1f}%, 90th percentile {spread[1]:.1f}%, worst "
          f"{spread[2]:.1f}%")
    return spread


if __name__ == "__main__":
    sys.exit(main())
