"""``gavelsched usage [--by user|entity|type] [--since T] [--json]``: GPU-hours and cost of
the jobs' runs at the prices in force when they ran, from the scheduler's store, as a
table (most GPU-hours first, and the totals: the sum over the runs) or as JSON
(``UsageReport.to_dict``). A door over ``Client.usage`` (docs/api.md); the report is
``gavelsched/daemon/accounting.py``'s."""

from __future__ import annotations

import argparse
import json
import time

from ..client.errors import InputError
from ..daemon.accounting import BY, UsageReport, parse_since
from .connection import api, connection_flags


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "usage", parents=[connection_flags()],
        help="GPU-hours and cost by user, entity or worker type",
        description="GPU-hours and cost (at the price per GPU-hour in force when each run "
                    "ran) of the jobs' runs, from the scheduler's store, by user, entity "
                    "(team) or worker type. A run counts once it has ended; the totals are "
                    "the sum over the runs. '-' stands for no user, entity or type.")
    p.add_argument("--by", choices=BY, default="user",
                   help="what each line is (default: user)")
    p.add_argument("--since", metavar="T",
                   help="only what ran after T (a run that began before counts from T): a "
                        "date or time (2026-11-01, 2026-11-01T12:00; UTC unless it names a "
                        "zone), a Unix time, or an age (7d, 12h, 30m)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=usage)


def usage(args: argparse.Namespace) -> int:
    since = 0.0
    if args.since is not None:
        try:
            since = parse_since(args.since, time.time())
        except ValueError as err:
            raise InputError(f"--{err}") from None
    report = api(args).usage(args.by, since)
    print(json.dumps(report.to_dict()) if args.json else usage_table(report))
    return 0


def usage_table(report: UsageReport) -> str:
    """The report as a table: one line per key (the ``by`` in capitals: USER, ENTITY or
    TYPE), GPU-HOURS, COST in dollars, RUNS and distinct JOBS, and a TOTAL line (its JOBS
    left blank: a job may run on several types)."""
    since = ("since " + time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(report.since_unix))
             if report.since_unix > 0 else "since the first run")
    rows = [(x.key, f"{x.gpu_hours:.2f}", f"${x.cost:.2f}", str(x.runs), str(x.jobs))
            for x in report.lines]
    rows.append(("TOTAL", f"{report.gpu_hours:.2f}", f"${report.cost:.2f}", str(report.runs),
                 ""))
    head = (report.by.upper(), "GPU-HOURS", "COST", "RUNS", "JOBS")
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]

    def line(row) -> str:
        return "  ".join([row[0].ljust(widths[0])] +
                         [v.rjust(w) for v, w in zip(row[1:], widths[1:])]).rstrip()
    return "\n".join([f"usage by {report.by} {since}", line(head), *map(line, rows)])
