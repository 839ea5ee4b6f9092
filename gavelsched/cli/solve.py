"""``gavelsched solve PROBLEM.json --policy NAME``: one policy solve, Allocation JSON out."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from policies import Problem, get_policy, policy_names

from . import InputError


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "solve", help="solve one scheduling problem with a policy",
        description="Read a Problem JSON (DESIGN.md), solve it with a policy and print the "
                    "Allocation JSON: for every job (or 'a+b' pair) the fraction of time on "
                    "each worker type.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("problem", type=Path, help="Problem JSON file ('-' reads stdin)")
    parser.add_argument("--policy", required=True, metavar="NAME",
                        help=f"one of: {', '.join(policy_names())}")
    parser.add_argument("--partitions", type=int, default=1, metavar="K",
                        help="POP: split into K random sub-problems solved independently")
    parser.add_argument("--solver", default=None, help="cvxpy solver to use (e.g. HIGHS)")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT",
                        help="write the Allocation JSON here instead of stdout")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    text = sys.stdin.read() if str(args.problem) == "-" else args.problem.read_text()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"{args.problem}: not valid JSON (line {err.lineno}: {err.msg})") from None
    problem = Problem.from_dict(data)
    options = {"partitions": args.partitions}
    if args.solver:
        options["solver"] = args.solver
    allocation = get_policy(args.policy, **options).solve(problem)
    out = json.dumps(allocation.to_dict(), indent=2)
    if args.json:
        args.json.write_text(out + "\n")
    else:
        print(out)
    return 0
