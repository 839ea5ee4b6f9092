"""The job commands, doors over ``gavelsched.client`` (docs/api.md): ``submit JOB.yaml``
(prints the job id; ``--count N``: an array, its id and its copies'), ``status``,
``history`` (``history JOB``: who changed the job, how and when) and ``cancel ID`` (a job or
an array).

``status`` shows the jobs not finished (``--all``: every job), as Slurm's ``squeue`` does;
``history`` every job with its times, as ``sacct`` does (``jobviews``). Both filter with
``--state S[,S]``, ``--type T`` and ``--entity E`` (the scheduler filters) and ``--slo
S[,S]`` (where each job stands against its SLO: filtered here, from the reply's ETAs), and
print ``--json``; ``status --eta`` adds each job's predicted start and finish, as the scheduler
computed them (``eta``; ``--json`` carries them always).

All take the connection flags (``connection.py``). A refused token, an unreachable
scheduler and a refused submission each end with one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import json

from ..client.api import Client
from ..client.request import JobRequest
from ..client.status import ClusterStatus
from ..daemon.statusjson import SLO_STATUSES, slo_of, status_dict
from . import InputError
from .connection import api, connection_flags
from .jobviews import eta_lines, event_lines, history_table, status_table

STATES_HELP = "queued, running, preempted, held, done, failed, cancelled"


def register(subparsers) -> None:
    common = connection_flags()
    p = subparsers.add_parser("submit", parents=[common], help="submit a job",
                              description="Submit a job; prints its id. JOB.yaml keys: "
                                          "job_type, total_steps, scale_factor (default 1), "
                                          "workload or command (neither: the job type's "
                                          "reference workload), priority_weight, slo_s, "
                                          "entity, mixed (true: the job may run on "
                                          "several GPU types at once, split with virtual "
                                          "nodes, under a *_mixed policy), "
                                          "min_scale_factor (an elastic job: it may also "
                                          "run on fewer GPUs of one type, down to this "
                                          "many, under a *_mixed policy), max_runtime_s "
                                          "(a time limit: the job stops at its next "
                                          "checkpoint once it has run that long, and "
                                          "fails with reason 'time limit'), after (a list "
                                          "of job or array ids it waits for; it is "
                                          "cancelled if one fails or is cancelled).")
    p.add_argument("job", metavar="JOB.yaml")
    p.add_argument("--count", type=int, default=None, metavar="N",
                   help="submit N copies as an array (1..10000): each is told its index "
                        "in GAVEL_ARRAY_INDEX; prints the array's id, which cancel, hold "
                        "and release take, then each copy's id")
    p.set_defaults(func=submit)
    filters = argparse.ArgumentParser(add_help=False)
    filters.add_argument("--state", metavar="S[,S...]", action="append", default=[],
                         help=f"only jobs in these states ({STATES_HELP})")
    filters.add_argument("--type", metavar="JOB_TYPE", default="",
                         help="only jobs of this job type (ResNet-50: all its batch sizes)")
    filters.add_argument("--entity", metavar="E", default="", help="only jobs of this entity")
    filters.add_argument("--mine", action="store_true", help="only my jobs (my token's user)")
    filters.add_argument("--user", metavar="NAME", default="", help="only this user's jobs")
    filters.add_argument("--slo", metavar="S[,S...]", action="append", default=[],
                         help=f"only jobs whose SLO stands so ({', '.join(SLO_STATUSES)}: "
                              "met or missed once done, missed once its deadline passed, "
                              "at_risk when the scheduler's ETA finishes past it); e.g. "
                              "--slo missed,at_risk")
    filters.add_argument("--json", action="store_true",
                         help="print JSON (docs/design.md contract, plus times and shares)")
    p = subparsers.add_parser("status", parents=[common, filters],
                              help="show the jobs not finished, and the workers",
                              description="A table of the jobs not finished (type, state, "
                                          "progress, GPUs, worker type, time since the first "
                                          "start, allocation vs received share, why it "
                                          "waits, an SLO missed or at risk by the "
                                          "scheduler's ETA) and the workers; --all or "
                                          "--state show finished jobs too.")
    p.add_argument("--all", action="store_true", help="finished jobs too")
    p.add_argument("--eta", action="store_true",
                   help="also each unfinished job's predicted start and finish, as the "
                        "scheduler computed them (its live state replayed in the "
                        "simulator after each round's plan, arrival and end); --json "
                        "always carries them")
    p.set_defaults(func=status)
    p = subparsers.add_parser("history", parents=[common, filters],
                              help="show every job with its times, or one job's history",
                              description="A table of every job, finished ones included "
                                          "(those that ended within the scheduler's "
                                          "ended_jobs_kept_s; an older one: history JOB): "
                                          "user, entity, state, when it was submitted, "
                                          "first started and ended, elapsed time (first "
                                          "start to end, or now), JCT (submission to "
                                          "completion) and steps. With a JOB: who changed "
                                          "it, how and when (submit, hold, release, "
                                          "update, cancel, and how it ended).")
    p.add_argument("job", nargs="?", default=None, metavar="JOB",
                   help="show this job's history of changes instead")
    p.set_defaults(func=history)
    p = subparsers.add_parser("cancel", parents=[common], help="cancel a job or an array",
                              description="Cancel a queued, held or running job, or every "
                                          "copy of an array not ended.")
    p.add_argument("id", help="the job id, or an array's id")
    p.set_defaults(func=cancel)


def _call(args: argparse.Namespace, method: str, request):
    """One call over the flags' connection: the way the job commands reach the scheduler."""
    return api(args).call(method, request)


def _client(args: argparse.Namespace) -> Client:
    """The API, its calls made by ``_call``."""
    return Client(lambda method, request: _call(args, method, request))


def submit(args: argparse.Namespace) -> int:
    job = JobRequest.from_yaml(args.job)
    if args.count is None:
        print(_client(args).submit(job))
        return 0
    made = _client(args).submit_array(job, args.count)
    print("\n".join((made.array_id,) * bool(made.array_id) + made.job_ids))
    return 0


def cancel(args: argparse.Namespace) -> int:
    _client(args).cancel(args.id)
    print(f"cancelled {args.id}")
    return 0


def _filters(args: argparse.Namespace, *, active: bool) -> dict:
    """``Client.status``'s filters from the flags (``active``: only jobs not finished,
    unless states are named)."""
    states = [s.strip() for flag in args.state for s in flag.split(",") if s.strip()]
    return {"states": states, "job_type": args.type, "entity": args.entity,
            "active": active and not states, "mine": args.mine, "user": args.user}


def _show(args: argparse.Namespace, filters: dict, table, *, eta: bool = False) -> int:
    """``status`` / ``history`` of the jobs ``filters`` pick: the JSON straight from the
    reply with ``--json`` (its one writer, ``status_dict``: at 50,000 jobs the typed records
    in between cost seconds), else ``table`` of the reply itself (and the ETAs)."""
    wanted = _slo_wanted(args)               # (refused before any call)
    reply = _by_slo(_client(args).status_reply(**filters), wanted)
    if args.json:   # (dumps: the C encoder; dump would encode in Python)
        print(json.dumps(status_dict(reply)))    # (--json carries the scheduler's ETAs always)
        return 0
    print("\n".join([*table(reply), *(eta_lines(ClusterStatus.from_pb(reply)) if eta else ())]))
    return 0


def _slo_wanted(args: argparse.Namespace) -> frozenset[str]:
    """The SLO statuses ``--slo`` names (none: every job), each checked."""
    wanted = frozenset(s.strip() for flag in args.slo for s in flag.split(",") if s.strip())
    unknown = sorted(wanted - set(SLO_STATUSES))
    if unknown:
        raise InputError(f"--slo: unknown status {', '.join(unknown)} (one of "
                         f"{', '.join(SLO_STATUSES)})")
    return wanted


def _by_slo(reply, wanted: frozenset[str]):
    """The reply with only the jobs whose SLO stands in ``wanted`` (none: the reply)."""
    if not wanted:
        return reply
    now = reply.now_s
    jobs = [j for j in reply.jobs if slo_of(j, now) in wanted]
    reply.ClearField("jobs")
    reply.jobs.extend(jobs)
    return reply


def status(args: argparse.Namespace) -> int:
    return _show(args, _filters(args, active=not args.all), status_table, eta=args.eta)


def history(args: argparse.Namespace) -> int:
    if args.job is None:
        return _show(args, _filters(args, active=False), history_table)
    events = _client(args).history(args.job)
    if args.json:
        print(json.dumps([e.to_dict() for e in events]))
    else:
        print("\n".join(event_lines(events)))
    return 0
