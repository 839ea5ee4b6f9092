"""``gavelsched trace generate|import|show``: make, convert and inspect job traces.

Traces are ``.jsonl`` (native) or ``.trace`` (Gavel's tab-separated format), chosen by the
output file's extension (docs/design.md, Trace files). Generation follows thesis §5.7.1
(``--mix gavel``) or Sia's workload (``--mix sia``: ``traces.sia``, Sia §4.1).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from traces import default_table, generate_trace, load_table, load_trace, write_trace
from traces.formats import trace_format
from traces.importers import IMPORTERS
from traces.sia import SIA_JOBS, SIA_RATE_PER_HOUR, generate_sia_trace, sia_table
from traces.summary import summarize
from traces.types import ThroughputTable

from . import InputError
from .args import parse_counts, seed

_FORMATS_HELP = "the extension picks the format: .jsonl (native) or .trace (Gavel)"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "trace", help="generate, import and inspect job traces",
        description="Generate synthetic traces as in the Gavel evaluation (thesis §5.7.1), "
                    "import public cluster traces, and summarize trace files.")
    commands = parser.add_subparsers(dest="trace_command", metavar="SUBCOMMAND")
    commands.required = True
    _add_generate(commands)
    _add_import(commands)
    _add_show(commands)


def _add_generate(commands) -> None:
    p = commands.add_parser(
        "generate", help="generate a synthetic trace (thesis §5.7.1, or Sia-like)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Generate a trace. --mix gavel, as in thesis §5.7.1: job types uniform "
                    "over the throughput table; V100 durations of 10^x minutes, x ~ U[1.5, 3] "
                    "w.p. 0.8 and U[3, 4] otherwise; total steps = duration x V100 steps/s; "
                    "Poisson arrivals (the first at t=0). --mix sia, as in Sia (SOSP'23 "
                    "§4.1): cifar10, deepspeech2, bert, yolov3 and imagenet in the shares and "
                    "GPU counts (4-16) of Sia's Helios traces, each application's fixed total "
                    "steps, and Poisson arrivals whose rate follows the Helios 8-hour "
                    "profile; its table traces/data/sia.yaml (t4, a100, rtx) declares each "
                    "application's restart cost. Sia's cluster: --cluster "
                    "t4=24,a100=16,rtx=24.",
        epilog="examples: gavelsched trace generate --jobs 5000 --rate 3.0 --multi-gpu "
               "--seed 1 -o continuous-multiple.jsonl; gavelsched trace generate --mix sia "
               "--seed 1 -o sia.jsonl")
    p.add_argument("--mix", choices=("gavel", "sia"), default="gavel",
                   help="the workload: 'gavel' (thesis §5.7.1) or 'sia' (Sia's five "
                        "applications, GPU counts and restart costs)")
    p.add_argument("--jobs", type=int, metavar="N",
                   help=f"number of jobs (required with --mix gavel; {SIA_JOBS} with --mix "
                        "sia)")
    p.add_argument("--rate", type=float, metavar="JOBS_PER_HOUR",
                   help="mean arrival rate λ in jobs per hour; 0 makes a static trace (every "
                        f"job arrives at t=0) (required with --mix gavel; {SIA_RATE_PER_HOUR:g} "
                        "with --mix sia)")
    p.add_argument("--multi-gpu", action="store_true",
                   help="scale factors 1/2/4/8 at 70/10/15/5%% ('continuous-multiple'); "
                        "otherwise every job uses one GPU")
    p.add_argument("--priorities", action="store_true",
                   help="give 20%% of jobs priority weight 5 (others 1)")
    p.add_argument("--slos", action="store_true",
                   help="give every job an SLO of 1.2x, 2x or 10x its V100 duration")
    p.add_argument("--entities", metavar="NAME,...",
                   help="put every job in one of these entities, uniformly (hierarchical "
                        "policies, thesis §5.4.3; .jsonl only)")
    p.add_argument("--mixed-fraction", type=float, default=0.0, metavar="F",
                   help="mark this fraction of jobs 'mixed': they may run on several GPU "
                        "types at once under a *_mixed policy (VirtualFlow; .jsonl only)")
    p.add_argument("--elastic-fraction", type=float, default=0.0, metavar="F",
                   help="make this fraction of multi-GPU jobs elastic: they may also run on "
                        "fewer GPUs of one type, down to a power of two drawn from 1 .. "
                        "scale_factor/2 (--mix sia: down to 1), under a *_mixed policy "
                        "(Varuna morphing; .jsonl only)")
    p.add_argument("--seed", type=seed, default=0, help="random seed; same seed, same trace")
    p.add_argument("--throughputs", type=Path, metavar="PATH",
                   help="throughput table (native YAML/JSON or Gavel JSON) whose job types "
                        "and V100 steps/s to use [default: the built-in catalog; with --mix "
                        "sia, traces/data/sia.yaml, which it must run the mix on]")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="PATH",
                   help=f"trace file to write; {_FORMATS_HELP}")
    p.set_defaults(func=run_generate)


def _add_import(commands) -> None:
    p = commands.add_parser(
        "import", help="convert a public cluster trace (e.g. Philly) into a trace",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Convert a public cluster trace into a gavelsched trace. Philly "
                    "(cluster_job_log JSON): GPU counts become scale factors (rounded up to "
                    "1/2/4/8), run times become V100 durations, and each job gets a job type "
                    "drawn uniformly with the seed; total steps = duration x V100 steps/s.")
    p.add_argument("input", type=Path, metavar="IN", help="the public trace file")
    p.add_argument("--format", dest="source_format", choices=sorted(IMPORTERS),
                   required=True, help="format of IN")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="OUT",
                   help=f"trace file to write; {_FORMATS_HELP}")
    p.add_argument("--seed", type=seed, default=0, help="seed of the job-type draws")
    p.add_argument("--include-killed", action="store_true",
                   help="also import jobs the user killed (status 'Killed'); by default only "
                        "jobs that finished ('Pass')")
    p.add_argument("--max-jobs", type=int, metavar="N",
                   help="keep only the N earliest submissions")
    p.add_argument("--throughputs", type=Path, metavar="PATH",
                   help="throughput table to take job types and steps/s from "
                        "[default: the built-in catalog]")
    p.set_defaults(func=run_import)


def _add_show(commands) -> None:
    p = commands.add_parser(
        "show", help="summarize a trace file",
        description="Print a short summary of a trace: number of jobs, arrival span, job "
                    "types, scale factors, priorities, SLOs and entities. With --cluster or "
                    "--throughputs, also check that every job can run.")
    p.add_argument("trace", type=Path, metavar="PATH", help="a .jsonl or .trace file")
    p.add_argument("--throughputs", type=Path, metavar="PATH",
                   help="throughput table to check job types against and to compute V100 "
                        "GPU-hours of work with [default: the built-in catalog, not checked]")
    p.add_argument("--cluster", metavar="SPEC",
                   help="check that every job fits, e.g. v100=36,p100=36,k80=36")
    p.set_defaults(func=run_show)


# ----------------------------------------------------------------------------- commands

def run_generate(args: argparse.Namespace) -> int:
    from traces.generator import MAX_JOBS, MAX_RATE_PER_HOUR

    if args.mix == "sia":
        for flag, on in (("--multi-gpu", args.multi_gpu), ("--slos", args.slos)):
            if on:
                raise InputError(f"{flag}: not with --mix sia (its jobs have Sia's GPU counts "
                                 "and no V100 durations)")
        args.jobs = SIA_JOBS if args.jobs is None else args.jobs
        args.rate = SIA_RATE_PER_HOUR if args.rate is None else args.rate
    for flag, value in (("--jobs", args.jobs), ("--rate", args.rate)):
        if value is None:
            raise InputError(f"{flag} is required with --mix gavel")
    if not 0 <= args.jobs <= MAX_JOBS:
        raise InputError(f"--jobs must be between 0 and {MAX_JOBS}, got {args.jobs}")
    if not 0 <= args.rate <= MAX_RATE_PER_HOUR:
        raise InputError(f"--rate must be in [0, {MAX_RATE_PER_HOUR:g}] jobs per hour, got "
                         f"{args.rate:g}")
    fmt = trace_format(args.output)  # fail on a bad extension before doing any work
    entities = [e.strip() for e in (args.entities or "").split(",") if e.strip()]
    if args.entities is not None and not entities:
        raise InputError("--entities: expected NAME,NAME,...")
    if entities and fmt != "jsonl":
        raise InputError(f"--entities: {args.output}: Gavel's .trace format has no entity "
                         "field; write a .jsonl trace")
    options = dict(seed=args.seed, priorities=args.priorities, entities=entities,
                   mixed_fraction=args.mixed_fraction, elastic_fraction=args.elastic_fraction)
    try:
        if args.mix == "sia":
            table = sia_table() if args.throughputs is None else load_table(args.throughputs)
            jobs = generate_sia_trace(args.jobs, args.rate, table=table, **options)
        else:
            jobs = generate_trace(args.jobs, args.rate, table=_table(args.throughputs),
                                  multi_gpu=args.multi_gpu, slos=args.slos, **options)
    except ValueError as err:
        raise InputError(str(err)) from None
    write_trace(args.output, jobs)
    span_h = jobs[-1].arrival_s / 3600 if jobs else 0.0
    print(f"wrote {len(jobs)} jobs to {args.output} (arrivals over {span_h:.2f} h)")
    return 0


def run_import(args: argparse.Namespace) -> int:
    if args.max_jobs is not None and args.max_jobs < 0:
        raise InputError(f"--max-jobs must be >= 0, got {args.max_jobs}")
    trace_format(args.output)
    statuses = ("Pass", "Killed") if args.include_killed else ("Pass",)
    try:
        result = IMPORTERS[args.source_format](
            args.input, table=_table(args.throughputs), seed=args.seed, statuses=statuses,
            max_jobs=args.max_jobs)
    except ValueError as err:
        raise InputError(str(err)) from None
    write_trace(args.output, result.jobs)
    skipped = ", ".join(f"{n} {why}" for why, n in sorted(result.skipped.items()))
    print(f"wrote {len(result.jobs)} jobs to {args.output}"
          + (f" (skipped: {skipped})" if skipped else ""))
    return 0


def run_show(args: argparse.Namespace) -> int:
    cluster = parse_counts(args.cluster, what="--cluster") if args.cluster else None
    checked = args.throughputs is not None or cluster is not None
    table = _table(args.throughputs)
    jobs = load_trace(args.trace, table=table if checked else None, cluster=cluster)
    print(f"{args.trace} ({trace_format(args.trace)})")
    extra = [("check", "every job can run" + (f" on {args.cluster}" if cluster else ""))
             ] if checked else []
    for line in summarize(jobs, table).lines(extra=extra):
        print("  " + line)
    return 0


# ----------------------------------------------------------------------------- helpers

def _table(path: Path | None) -> ThroughputTable:
    return default_table() if path is None else load_table(path)
