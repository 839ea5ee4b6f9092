"""The flags ``gavelsched simulate`` and ``gavelsched simulate sweep`` share, and the readers
that turn flag values into simulator inputs: cluster, GPUs per server, window, entities
(thesis §5.4.3), prices, the throughput table, preemption overheads, the estimator's
config (§5.3.3) and the re-solve rule (``--resolve``, §5.3). Every refusal is an
``InputError`` naming the flag.
"""

from __future__ import annotations

import logging
import math
import re
from pathlib import Path

from . import InputError
from .args import parse_counts

DEFAULT_CLUSTER = "v100=36,p100=36,k80=36"
# ``gavelsched.core.resolving.RESOLVE_MODES``, spelt out so that the CLI's parser does not
# import the core (and the solvers) for ``--help`` (a test holds the two equal).
RESOLVE_MODES = ("gavel", "responsive")
# A replay that cannot end in fewer rounds than this is warned of (--round-seconds too short
# for the trace's jobs: a minute of rounds for every few thousand jobs' hour).
LONG_REPLAY_ROUNDS = 1_000_000

log = logging.getLogger(__name__)


def add_common_flags(p) -> None:
    """The flags of both ``simulate`` and ``simulate sweep``."""
    p.add_argument("--cluster", default=DEFAULT_CLUSTER, metavar="SPEC",
                   help="workers per type: TYPE=COUNT,... (or Gavel's V100:P100:K80)")
    p.add_argument("--throughputs", type=Path, metavar="PATH",
                   help="throughput table (native YAML/JSON or Gavel JSON); default: the "
                        "shipped catalog")
    p.add_argument("--round-seconds", type=float, default=360.0, metavar="S",
                   help="round length")
    p.add_argument("--min-resolve-interval", type=float, default=1920.0, metavar="S",
                   help="re-solve the policy at most this often (Gavel: 1920 s)")
    p.add_argument("--resolve", choices=RESOLVE_MODES, default="gavel",
                   help="when a reset event re-solves the policy: 'gavel', at most once per "
                        "--min-resolve-interval (replays match Gavel); 'responsive', at the "
                        "next round boundary while the last solve took under a tenth of a "
                        "round (the scheduler daemon's default)")
    p.add_argument("--refill", action="store_true",
                   help="give a GPU freed mid-round (its job finished) to a waiting job for "
                        "the rest of the round, as the scheduler daemon does (default: idle "
                        "until the round ends, as in Gavel)")
    p.add_argument("--plan-lead", type=float, default=0.0, metavar="S",
                   help="plan each round S seconds before the last one ends, as the "
                        "scheduler daemon does (its default: 30%% of a round, so that leases "
                        "can be extended): a job that arrives or finishes after a plan is "
                        "seen at the next one; with --refill, GPUs are refilled until the "
                        "plan (default 0: plan at the boundary, as in Gavel)")
    p.add_argument("--arrival-grace", type=float, default=0.0, metavar="S",
                   help="an idle cluster plans its round S seconds after the job that woke "
                        "it, admitting every job arrived by then, as the scheduler daemon "
                        "does (0.5 s, so that jobs submitted together share a round; "
                        "default 0: at the arrival, as in Gavel)")
    p.add_argument("--resolve-period", type=float, default=None, metavar="S",
                   help="also re-solve this often when nothing happened, still at most once "
                        "per --min-resolve-interval with --resolve gavel (default: only on "
                        "arrivals, completions, worker changes and price changes)")
    p.add_argument("--gpus-per-server", default="1", metavar="SPEC",
                   help="GPUs per server: N for every type, TYPE=N,..., or V100:P100:K80")
    p.add_argument("--prices", metavar="SPEC",
                   help="$/GPU-hour per type: TYPE=PRICE,... (default: the catalog's)")
    p.add_argument("--multi-gpu", action="store_true",
                   help="generated traces: 30%% of jobs use 2, 4 or 8 GPUs")
    p.add_argument("--preemption-overhead", default="table", metavar="SECONDS|catalog|table",
                   help="what a restart costs (checkpoint save + restore, start-up), charged "
                        "when a lease is not extended: seconds for every job, 'catalog' for "
                        "the catalog's per-job-type times, or 'table' for the restart costs "
                        "the throughput table declares (its restart_s; none if it declares "
                        "none, as the built-in catalog table and Gavel's tables do)")
    p.add_argument("--restart-rule", choices=("tenure", "gavel"), default="tenure",
                   help="'tenure': a fresh run keeps its GPUs for twice its restart (the "
                        "preemption overhead), is preferred until its restart is a fifth of "
                        "the time it held them, and keeps them to its end when its job is "
                        "within 30 restarts of it, so short rounds never thrash; policies "
                        "plan net of restarts, re-solves keep runs on their types, and "
                        "received time is reset at most once per --min-resolve-interval; "
                        "'gavel': every round is dealt afresh by priority (Gavel). Jobs "
                        "whose restarts are free are scheduled alike under both")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a policy option, e.g. type_choice=random for fifo; repeat for "
                        "several")
    p.add_argument("--quiet", action="store_true", help="no progress bar or notes")
    p.add_argument("--priors", type=Path, metavar="PATH",
                   help="replay with a scheduler's knowledge as it was (issue #20): plan and "
                        "size leases on this throughput table (the priors the daemon started "
                        "with) until a job has run, then on what its runs measured, while "
                        "jobs progress at --throughputs' rates; not with space sharing")
    p.add_argument("--estimate-pairs", action="store_true",
                   help="space-sharing policies plan on estimated co-located throughputs "
                        "(matrix completion from a few profiled pairs, thesis §5.3.3) while "
                        "jobs progress at the table's rates")
    p.add_argument("--profiled-fraction", type=float, default=0.2, metavar="F",
                   help="with --estimate-pairs: share of reference jobs each job is "
                        "profiled beside")
    p.add_argument("--pair-partners", type=int, default=0, metavar="K",
                   help="space-sharing policies (_packed, gandiva): list each job's K best "
                        "partners (pairs that beat time slicing, fewer each beyond 80,000 "
                        "choices in all, and the pairs already given time) instead of every "
                        "pair: about K n pairs, not n^2/2 (default 0: every pair, as in "
                        "Gavel; the scheduler daemon's default: 16)")
    p.add_argument("--entities", metavar="SPEC",
                   help="hierarchical policies (thesis §5.4.3): NAME=WEIGHT[:fifo|fairness]"
                        "[:MAX_GPUS],... or a YAML/JSON file {NAME: {weight: W, policy: "
                        "fifo, max_gpus: N}}; MAX_GPUS caps the GPUs an entity's jobs hold "
                        "at once, under any policy; trace jobs name their entity (.jsonl "
                        "'entity'), generated jobs get one uniformly")


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
    """``NAME=WEIGHT[:fifo|fairness][:MAX_GPUS],...`` or a YAML/JSON file of the Problem
    JSON's ``entities`` object (``{NAME: {weight, policy, max_gpus}}``), as
    ``{name: policies.Entity}``. ``MAX_GPUS`` caps the GPUs the entity's jobs hold at once
    (the mechanism's quota, any policy)."""
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
        raw = {name: entry for name, entry in map(_entity_part, spec.split(","))}
    try:
        return dict(Problem.from_dict({"cluster": {}, "entities": raw}).entities)
    except ProblemError as err:
        raise InputError(f"--entities: {err}") from None


def _entity_part(part: str) -> tuple[str, dict]:
    """One ``NAME=WEIGHT[:POLICY][:MAX_GPUS]`` of ``--entities``, as the Problem JSON's
    entity (checked there): after the weight, an integer is the cap, a word the policy."""
    name, sep, rest = part.strip().partition("=")
    weight, *extra = rest.split(":")
    if not sep or not name or len(extra) > 2:
        raise InputError(f"--entities: expected NAME=WEIGHT[:fifo|fairness][:MAX_GPUS], got "
                         f"{part.strip()!r}")
    try:
        entry: dict = {"weight": float(weight)}
    except ValueError:
        raise InputError(f"--entities: {name}: weight {weight!r} is not a number") from None
    for word in filter(None, extra):
        key = "max_gpus" if re.fullmatch(r"[0-9]{1,18}", word) else "policy"
        if key in entry:
            raise InputError(f"--entities: {name}: {key} given twice in {part.strip()!r}")
        entry[key] = int(word) if key == "max_gpus" else word
    return name, entry


def estimator_config(fraction: float):
    """``--profiled-fraction`` as the estimator's config (thesis §5.3.3)."""
    from gavelsched.estimator import EstimatorConfig
    try:
        return EstimatorConfig(profiled_fraction=fraction)
    except ValueError as err:
        raise InputError(f"--profiled-fraction: {err}") from None


def parse_prices(spec: str | None, cluster) -> dict[str, float]:
    """``--prices TYPE=PRICE,...``; without it, the catalog's prices of ``cluster``'s types."""
    if spec:
        from traces import checks

        out = {}
        for part in spec.split(","):
            name, _, price = part.partition("=")
            try:        # (no "=": the price is "", not a number)
                value = float(price)
            except ValueError:
                value = None
            if value is None or not name.strip():
                raise InputError(f"--prices: expected TYPE=PRICE[,...], got {part!r}")
            try:
                out[name.strip()] = checks.price(value, f"--prices: {name.strip()}")
            except ValueError as err:      # (checks.BadValue: one line naming the type)
                raise InputError(str(err)) from None
        return out
    from traces.catalog import default_prices
    prices = {t: p for t, p in default_prices().items() if t in cluster}
    unpriced = [t for t in cluster if t not in prices]
    if unpriced:
        logging.getLogger(__name__).warning(
            "no price for %s in the catalog: its GPU-hours add nothing to the cost (give "
            "--prices TYPE=USD_PER_GPU_HOUR)", ", ".join(unpriced))
    return prices


def load_throughputs(path: Path | None):
    """``--throughputs PATH``'s table; without it, the shipped catalog."""
    if path is None:
        from traces.catalog import default_table
        return default_table()
    from traces.throughputs import load_table
    return load_table(path)


def preemption_overheads(spec: str, jobs, table=None) -> dict[str, float]:
    """``--preemption-overhead`` (seconds, ``catalog`` or ``table``: ``table``'s declared
    restart costs) per job type of ``jobs``."""
    from simulator.config import preemption_overheads as overheads
    try:
        return overheads(spec, (j.job_type for j in jobs), table)
    except ValueError as err:
        raise InputError(f"--preemption-overhead: {err}") from None


def plan_lead(args) -> float:
    """``--plan-lead`` seconds (``SimConfig.plan_lead_s``): at least 0, shorter than a
    round; a ``--round-seconds`` that is not a finite positive number is refused first (``simulate`` and
    ``sweep`` both check it here, through ``resolve_options``)."""
    if not 0 < args.round_seconds < math.inf:
        raise InputError(f"--round-seconds: must be a finite number > 0, got "
                         f"{args.round_seconds}")
    if not 0.0 <= args.plan_lead < args.round_seconds:
        raise InputError(f"--plan-lead: must be >= 0 and shorter than --round-seconds "
                         f"({args.round_seconds:g} s), got {args.plan_lead}")
    return args.plan_lead


def arrival_grace(args) -> float:
    """``--arrival-grace`` seconds (``SimConfig.arrival_grace_s``): finite, at least 0."""
    if not 0.0 <= args.arrival_grace < float("inf"):
        raise InputError(f"--arrival-grace: must be >= 0 seconds, got {args.arrival_grace}")
    return args.arrival_grace


def core_options(args) -> dict:
    """The core's re-solve, refill, restart and pair fields from ``--resolve``,
    ``--min-resolve-interval``, ``--resolve-period``, ``--refill``, ``--plan-lead``,
    ``--restart-rule`` and ``--pair-partners``; refuses a negative interval or partner
    count, or a non-positive period."""
    if not args.min_resolve_interval >= 0:      # (NaN too)
        raise InputError(f"--min-resolve-interval: must be >= 0, got {args.min_resolve_interval}")
    if args.resolve_period is not None and not args.resolve_period > 0:
        raise InputError(f"--resolve-period: must be > 0 seconds, got {args.resolve_period}")
    if args.pair_partners < 0:
        raise InputError(f"--pair-partners: must be >= 0 (0: every pair), got "
                         f"{args.pair_partners}")
    out = {"resolve": args.resolve, "min_resolve_interval_s": args.min_resolve_interval,
           "refill_freed": args.refill, "restart_rule": args.restart_rule}
    if args.pair_partners:
        out["pair_partners"] = args.pair_partners
    lead = plan_lead(args)
    if args.refill and lead > 0:     # the daemon refills until it plans
        out["refill_until"] = 1.0 - lead / args.round_seconds
    if args.resolve_period is not None:
        out["resolve_period_s"] = args.resolve_period
    return out


def rounds_at_least(jobs, table, cluster, round_seconds: float) -> float:
    """Rounds a replay of ``jobs`` takes at least: the time some job is certainly
    unfinished (the union over jobs of its arrival to the earliest it could finish, alone on
    its fastest type), over the round. The replay jumps over the idle time between (a
    sweep's low rates), so that is not counted."""
    fastest: dict[tuple[str, int], float] = {}    # the table's, by (job type, scale factor)

    def rate(job) -> float:
        fits = [t for t, count in cluster.items() if count >= job.scale_factor]
        if job.throughputs is not None:     # (a replay's job with rates of its own)
            return max((job.throughputs.get(t, 0.0) for t in fits), default=0.0)
        key = (job.job_type, job.scale_factor)
        if key not in fastest:
            fastest[key] = max((table.get(t, *key) for t in fits), default=0.0)
        return fastest[key]

    spans = sorted((job.arrival_s, job.arrival_s + job.total_steps / steps_per_s)
                   for job in jobs if (steps_per_s := rate(job)) > 0)
    busy, reached = 0.0, -math.inf
    for start, end in spans:
        busy += max(0.0, end - max(start, reached))
        reached = max(reached, end)
    return busy / round_seconds


def warn_long_replay(what: str, rounds: float, round_seconds: float) -> None:
    """One warning, before the replay starts, when ``what`` (e.g. "this replay runs")
    takes more than ``LONG_REPLAY_ROUNDS`` rounds (``rounds``, by ``rounds_at_least``)."""
    if rounds > LONG_REPLAY_ROUNDS:
        log.warning("--round-seconds %g: %s at least %s rounds (each job alone on its "
                    "fastest type from its arrival); a longer round replays it sooner",
                    round_seconds, what, f"{int(rounds):,}")
