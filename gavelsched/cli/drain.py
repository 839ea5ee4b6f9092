"""``gavelsched drain ID``: a worker server out of service for maintenance, and back with
``--undo`` (docs/runtime.md, "Draining a worker"); ``--wait`` waits until no job runs on
it. A door over ``Client.drain`` and ``Client.wait_drained`` (docs/api.md)."""

from __future__ import annotations

import argparse
import sys

from . import InputError
from .connection import api, connection_flags


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "drain", parents=[connection_flags()],
        help="take a worker server out of service, or put it back",
        description="Take a worker server (its id in `gavelsched status`) out of service for "
                    "maintenance: nothing new is planned on it from the next round's plan, "
                    "and the jobs on it go on to the end of their leases, checkpoint there "
                    "as at any round's end and resume elsewhere. Stop the worker once it is "
                    "drained (no job runs on it; --wait waits for that). It stays out of "
                    "service when it registers again and across scheduler restarts, until "
                    "--undo.")
    p.add_argument("id", type=int, help="the worker server's id")
    p.add_argument("--undo", action="store_true", help="put the server back in service")
    p.add_argument("--wait", action="store_true",
                   help="wait until no job runs on it (at most --timeout seconds)")
    p.add_argument("--timeout", type=float, default=600.0, metavar="S",
                   help="how long --wait waits (exit 1 if jobs still run on it then)")
    p.set_defaults(func=drain)


def drain(args: argparse.Namespace) -> int:
    from ..client.api import check_server_id

    check_server_id(args.id)
    if args.wait and not args.timeout > 0:
        raise InputError(f"--timeout: must be > 0 seconds, got {args.timeout}")
    client = api(args)
    reply = client.drain(args.id, undo=args.undo)
    print(reply.message, flush=True)
    if not (args.wait and reply.drained and reply.runs):
        return 0
    verdict = client.wait_drained(args.id, args.timeout)
    if verdict == "undrained":
        print(f"worker {args.id} is no longer drained (put back by someone else?)",
              file=sys.stderr)
        return 1
    if verdict == "drained":
        print(f"worker {args.id} is drained: no job runs on it")
        return 0
    print(f"worker {args.id} still has jobs running after {args.timeout:g} s", file=sys.stderr)
    return 1
