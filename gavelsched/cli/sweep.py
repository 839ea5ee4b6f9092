"""``gavelsched simulate sweep``: rates x seeds x policies in parallel, and a plot of average
JCT against input job rate (as thesis Figures 5.9-5.11). Registered under ``simulate``
(``simulate.py``); the flags it shares with ``simulate`` are in ``simulate_flags.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import EXIT_INTERRUPTED, InputError
from .args import seed
from .simulate_flags import (
    add_common_flags,
    arrival_grace,
    core_options,
    estimator_config,
    load_throughputs,
    parse_cluster,
    parse_entities,
    parse_gpus_per_server,
    parse_prices,
    parse_window,
    plan_lead,
    preemption_overheads,
    rounds_at_least,
    warn_long_replay,
)


def register(sub) -> None:
    """Add ``sweep`` to ``simulate``'s sub-commands ``sub``."""
    from simulator.ray_sweep import MAX_RETRIES
    fmt = argparse.ArgumentDefaultsHelpFormatter
    s = sub.add_parser(
        "sweep", formatter_class=fmt, help="rates x seeds x policies in parallel",
        description="For every (policy, rate, seed), generate a trace of --jobs jobs at that "
                    "rate and simulate it; write DIR/sweep.csv and DIR/jct_vs_rate.png "
                    "(average JCT vs input job rate, as thesis Figures 5.9-5.11). Each run's "
                    "row goes to DIR/runs.jsonl as it finishes: the same command again "
                    "makes only the runs it lacks (a stopped sweep resumes where it "
                    "stopped).")
    add_common_flags(s)
    s.add_argument("--rates", nargs="+", required=True, metavar="R",
                   help="input job rates (jobs/hour), space- or comma-separated")
    s.add_argument("--seeds", nargs="+", default=["0"], metavar="S",
                   help="seeds, space- or comma-separated")
    s.add_argument("--policies", nargs="+", default=["max_min_fairness",
                                                     "max_min_fairness_perf"], metavar="NAME",
                   help="policy names, space- or comma-separated")
    s.add_argument("--jobs", type=int, default=1000, metavar="N", help="jobs per trace")
    s.add_argument("--window", metavar="FIRST:LAST",
                   help="measured job ids (default: the middle, N/2 to 3N/4)")
    s.add_argument("--processes", type=int, default=None, metavar="P",
                   help="worker processes (default: one per CPU)")
    s.add_argument("--ray", metavar="ADDRESS",
                   help="run each (policy, rate, seed) as a task on the Ray cluster at "
                        "ADDRESS (host:port of its head, ray://host:port, or 'auto': the "
                        "one 'ray start' left on this machine), spread over its nodes; a "
                        f"run lost with its node runs again on another (up to {MAX_RETRIES} "
                        "times). "
                        "Same CSV and plot, and the same progress, then a line of how many "
                        "runs each node made. Needs the ray extra: "
                        "pip install 'gavelsched[ray]'")
    s.add_argument("-o", "--output", type=Path, required=True, metavar="DIR")
    s.set_defaults(func=run_sweep)


def run_sweep(args: argparse.Namespace) -> int:
    """Run every (policy, rate, seed) and print one row each (``simulator.sweep``)."""
    from simulator.ray_sweep import RaySweepError, require_ray
    from simulator.sweep import SweepSpec
    from simulator.sweep import run_sweep as sweep
    if args.ray is not None:
        try:
            require_ray()           # before any work: a missing extra is one line
        except RaySweepError as err:
            raise InputError(str(err)) from None
    cluster = parse_cluster(args.cluster)
    args.rates = _listed(args.rates, float, "--rates")
    args.seeds = _listed(args.seeds, seed, "--seeds")
    args.policies = _listed(args.policies, str, "--policies")
    from traces.generator import MAX_JOBS, MAX_RATE_PER_HOUR
    if not 1 <= args.jobs <= MAX_JOBS:
        raise InputError(f"--jobs: must be between 1 and {MAX_JOBS}, got {args.jobs}")
    if not all(0 < r <= MAX_RATE_PER_HOUR for r in args.rates):
        raise InputError(f"--rates: every rate must be in (0, {MAX_RATE_PER_HOUR:g}] "
                         "jobs/hour")
    core = core_options(args)  # bad re-solve or pair flags fail before any process starts
    from policies import get_policy

    from .solve import parse_options
    options = parse_options(args.option)
    for name in args.policies:
        get_policy(name, **options)  # unknown names and options fail before any process starts
    spec = SweepSpec(jobs=args.jobs, cluster=cluster, multi_gpu=args.multi_gpu,
                     round_seconds=args.round_seconds,
                     min_resolve_interval_s=args.min_resolve_interval,
                     window=parse_window(args.window) if args.window else None,
                     gpus_per_server=parse_gpus_per_server(args.gpus_per_server),
                     prices=parse_prices(args.prices, cluster),
                     preemption_overhead=args.preemption_overhead,
                     table=load_throughputs(args.throughputs) if args.throughputs else None,
                     entities=parse_entities(args.entities) if args.entities else None,
                     estimate_pairs=args.estimate_pairs,
                     estimator=estimator_config(args.profiled_fraction), policy_options=options,
                     core_options=core, plan_lead_s=plan_lead(args),
                     arrival_grace_s=arrival_grace(args))
    preemption_overheads(args.preemption_overhead, [])  # a bad spec fails before any process starts
    _warn_long(spec, args.rates, args.seeds)
    from simulator.sweep import SweepPointError, SweepStopped
    from simulator.sweep_journal import JournalError
    try:
        rows = sweep(args.policies, args.rates, args.seeds, spec, args.output,
                     processes=args.processes, progress=not args.quiet, ray_address=args.ray)
    except (RaySweepError, JournalError, SweepPointError) as err:
        raise InputError(str(err)) from None
    except SweepStopped as stopped:
        print(f"gavelsched simulate: {stopped}", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(f"{'policy':<32} {'rate':>6} {'seed':>5} {'avg JCT (h)':>12} {'util':>6}")
    for r in rows:
        jct = "n/a" if r["avg_jct_s"] is None else f"{r['avg_jct_s'] / 3600:.2f}"
        print(f"{r['policy']:<32} {r['rate']:>6g} {r['seed']:>5} {jct:>12} "
              f"{r['utilization']:>6.1%}")
    print(f"wrote {args.output / 'sweep.csv'} and {args.output / 'jct_vs_rate.png'}")
    return 0


def _warn_long(spec, rates: list[float], seeds: list[int]) -> None:
    """Before any run: a warning when the replay at the lowest rate (its jobs overlap
    least, so it runs the most rounds) runs more than ``LONG_REPLAY_ROUNDS`` rounds
    (``rounds_at_least``; one trace made for it, of the first seed)."""
    from simulator.sweep import point_jobs, spec_table
    table, rate = spec_table(spec), min(rates)
    rounds = rounds_at_least(point_jobs(rate, seeds[0], spec, table), table, spec.cluster,
                             spec.round_seconds)
    warn_long_replay(f"the replays at rate {rate:g} run", rounds, spec.round_seconds)


# ---- parsing ----------------------------------------------------------------------------
def _listed(items: list[str], kind, flag: str) -> list:
    """Values given as separate words and/or comma-separated."""
    out = []
    for item in items:
        for part in str(item).split(","):
            if not part.strip():
                continue
            try:
                out.append(kind(part.strip()))
            except ValueError:
                raise InputError(f"{flag}: {part.strip()!r} is not a valid value") from None
    if not out:
        raise InputError(f"{flag}: give at least one value")
    return out
