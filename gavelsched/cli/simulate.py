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

from . import InputError
from .args import parse_counts

DEFAULT_CLUSTER = "v100=36,p100=36,k80=36"
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
    _common(p)
    p.add_argument("--trace", type=Path, metavar="PATH",
                   help="trace file: .jsonl (native) or .trace (Gavel); default: generate one")
    p.add_argument("--policy", default=DEFAULT_POLICY, metavar="NAME", help="policy name")
    p.add_argument("--jobs", type=int, default=DEFAULT_JOBS, metavar="N",
                   help="jobs in the generated trace (without --trace)")
    p.add_argument("--rate", type=float, default=DEFAULT_RATE, metavar="JOBS_PER_HOUR",
                   help="arrival rate of the generated trace (0: all at t=0)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated trace, the "
                   "policy and the mechanism")
    p.add_argument("--window", metavar="FIRST:LAST",
                   help="average the JCT of job ids FIRST..LAST-1 only, and stop once they "
                        "have all finished")
    p.add_argument("--json", type=Path, metavar="OUT",
                   help="write the Simulation result JSON here ('-' for stdout)")
    p.add_argument("--plot", type=Path, metavar="DIR",
                   help="write JCT CDF, allocation and utilisation plots into DIR")
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
    s = sub.add_parser(
        "sweep", formatter_class=fmt, help="rates x seeds x policies in parallel",
        description="For every (policy, rate, seed), generate a trace of --jobs jobs at that "
                    "rate and simulate it; write DIR/sweep.csv and DIR/jct_vs_rate.png "
                    "(average JCT vs input job rate, as thesis Figures 5.9-5.11).")
    _common(s)
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
    s.add_argument("-o", "--output", type=Path, required=True, metavar="DIR")
    s.set_defaults(func=run_sweep)


def _common(p) -> None:
    p.add_argument("--cluster", default=DEFAULT_CLUSTER, metavar="SPEC",
                   help="workers per type: TYPE=COUNT,... (or Gavel's V100:P100:K80)")
    p.add_argument("--throughputs", type=Path, metavar="PATH",
                   help="throughput table (native YAML/JSON or Gavel JSON); default: the "
                        "shipped catalog")
    p.add_argument("--round-seconds", type=float, default=360.0, metavar="S",
                   help="round length")
    p.add_argument("--min-resolve-interval", type=float, default=1920.0, metavar="S",
                   help="re-solve the policy at most this often (Gavel: 1920 s)")
    p.add_argument("--resolve-period", type=float, default=None, metavar="S",
                   help="also re-solve this often when nothing happened, still at most once "
                        "per --min-resolve-interval (default: only on arrivals, completions, "
                        "worker changes and price changes)")
    p.add_argument("--gpus-per-server", default="1", metavar="SPEC",
                   help="GPUs per server: N for every type, TYPE=N,..., or V100:P100:K80")
    p.add_argument("--prices", metavar="SPEC",
                   help="$/GPU-hour per type: TYPE=PRICE,... (default: the catalog's)")
    p.add_argument("--multi-gpu", action="store_true",
                   help="generated traces: 30%% of jobs use 2, 4 or 8 GPUs")
    p.add_argument("--preemption-overhead", default="0", metavar="SECONDS|catalog",
                   help="checkpoint save+restore charged when a lease is not extended: "
                        "seconds for every job, or 'catalog' for per-job-type times")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a policy option, e.g. type_choice=random for fifo; repeat for "
                        "several")
    p.add_argument("--quiet", action="store_true", help="no progress bar or notes")
    p.add_argument("--estimate-pairs", action="store_true",
                   help="space-sharing policies plan on estimated co-located throughputs "
                        "(matrix completion from a few profiled pairs, thesis §5.3.3) while "
                        "jobs progress at the table's rates")
    p.add_argument("--profiled-fraction", type=float, default=0.2, metavar="F",
                   help="with --estimate-pairs: share of reference jobs each job is "
                        "profiled beside")
    p.add_argument("--entities", metavar="SPEC",
                   help="hierarchical policies (thesis §5.4.3): NAME=WEIGHT[:fifo|fairness],"
                        "... or a YAML/JSON file {NAME: {weight: W, policy: fifo}}; trace "
                        "jobs name their entity (.jsonl 'entity'), generated jobs get one "
                        "uniformly")


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

    from .solve import parse_options

    cluster = parse_cluster(args.cluster)
    table = _table(args.throughputs)
    window = parse_window(args.window) if args.window else None
    entities = parse_entities(args.entities) if args.entities else None
    jobs, source = _jobs(args, table, cluster, entities)
    if window is not None and window[0] >= len(jobs):
        raise InputError(f"--window {args.window}: the trace has {len(jobs)} jobs")
    price_trace = PriceTrace.load(args.price_trace) if args.price_trace else None
    if entities is not None:
        _check_entities(jobs, entities)
    sim = SimConfig(window=window, record_timeline=args.plot is not None,
                    preemption_overhead_s=_overheads(args.preemption_overhead, jobs),
                    estimate_pairs=args.estimate_pairs,
                    estimator=_estimator(args.profiled_fraction))
    policy = make_policy(args.policy, seed=args.seed, **parse_options(args.option))
    core = _core_config(args, table, cluster, policy).but(mixed_jobs=args.mixed_jobs)
    if not args.quiet:
        print(f"{source} on {_cluster_text(cluster)}, policy {args.policy}", file=sys.stderr)
    result = simulate(jobs, table, cluster, policy, core_config=core, sim=sim,
                      gpus_per_server=parse_gpus_per_server(args.gpus_per_server),
                      prices=_prices(args.prices, cluster), price_trace=price_trace,
                      entities=entities, seed=args.seed, progress=not args.quiet)
    to_stdout = args.json is not None and str(args.json) == "-"
    print(result.summary(), file=sys.stderr if to_stdout else sys.stdout)
    output = result.to_dict()
    if args.ftf:
        from simulator.fairness import finish_time_fairness
        alone = simulate(jobs, table, cluster, "isolated", sim=SimConfig(window=window),
                         gpus_per_server=parse_gpus_per_server(args.gpus_per_server),
                         seed=args.seed, progress=not args.quiet)
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


def run_sweep(args: argparse.Namespace) -> int:
    from simulator.sweep import SweepSpec
    from simulator.sweep import run_sweep as sweep

    cluster = parse_cluster(args.cluster)
    args.rates = _listed(args.rates, float, "--rates")
    args.seeds = _listed(args.seeds, int, "--seeds")
    args.policies = _listed(args.policies, str, "--policies")
    if args.jobs < 1:
        raise InputError(f"--jobs: must be >= 1, got {args.jobs}")
    if any(r <= 0 for r in args.rates):
        raise InputError("--rates: every rate must be > 0 jobs/hour")
    _check_resolve_flags(args)
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
                     prices=_prices(args.prices, cluster),
                     preemption_overhead=args.preemption_overhead,
                     table=_table(args.throughputs) if args.throughputs else None,
                     entities=parse_entities(args.entities) if args.entities else None,
                     estimate_pairs=args.estimate_pairs,
                     estimator=_estimator(args.profiled_fraction), policy_options=options,
                     core_options=({} if args.resolve_period is None
                                   else {"resolve_period_s": args.resolve_period}))
    _overheads(args.preemption_overhead, [])  # a bad spec fails before any process starts
    rows = sweep(args.policies, args.rates, args.seeds, spec, args.output,
                 processes=args.processes, progress=not args.quiet)
    print(f"{'policy':<32} {'rate':>6} {'seed':>5} {'avg JCT (h)':>12} {'util':>6}")
    for r in rows:
        jct = "n/a" if r["avg_jct_s"] is None else f"{r['avg_jct_s'] / 3600:.2f}"
        print(f"{r['policy']:<32} {r['rate']:>6g} {r['seed']:>5} {jct:>12} "
              f"{r['utilization']:>6.1%}")
    print(f"wrote {args.output / 'sweep.csv'} and {args.output / 'jct_vs_rate.png'}")
    return 0


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


def parse_cluster(spec: str) -> dict[str, int]:
    """``v100=36,p100=36,k80=36``, or Gavel's ``36:36:36`` (v100:p100:k80)."""
    return parse_counts(spec, what="--cluster")


def parse_gpus_per_server(spec: str) -> dict[str, int] | int:
    """``N`` (every type), ``TYPE=N,...``, or Gavel's ``V100:P100:K80``; each N >= 1."""
    return parse_counts(spec, what="--gpus-per-server", allow_zero=False, every_type=True)


def parse_window(spec: str) -> tuple[int, int]:
    first, sep, last = spec.partition(":")
    try:
        window = (int(first), int(last))
    except ValueError:
        raise InputError(f"--window: expected FIRST:LAST job ids, got {spec!r}") from None
    if not sep or not 0 <= window[0] < window[1]:
        raise InputError(f"--window: expected FIRST:LAST with 0 <= FIRST < LAST, got {spec!r}")
    return window


def parse_entities(spec: str) -> dict:
    """``NAME=WEIGHT[:fifo|fairness],...`` or a YAML/JSON file of the Problem JSON's
    ``entities`` object, as ``{name: policies.Entity}``."""
    from policies import Problem, ProblemError

    path = Path(spec)
    if path.suffix.lower() in (".yaml", ".yml", ".json") or path.is_file():
        from traces.throughputs import read_document
        try:
            raw = read_document(path)
        except OSError as err:
            raise InputError(f"--entities: cannot read {spec}: {err.strerror}") from None
        except ValueError as err:
            raise InputError(f"--entities: {err}") from None
    else:
        raw = {}
        for part in spec.split(","):
            name, sep, rest = part.strip().partition("=")
            weight, _, policy = rest.partition(":")
            if not sep or not name:
                raise InputError(f"--entities: expected NAME=WEIGHT[:fifo|fairness], got "
                                 f"{part.strip()!r}")
            try:
                raw[name] = {"weight": float(weight), "policy": policy or "fairness"}
            except ValueError:
                raise InputError(f"--entities: {name}: weight {weight!r} is not a number") \
                    from None
    try:
        return dict(Problem.from_dict({"cluster": {}, "entities": raw}).entities)
    except ProblemError as err:
        raise InputError(f"--entities: {err}") from None


def _check_entities(jobs, entities) -> None:
    for i, job in enumerate(jobs):
        if job.entity is not None and job.entity not in entities:
            raise InputError(f"--entities: job {i} names entity {job.entity!r}, which is not "
                             f"defined (defined: {', '.join(sorted(entities))})")


def _estimator(fraction: float):
    from gavelsched.estimator import EstimatorConfig
    try:
        return EstimatorConfig(profiled_fraction=fraction)
    except ValueError as err:
        raise InputError(f"--profiled-fraction: {err}") from None


def _prices(spec: str | None, cluster) -> dict[str, float]:
    if spec:
        out = {}
        for part in spec.split(","):
            name, sep, price = part.partition("=")
            try:
                out[name.strip()] = float(price)
            except ValueError:
                raise InputError(f"--prices: expected TYPE=PRICE[,...], got {part!r}") from None
            if not sep or out[name.strip()] < 0:
                raise InputError(f"--prices: expected TYPE=PRICE >= 0, got {part!r}")
        return out
    from traces.catalog import default_prices
    return {t: p for t, p in default_prices().items() if t in cluster}


def _table(path: Path | None):
    if path is None:
        from traces.catalog import default_table
        return default_table()
    from traces.throughputs import load_table
    return load_table(path)


def _jobs(args, table, cluster, entities=None):
    from traces.formats import load_trace
    from traces.generator import generate_trace

    if args.trace is not None:
        if args.trace.is_dir():
            raise IsADirectoryError(21, "Is a directory", str(args.trace))
        jobs = load_trace(args.trace, table=table, cluster=cluster)
        if not jobs:
            raise InputError(f"{args.trace}: the trace has no jobs")
        return jobs, f"{args.trace} ({len(jobs)} jobs)"
    if args.jobs < 1:
        raise InputError(f"--jobs: must be >= 1, got {args.jobs}")
    if args.rate < 0:
        raise InputError(f"--rate: must be >= 0, got {args.rate}")
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


def _overheads(spec: str, jobs) -> dict[str, float]:
    from simulator.config import preemption_overheads
    try:
        return preemption_overheads(spec, (j.job_type for j in jobs))
    except ValueError as err:
        raise InputError(f"--preemption-overhead: {err}") from None


def _core_config(args, table, cluster, policy):
    """The core's config for ``policy``, from the traits it declares."""
    from gavelsched.core.driver import config_for

    if not args.round_seconds > 0:
        raise InputError(f"--round-seconds: must be > 0, got {args.round_seconds}")
    types = tuple(t for t, n in cluster.items())
    _check_resolve_flags(args)
    return config_for(policy, table, types, seed=args.seed, round_seconds=args.round_seconds,
                      min_resolve_interval_s=args.min_resolve_interval,
                      resolve_period_s=args.resolve_period)


def _check_resolve_flags(args) -> None:
    if args.min_resolve_interval < 0:
        raise InputError(f"--min-resolve-interval: must be >= 0, got {args.min_resolve_interval}")
    if args.resolve_period is not None and not args.resolve_period > 0:
        raise InputError(f"--resolve-period: must be > 0 seconds, got {args.resolve_period}")


def _cluster_text(cluster) -> str:
    return ",".join(f"{t}={n}" for t, n in cluster.items())
