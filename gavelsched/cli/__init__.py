"""The ``gavelsched`` console script: one sub-command per module in this package.

Every bad input ends the same way (docs/design.md, CLI): exit code 2 and one line on stderr
that says what is wrong and where, with no traceback.

Logging: a command logs at the level its parser sets as ``log_level`` (the daemons,
``scheduler`` and ``worker``: INFO, their main events), else WARNING, so that the other
commands print only their output. Each ``-v`` lowers that level one step (INFO, DEBUG),
each ``-q`` raises it (WARNING, ERROR).
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib
import logging
import os
import signal
import sys

# A user-facing error (bad arguments, a missing file, malformed input), and a call the
# scheduler refused: the API's (``gavelsched.client``), which the doors raise too.
from ..client.errors import ClientError, InputError

# Sub-command modules; each exposes ``register(subparsers)`` and sets ``func`` on its parser.
COMMANDS = ("solve", "trace", "simulate", "scheduler", "worker", "jobs", "control", "usage",
            "users", "predict", "drain", "logs", "local_cluster", "replay", "vn", "pipeline",
            "profile")
# The module of each sub-command, so that one command imports only its own module (the
# clients stay light: `gavelsched status` need not import the solvers `solve` needs).
COMMAND_MODULES = {"solve": "solve", "trace": "trace", "simulate": "simulate",
                   "scheduler": "scheduler", "worker": "worker", "submit": "jobs",
                   "status": "jobs", "predict": "predict", "history": "jobs",
                   "cancel": "jobs", "drain": "drain",
                   "logs": "logs", "local-cluster": "local_cluster", "replay": "replay",
                   "vn": "vn", "pipeline": "pipeline", "profile": "profile",
                   "hold": "control", "release": "control", "update": "control",
                   "reload": "control", "usage": "usage", "user": "users"}

EXIT_BAD_INPUT = 2
EXIT_REFUSED_BY_SYSTEM = 1   # the machine refused a file or folder: a full disk, a device
EXIT_BROKEN_PIPE = 141  # what a shell reports for a process killed by SIGPIPE
EXIT_INTERRUPTED = 130  # what a shell reports for a command stopped by Ctrl-C (SIGINT)


def _user_errors() -> tuple[type[BaseException], ...]:
    """The exception types that mean 'bad input' rather than a bug in gavelsched."""
    from policies.errors import PolicyError

    errors: list[type[BaseException]] = [InputError, ClientError, PolicyError,
                                         FileNotFoundError, IsADirectoryError,
                                         PermissionError]
    try:
        from traces.errors import TraceError
        errors.append(TraceError)
    except ImportError:  # pragma: no cover - traces is part of the package
        pass
    return tuple(errors)


class OneLineParser(argparse.ArgumentParser):
    """A parser whose errors are one line (docs/design.md, Safety rules), the way to the
    help in it, not the usage block argparse prints first; exit code 2 as argparse's. Its
    subcommands' parsers are of its class (``add_subparsers``' default)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The CLI's parser; given ``argv`` whose command is known, only that command's module
    is imported (the top-level ``--help`` and unknown commands import all of them)."""
    parser = OneLineParser(
        prog="gavelsched",
        description="Heterogeneity-aware scheduling of deep-learning jobs on mixed GPU "
                    "clusters (Gavel, thesis chapter 5): solve policies, generate traces, "
                    "replay them in a simulator, run a scheduler and workers on a real "
                    "cluster.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="more logging: one level per -v (the daemons log INFO by "
                             "default, -v adds DEBUG; other commands log warnings, -v INFO)")
    parser.add_argument("-q", "--quiet", action="count", default=0,
                        help="less logging: one level per -q (the daemons: -q warnings only)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    chosen = next((a for a in argv or () if not a.startswith("-")), None)
    modules = (COMMAND_MODULES[chosen],) if chosen in COMMAND_MODULES else COMMANDS
    for name in modules:
        try:
            module = importlib.import_module(f"gavelsched.cli.{name}")
        except ModuleNotFoundError as err:
            if err.name == f"gavelsched.cli.{name}":
                continue  # a command not built yet
            raise
        module.register(subparsers)
    return parser


def log_level(args: argparse.Namespace) -> int:
    """The command's ``log_level`` (default WARNING), one step per ``-q`` up and ``-v``
    down, kept within DEBUG..ERROR."""
    level = getattr(args, "log_level", logging.WARNING) + 10 * (args.quiet - args.verbose)
    return min(max(level, logging.DEBUG), logging.ERROR)


def _stacks_on_sigusr1() -> None:
    """``kill -USR1 PID``: every thread's stack to the process's stderr (a daemon's log),
    and it goes on (docs/runtime.md, "A daemon that seems stuck")."""
    try:
        faulthandler.register(signal.SIGUSR1, file=sys.__stderr__, all_threads=True)
    except (AttributeError, ValueError, OSError):   # no SIGUSR1 (Windows), no stderr
        pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    logging.basicConfig(level=log_level(args),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _stacks_on_sigusr1()
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # the reader left early (`... | head`): stop quietly, as on SIGPIPE
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except _user_errors() as err:
        print(f"gavelsched {args.command}: error: {_one_line(err)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as err:   # (writing a result to a full disk, a folder that is a device)
        # (its stack in the daemons' logs, which take INFO; the other commands: with -v)
        logging.getLogger(__name__).info("the error's stack", exc_info=True)
        print(f"gavelsched {args.command}: error: {_one_line(err)}", file=sys.stderr)
        return EXIT_REFUSED_BY_SYSTEM


def _one_line(err: BaseException) -> str:
    """The error in one line: a file's ``PATH: reason``, else its first line."""
    if isinstance(err, OSError) and err.strerror:
        return f"{err.filename}: {err.strerror}" if err.filename else err.strerror
    return str(err).splitlines()[0] if str(err) else type(err).__name__


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
