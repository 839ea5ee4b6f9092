"""``gavelsched simulate``: replay a trace (or a generated one) in the simulator.

With no arguments it generates a small heterogeneous trace and replays it on the default
cluster, printing a readable summary. ``gavelsched simulate sweep`` runs rates x seeds x
policies in parallel and plots average JCT against input job rate.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import InputError, sweep
from .args import counts_text, seed
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

DEFAULT_POLICY = "max_min_fairness_perf"
DEFAULT_JOBS = 100
DEFAULT_RATE = 20.0


def register(subparsers) -> None:
    fmt = argparse.ArgumentDefaultsHelpFormatter
    p = subparsers.add_parser(
        "simulate", formatter_class=fmt,
        help="replay a trace in the simulator (no arguments: a small generated demo)",
        description="Replay a trace on a simulated heterogeneous cluster under a policy, "
                    "with Gavel's round-based mechanism (thesis §5.5), and report average "
                    "JCT, makespan, utilisation, cost and SLO violations. Without --trace, "
                    "a trace of --jobs jobs arriving at --rate jobs/hour is generated "
                    "(thesis §5.7.1). 'simulate sweep -h' describes sweeps.")
    add_common_flags(p)
    p.add_argument("--trace", type=Path, metavar="PATH",
                   help="trace file: .jsonl (native) or .trace (Gavel); default: generate one")
    p.add_argument("--policy", default=DEFAULT_POLICY, metavar="NAME", help="policy name")
    p.add_argument("--jobs", type=int, default=DEFAULT_JOBS, metavar="N",
                   help="jobs in the generated trace (without --trace)")
    p.add_argument("--rate", type=float, default=DEFAULT_RATE, metavar="JOBS_PER_HOUR",
                   help="arrival rate of the generated trace (0: all at t=0)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the generated trace, the "
                   "policy and the mechanism")
    p.add_argument("--window", metavar="FIRST:LAST",
                   help="average the JCT of job ids FIRST..LAST-1 only, and stop once they "
                        "have all finished")
    p.add_argument("--json", type=Path, metavar="OUT",
                   help="write the Simulation result JSON here ('-' for stdout)")
    p.add_argument("--plot", type=Path, metavar="DIR",
                   help="write JCT CDF, allocation and utilisation plots into DIR")
    p.add_argument("--type-use", action="store_true",
                   help="also report where each job type ran: its GPU-hours, and their "
                        "share on each worker type (in the summary and the --json)")
    p.add_argument("--price-trace", type=Path, metavar="PATH",
                   help="JSON/YAML {type: [[time_s, $/h], ...]}: prices that change over "
                        "time; each change re-solves the policy")
    p.add_argument("--mixed-jobs", choices=("flagged", "all"), default="flagged",
                   help="with a *_mixed policy, which jobs may run on several GPU types at "
                        "once (VirtualFlow): those whose trace line says \"mixed\": true, "
                        "or all")
    p.add_argument("--mixed-fraction", type=float, default=0.0, metavar="F",
                   help="generated traces: mark this fraction of jobs mixed-capable")
    p.add_argument("--elastic-fraction", type=float, default=0.0, metavar="F",
                   help="generated traces: make this fraction of multi-GPU jobs elastic "
                        "(down to a power of two from 1 .. scale_factor/2; *_mixed policies)")
    p.add_argument("--ftf", action="store_true",
                   help="also replay the trace under 'isolated' (1/n of each type per job) "
                        "and report each job's finish-time fairness rho = JCT / isolated JCT "
                        "(thesis §5.4.2)")
    p.set_defaults(func=run)

    sub = p.add_subparsers(dest="simulate_command", metavar="sweep")
    sweep.register(sub)


# ---- simulate ---------------------------------------------------------------------------
def run(args: argparse.Namespace) -> int:
    from simulator import PriceTraceError, SimulationError

    try:
        return _run(args)
    except (PriceTraceError, SimulationError) as err:
        raise InputError(str(err)) from None


def _run(args: argparse.Namespace) -> int:
    from simulator import PriceTrace, SimConfig, make_policy, simulate
    from simulator.plots import write_plots
    from traces.profiles import table_for_types

    from .solve import parse_options

    cluster = parse_cluster(args.cluster)
    table = table_for_types(load_throughputs(args.throughputs), cluster)
    window = parse_window(args.window) if args.window else None
    entities = parse_entities(args.entities) if args.entities else None
    gpus_per_server = parse_gpus_per_server(args.gpus_per_server)
    prices = parse_prices(args.prices, cluster)
    jobs, source = _jobs(args, table, cluster, entities)
    if window is not None and window[0] >= len(jobs):
        raise InputError(f"--window {args.window}: the trace has {len(jobs)} jobs")
    price_trace = PriceTrace.load(args.price_trace) if args.price_trace else None
    if entities is not None:
        _check_entities(jobs, entities)
    policy = make_policy(args.policy, seed=args.seed, **parse_options(args.option))
    core = _core_config(args, table, cluster, policy).but(mixed_jobs=args.mixed_jobs)
    sim = SimConfig(window=window, record_timeline=args.plot is not None,
                    record_type_use=args.type_use,
                    preemption_overhead_s=preemption_overheads(args.preemption_overhead, jobs, table),
                    estimate_pairs=args.estimate_pairs,
                    estimator=estimator_config(args.profiled_fraction),
                    priors=(table_for_types(load_throughputs(args.priors), cluster)
                            if args.priors else None),
                    plan_lead_s=plan_lead(args), arrival_grace_s=arrival_grace(args))
    if not args.quiet:
        print(f"{source} on {counts_text(cluster)}, policy {args.policy}", file=sys.stderr)
    warn_long_replay("this replay runs",
                     rounds_at_least(jobs, table, cluster, args.round_seconds),
                     args.round_seconds)
    result = simulate(jobs, table, cluster, policy, core_config=core, sim=sim,
                      gpus_per_server=gpus_per_server, prices=prices, price_trace=price_trace,
                      entities=entities, seed=args.seed, progress=not args.quiet)
    to_stdout = args.json is not None and str(args.json) == "-"
    print(result.summary(), file=sys.stderr if to_stdout else sys.stdout)
    output = result.to_dict()
    if args.ftf:
        from simulator.fairness import finish_time_fairness
        alone = simulate(jobs, table, cluster, "isolated", sim=SimConfig(window=window),
                         gpus_per_server=gpus_per_server, seed=args.seed, progress=not args.quiet)
        ftf = finish_time_fairness(result, alone, window)
        output["ftf"] = ftf.to_dict()
        if ftf.per_job:
            print(f"finish-time fairness rho: mean {ftf.mean:.3f}, max {ftf.worst:.3f}, "
                  f"{ftf.unfair_share:.1%} of jobs above 1 (vs isolated)",
                  file=sys.stderr if to_stdout else sys.stdout)
    if args.json is not None:
        text = json.dumps(output, indent=2)
        if str(args.json) == "-":
            print(text)
        else:
            args.json.write_text(text + "\n")
    if args.plot is not None:
        paths = write_plots(result, args.plot)
        if not args.quiet:
            print("plots: " + ", ".join(str(p) for p in paths), file=sys.stderr)
    return 0


# ---- inputs -----------------------------------------------------------------------------
def _check_entities(jobs, entities) -> None:
    for i, job in enumerate(jobs):
        if job.entity is not None and job.entity not in entities:
            raise InputError(f"--entities: job {i} names entity {job.entity!r}, which is not "
                             f"defined (defined: {', '.join(sorted(entities))})")


def _jobs(args, table, cluster, entities=None):
    from traces.formats import load_trace
    from traces.generator import MAX_JOBS, MAX_RATE_PER_HOUR, generate_trace

    if args.trace is not None:
        if args.trace.is_dir():
            raise IsADirectoryError(21, "Is a directory", str(args.trace))
        jobs = load_trace(args.trace, table=table, cluster=cluster)
        if not jobs:
            raise InputError(f"{args.trace}: the trace has no jobs")
        return jobs, f"{args.trace} ({len(jobs)} jobs)"
    if not 1 <= args.jobs <= MAX_JOBS:
        raise InputError(f"--jobs: must be between 1 and {MAX_JOBS}, got {args.jobs}")
    if not 0 <= args.rate <= MAX_RATE_PER_HOUR:
        raise InputError(f"--rate: must be in [0, {MAX_RATE_PER_HOUR:g}] jobs/hour, got "
                         f"{args.rate}")
    try:
        jobs = generate_trace(args.jobs, args.rate, table=table, seed=args.seed,
                              multi_gpu=args.multi_gpu, entities=tuple(entities or ()),
                              mixed_fraction=getattr(args, "mixed_fraction", 0.0),
                              elastic_fraction=getattr(args, "elastic_fraction", 0.0))
    except ValueError as err:
        raise InputError(f"generating a trace: {err}") from None
    from traces.formats import validate_trace
    validate_trace(jobs, table, cluster, "<generated trace>")
    kind = "multi-GPU" if args.multi_gpu else "single-GPU"
    return jobs, (f"generated {len(jobs)} {kind} jobs at {args.rate:g} jobs/hour "
                  f"(seed {args.seed})")


def _core_config(args, table, cluster, policy):
    """The core's config for ``policy``, from the traits it declares."""
    from gavelsched.core.driver import config_for

    types = tuple(t for t, n in cluster.items())
    return config_for(policy, table, types, seed=args.seed, round_seconds=args.round_seconds,
                      **core_options(args))
