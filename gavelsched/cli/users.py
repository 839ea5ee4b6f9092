"""``gavelsched user add|list|remove --config CLUSTER.yaml``: the users file the cluster
YAML's ``users_file`` names (its format: ``gavelsched/daemon/users.py``).

``user add NAME --role R [--entity E]... [--max-jobs N]`` writes the new user's token hash
to the file and prints the token once, alone on the last line of its output (the file
never holds it).
The scheduler reads the file again on ``gavelsched reload`` (or SIGHUP). A door over
``gavelsched.daemon.users``: bad input exits 2 with one line.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Collection
from pathlib import Path

import yaml

from traces.checks import NotUtf8, shown, utf8

from . import InputError

RELOAD = ("run `gavelsched reload` (or send the scheduler SIGHUP) for the scheduler to "
          "read it")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "user", help="add, list or remove the users who may call the scheduler",
        description="Manage the users file named by the cluster YAML's users_file key: "
                    "each user's role (admin: everything; user: their own jobs), the "
                    "entities they may submit to, and a hash of their token (never the "
                    "token). The scheduler reads it again on `gavelsched reload`.")
    actions = p.add_subparsers(dest="user_action", metavar="ACTION")
    actions.required = True

    add = actions.add_parser(
        "add", parents=[_config_flag()], help="add a user and print their new token",
        description="Add a user with a fresh token: its hash goes to the users file, the "
                    "token is printed once, alone on the last line.")
    add.add_argument("name", metavar="NAME", help="the user's name")
    add.add_argument("--role", required=True, choices=("admin", "user"),
                     help="admin: every job and entity; user: their own jobs")
    add.add_argument("--entity", action="append", default=[], metavar="E",
                     help="an entity of the cluster YAML the user may submit to "
                          "(repeatable; none: only the default entity)")
    add.add_argument("--max-jobs", type=int, default=None, metavar="N",
                     help="the most unfinished jobs the user may have at once; a "
                          "submission that would pass it is refused whole (default: no cap)")
    add.set_defaults(func=add_cmd)

    ls = actions.add_parser("list", parents=[_config_flag()], help="list the users",
                            description="List the users of the users file.")
    ls.set_defaults(func=list_cmd)

    rm = actions.add_parser("remove", parents=[_config_flag()],
                            help="remove a user (their token stops working on reload)",
                            description="Remove a user from the users file.")
    rm.add_argument("name", metavar="NAME", help="the user's name")
    rm.set_defaults(func=remove_cmd)


def _config_flag() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--config", required=True, metavar="CLUSTER.yaml",
                   help="the cluster YAML file (its users_file and entities keys)")
    return p


def cluster_users(config: str | Path) -> tuple[Path, frozenset[str]]:
    """The users file the cluster YAML at ``config`` names (relative to its folder) and
    the names of its ``entities`` mapping; ``InputError`` (one line) otherwise."""
    config = Path(config)
    try:
        data = yaml.safe_load(utf8(config.read_bytes()))
    except OSError as err:
        raise InputError(f"{config}: {err.strerror}") from None
    except NotUtf8 as err:
        raise InputError(f"{config}: not UTF-8 text at {err}") from None
    except (yaml.YAMLError, RecursionError, ValueError, OverflowError) as err:
        problem = str(getattr(err, "problem", None) or err or "nested too deeply")
        raise InputError(f"{config}: bad YAML: {problem.splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise InputError(f"{config}: expected a mapping of keys, got {shown(data)}")
    name = data.get("users_file")
    if name is None:
        raise InputError(f"{config}: missing key 'users_file' (the users file to write, "
                         "e.g. users_file: users.yaml)")
    if not isinstance(name, str) or not name or any(c < " " for c in name):
        raise InputError(f"{config}: users_file must be a path, got {shown(name)}")
    entities = data.get("entities")
    if entities is None:
        entities = {}
    if not isinstance(entities, dict):
        raise InputError(f"{config}: entities must be a mapping of entity names, got "
                         f"{shown(entities)}")
    path = Path(os.path.expanduser(name))
    return (path if path.is_absolute() else config.absolute().parent / path,
            frozenset(e for e in entities if isinstance(e, str)))


def _users(call):
    """``call()``, a ``UsersError`` made an ``InputError`` (exit 2, one line)."""
    from ..daemon.users import UsersError

    try:
        return call()
    except UsersError as err:
        raise InputError(str(err)) from None


def add_cmd(args: argparse.Namespace) -> int:
    from ..daemon.users import add_user

    path, known = cluster_users(args.config)
    token = _users(lambda: add_user(path, args.name, args.role, args.entity,
                                    known_entities=known, max_jobs=args.max_jobs))
    print(f"wrote user {args.name!r} (role {args.role}; {_entities(args.role, args.entity)}"
          f"{_cap(args.max_jobs)}) to {path}, with its token's hash only")
    print(RELOAD)
    print(f"{args.name}'s token, shown this once (keep it: only its hash is kept):")
    print(token, flush=True)
    return 0


def list_cmd(args: argparse.Namespace) -> int:
    from ..daemon.users import list_users

    path, _ = cluster_users(args.config)
    users = _users(lambda: list_users(path))
    if not users:
        print(f"no users in {path}")
        return 0
    width = max(len("NAME"), *(len(u.name) for u in users))
    print(f"{'NAME':<{width}}  {'ROLE':<5}  {'MAX JOBS':<8}  ENTITIES")
    for user in users:
        cap = "-" if user.max_jobs is None else str(user.max_jobs)
        print(f"{user.name:<{width}}  {user.role:<5}  {cap:<8}  "
              f"{_entities(user.role, user.entities)}")
    return 0


def remove_cmd(args: argparse.Namespace) -> int:
    from ..daemon.users import remove_user

    path, _ = cluster_users(args.config)
    _users(lambda: remove_user(path, args.name))
    print(f"removed {args.name!r} from {path}")
    print(RELOAD, flush=True)
    return 0


def _entities(role: str, entities: Collection[str]) -> str:
    if role == "admin":
        return "every entity"
    names = sorted(repr(e) if not e else e for e in entities)
    return "entities: " + ", ".join(names) if names else "the default entity only"


def _cap(max_jobs: int | None) -> str:
    return "" if max_jobs is None else f"; at most {max_jobs} unfinished jobs"
