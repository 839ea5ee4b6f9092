"""``gavelsched solve PROBLEM.json --policy NAME``: one policy solve, Allocation JSON out."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from policies import Problem, ProblemError, get_policy, policy_names

from . import InputError


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "solve", help="solve one scheduling problem with a policy",
        description="Read a Problem JSON (see docs/design.md), solve it with a policy and print the "
                    "Allocation JSON: for every job (or 'a+b' pair) the fraction of time on "
                    "each worker type.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("problem", type=Path, nargs="?",
                        help="Problem JSON file ('-' reads stdin)")
    parser.add_argument("--policy", required=True, metavar="NAME",
                        help=f"one of: {', '.join(policy_names())}")
    parser.add_argument("--partitions", type=int, default=1, metavar="K",
                        help="POP: split into K random sub-problems solved independently")
    parser.add_argument("--solver", default=None,
                        help="cvxpy solver (default: CLARABEL; HIGHS also works for LPs)")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="a policy option, e.g. budget=500 for min_makespan_with_budget, "
                             "seed=1, max_partners=8; repeat for several")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT",
                        help="write the Allocation JSON here instead of stdout")
    parser.add_argument("--traits", action="store_true",
                        help="print the policy's declared traits (pairs, agnostic, backfill, "
                             "state, fields read, options) as JSON instead of solving")
    parser.set_defaults(func=run)


def parse_options(pairs: list[str]) -> dict:
    """``["budget=100", "seed=2"]`` -> ``{"budget": 100, "seed": 2}`` (values as JSON)."""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InputError(f"--option {pair!r}: expected KEY=VALUE")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def read_problem(path: Path) -> Problem:
    """The Problem JSON at ``path`` (``-``: stdin), refused in one line naming the file and
    what is wrong (docs/design.md, Safety rules): not UTF-8, not JSON, a bad field."""
    from traces.checks import NotUtf8, utf8

    try:
        raw = sys.stdin.buffer.read() if str(path) == "-" else path.read_bytes()
        data = json.loads(utf8(raw))
    except OSError as err:
        raise InputError(f"{path}: {err.strerror}") from None
    except NotUtf8 as err:
        raise InputError(f"{path}: not UTF-8 text at {err}") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: not valid JSON (line {err.lineno}: {err.msg})") from None
    except (ValueError, RecursionError) as err:   # > 4300-digit integers, deep nesting
        raise InputError(f"{path}: not JSON gavelsched can read "
                         f"({str(err).splitlines()[0][:80] or type(err).__name__})") from None
    try:
        return Problem.from_dict(data)
    except ProblemError as err:
        raise InputError(f"{path}: {err}") from None


def run(args: argparse.Namespace) -> int:
    options = {"partitions": args.partitions, **parse_options(args.option)}
    if args.solver:
        options["solver"] = args.solver
    policy = get_policy(args.policy, **options)
    if args.traits:
        out = json.dumps(policy.traits.to_dict(), indent=2)
    elif args.problem is None:
        raise InputError("solve: give a PROBLEM.json file (or --traits)")
    else:
        out = json.dumps(policy.solve(read_problem(args.problem)).to_dict(), indent=2)
    if args.json:
        args.json.write_text(out + "\n")
    else:
        print(out)
    return 0
