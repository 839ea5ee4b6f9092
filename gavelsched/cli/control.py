"""Job control and the scheduler's settings, doors over ``gavelsched.client`` (docs/api.md;
issue #28): ``hold JOB``, ``release JOB``, ``update JOB --priority-weight W --entity E``
(a job, or every copy of an array) and ``reload`` (admins: re-read the cluster file's
entities, policy options, prices and users, as SIGHUP does).

A user may act only on their own jobs; anything else is refused (PERMISSION_DENIED) with
one line on stderr and exit code 2, as every refusal of the scheduler is.
"""

from __future__ import annotations

import argparse

from . import InputError
from .connection import api, connection_flags


def register(subparsers) -> None:
    common = connection_flags()
    p = subparsers.add_parser(
        "hold", parents=[common], help="keep a job from being scheduled",
        description="Hold a job (or every copy of an array): a queued or preempted job is "
                    "not scheduled until released; a running one goes on to the end of its "
                    "lease, checkpoints there and is held then. Status shows it held, with "
                    "the reason.")
    p.add_argument("id", help="the job id, or an array's id")
    p.add_argument("--reason", default="", help="why (shown by status and history)")
    p.set_defaults(func=hold)
    p = subparsers.add_parser("release", parents=[common], help="undo hold",
                              description="Release a held job (or array): it waits for its "
                                          "next round again.")
    p.add_argument("id", help="the job id, or an array's id")
    p.set_defaults(func=release)
    p = subparsers.add_parser(
        "update", parents=[common], help="change a job's priority weight or entity",
        description="Change a job (or every copy of an array) not ended; the next round "
                    "is planned with the change.")
    p.add_argument("id", help="the job id, or an array's id")
    p.add_argument("--priority-weight", type=float, default=None, metavar="W",
                   help="its new priority weight (> 0)")
    p.add_argument("--entity", default=None, metavar="E",
                   help="its new entity (one of the cluster's, and yours)")
    p.set_defaults(func=update)
    p = subparsers.add_parser(
        "reload", parents=[common], help="re-read the cluster file's settings (admins)",
        description="Make the scheduler re-read its cluster file: entities (weights, "
                    "policies, GPU caps), policy_options, prices and users_file, in force "
                    "from the next round; running jobs keep running. A file that does not "
                    "load is refused with one line naming the key, and the settings in "
                    "force stay. Sending the scheduler SIGHUP does the same.")
    p.set_defaults(func=reload)


def hold(args: argparse.Namespace) -> int:
    print(api(args).hold(args.id, args.reason))
    return 0


def release(args: argparse.Namespace) -> int:
    print(api(args).release(args.id))
    return 0


def update(args: argparse.Namespace) -> int:
    if args.priority_weight is None and args.entity is None:
        raise InputError("update: give --priority-weight W or --entity E")
    if args.priority_weight is not None and not args.priority_weight > 0:
        raise InputError(f"--priority-weight: must be > 0, got {args.priority_weight}")
    print(api(args).update(args.id, priority_weight=args.priority_weight,
                           entity=args.entity))
    return 0


def reload(args: argparse.Namespace) -> int:
    print(api(args).reload())
    return 0
