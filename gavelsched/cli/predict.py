"""``gavelsched predict JOB.yaml``: if I submit this job now, when does it finish? A door over
``Client.predict`` (docs/api.md): the scheduler's live state replayed in the simulator with
the job added, nothing submitted; it prints the job's predicted start and finish (and why
the policy would refuse it, when it would: strict SLOs, a budget) and how much later (or
earlier, and then why) each other job finishes (``--json``: as JSON)."""

from __future__ import annotations

import argparse
import json

from . import InputError
from .connection import api, connection_flags


def register(subparsers) -> None:
    p = subparsers.add_parser("predict", parents=[connection_flags()],
                              help="if I submit this job now, when does it finish?",
                              description="Replay the scheduler's live state in the "
                                          "simulator with JOB.yaml added (arriving now, "
                                          "the catalog's throughputs), without submitting "
                                          "it: its predicted start and finish (or why "
                                          "the policy would refuse it), and how much "
                                          "later (or earlier) each other job finishes.")
    p.add_argument("job", metavar="JOB.yaml")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=predict)


def replayed(run):
    """(ETAs, None), or ({}, why) when the live state cannot be replayed (``status
    --eta``)."""
    from simulator import SimulationError

    from ..client.errors import one_line
    try:
        return run(), None
    except (SimulationError, ValueError) as err:
        return {}, one_line(err)


def predict(args: argparse.Namespace) -> int:
    """The job's predicted start and finish if submitted now, and the change in every
    other job's finish; submits nothing."""
    from ..client.errors import NoRates
    from ..client.request import JobRequest
    from . import eta

    job = JobRequest.from_yaml(args.job)
    try:
        got = api(args).predict(job)
    except NoRates as err:
        raise InputError(f"{args.job}: {err}") from None
    state, mine = got.state, got.job
    delays = {j.id: got.delay_s(j.id) for j in state.jobs}
    if args.json:
        print(json.dumps({"job": {**eta.eta_dict(state, {eta.NEW_ID: mine})[eta.NEW_ID],
                                  "refused": mine.refused},
                          "others": {j.id: {**eta.eta_dict(state, {j.id: got.after[j.id]})[j.id],
                                            "delay_s": delays[j.id],
                                            "why": got.why_sooner.get(j.id)}
                                     for j in state.jobs}}))
        return 0
    if mine.refused:       # (the policy would refuse it: strict SLOs, a budget)
        print(f"refused by the policy: {mine.refused}")
    print(f"start  {eta.wall(state, mine.start_s)}")
    print(f"finish {eta.wall(state, mine.finish_s)}")
    if state.jobs:
        w = max(2, *(len(j.id) for j in state.jobs))
        print(f"{'id':>{w}} {'finish with it':<32} delay")
        for j in state.jobs:
            d = delays[j.id]
            why = got.why_sooner.get(j.id)
            print(f"{j.id:>{w}} {eta.wall(state, got.after[j.id].finish_s):<32} "
                  f"{'-' if d is None else f'{d:+.0f}s'}" + (f"  ({why})" if why else ""))
    return 0
