"""The users file (``users_file`` in the cluster YAML): who may call the scheduler, as what.

It is YAML, one entry per user, and holds a hash of each token, never the token::

    users:
      - {name: alice, role: user, entities: [team-a], max_jobs: 500,
         token_sha256: "sha256:9f86...0a08"}
      - {name: root-ops, role: admin, token_sha256: "sha256:60303...2b1e"}

- ``name``: ``[A-Za-z0-9][A-Za-z0-9_.-]{0,63}``, unique; ``daemon``, ``anonymous`` and
  ``scheduler`` are reserved (the callers that are no user). ``admin`` is allowed: the
  single token of a cluster without a users file acts as ``admin``, so the jobs it
  submitted belong to a user of that name once there is one.
- ``role``: ``admin`` (everything) or ``user`` (their own jobs).
- ``entities`` (optional): the entities a user may submit to, each an entity of the
  cluster YAML (when the caller names them) or ``""``, the default entity; a user with
  none may submit only to ``""``. An admin may submit to any, whatever the list says.
- ``max_jobs`` (optional): the most unfinished jobs (not done, failed or cancelled) the
  user may have at once, an integer >= 1; absent: no cap. A submission that would pass it
  is refused whole (RESOURCE_EXHAUSTED, ``calls.OverQuota``), so that one user's scripts
  cannot grow every re-solve for all (Slurm's ``MaxSubmitJobs``).
- ``token_sha256``: ``identity.token_hash`` of the token, ``sha256:`` and 64 lowercase hex
  digits; no two users share one.

An empty file (or ``users: []``) is allowed: no user, so only the daemon token (workers)
and the jobs' tokens work. A file writable by group or others is refused (anyone could add
an admin); one readable by them is only warned about (it holds hashes, no token).
``add_user`` / ``remove_user`` rewrite the file atomically with mode 0600 (comments are
not kept). Every refusal is one ``UsersError`` line naming the file and the entry.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import stat
import tempfile
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from traces import checks
from traces.checks import BadValue, shown

from ..rpc.identity import HASH_PREFIX, USER_ROLES, UserEntry, token_hash
from ..rpc.security import new_token
from .files import FileError, parse_yaml

log = logging.getLogger(__name__)

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
RESERVED = ("daemon", "anonymous", "scheduler")
HASH = re.compile(re.escape(HASH_PREFIX) + r"[0-9a-f]{64}")
ENTRY_KEYS = ("name", "role", "entities", "max_jobs", "token_sha256")
REQUIRED = ("name", "role", "token_sha256")
FILE_KEYS = ("users",)
HEADER = ("# gavelsched users file: each user's role, entities and token hash (never the\n"
          "# token). Written by `gavelsched user add`; `gavelsched reload` reads it again.\n")


class UsersError(ValueError):
    """A users file, or a user, that cannot be used: one line naming the file and entry."""


def _parse_name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise UsersError(f"{where}: name must be 1 to 64 letters, digits, '_', '.' or '-', "
                         f"starting with a letter or digit, got {shown(value)}")
    if value in RESERVED:
        raise UsersError(f"{where}: name {value!r} is reserved ({', '.join(RESERVED)})")
    return value


def _parse_entities(value: Any, where: str, known: Collection[str] | None) -> frozenset[str]:
    if value is None:
        return frozenset()
    if not isinstance(value, list):
        raise UsersError(f"{where}: entities must be a list of entity names, got "
                         f"{shown(value)}")
    for entity in value:
        if not isinstance(entity, str) or any(c < " " or c == "\x7f" for c in entity):
            raise UsersError(f"{where}: entities: each must be an entity name, got "
                             f"{shown(entity)}")
        if known is not None and entity and entity not in known:
            have = ", ".join(sorted(known)) or "none"
            raise UsersError(f"{where}: unknown entity {entity!r} (the cluster's: {have})")
    return frozenset(value)


def _parse_entry(raw: Any, where: str, known: Collection[str] | None) -> UserEntry:
    if not isinstance(raw, dict):
        raise UsersError(f"{where}: expected a mapping of name, role, entities, max_jobs, "
                         f"token_sha256, got {shown(raw)}")
    name = raw.get("name")
    if isinstance(name, str) and NAME.fullmatch(name):
        where = f"{where} ({name})"
    for key in raw:
        if key not in ENTRY_KEYS:
            raise UsersError(f"{where}: unknown key {shown(key)}; known: "
                             f"{', '.join(ENTRY_KEYS)}")
    for key in REQUIRED:
        if raw.get(key) is None:
            raise UsersError(f"{where}: missing key {key!r}")
    name = _parse_name(raw["name"], where)
    role = raw["role"]
    if role not in USER_ROLES:
        raise UsersError(f"{where}: role must be admin or user, got {shown(role)}")
    digest = raw["token_sha256"]
    if not isinstance(digest, str) or not HASH.fullmatch(digest):
        raise UsersError(f"{where}: token_sha256 must be '{HASH_PREFIX}' and 64 lowercase hex "
                         f"digits, got {shown(digest)}")
    return UserEntry(name, role, _parse_entities(raw.get("entities"), where, known), digest,
                     _parse_max_jobs(raw.get("max_jobs"), where))


def _parse_max_jobs(value: Any, where: str) -> int | None:
    if value is None:
        return None
    try:
        return checks.integer(value, "max_jobs", low=1)
    except BadValue:
        raise UsersError(f"{where}: max_jobs must be an integer >= 1 (the most unfinished "
                         f"jobs at once), got {shown(value)}") from None


def parse_users(data: Any, name: str = "users file",
                entities: Collection[str] | None = None) -> tuple[UserEntry, ...]:
    """Check a parsed users file (``name`` names it in errors); ``entities``: the
    cluster's entity names, which a user's must be among (None: not checked)."""
    if data is None:
        return ()
    if not isinstance(data, dict):
        raise UsersError(f"{name}: expected a mapping with the key 'users', got "
                         f"{shown(data)}")
    for key in data:
        if key not in FILE_KEYS:
            raise UsersError(f"{name}: unknown key {shown(key)}; known: users")
    raw = data.get("users")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise UsersError(f"{name}: users must be a list of users, got {shown(raw)}")
    users: list[UserEntry] = []
    seen_names: dict[str, int] = {}
    seen_hashes: dict[str, int] = {}
    for i, item in enumerate(raw):
        where = f"{name}: users[{i}]"
        user = _parse_entry(item, where, entities)
        where = f"{where} ({user.name})"
        if user.name in seen_names:
            raise UsersError(f"{where}: duplicate user, also users[{seen_names[user.name]}]")
        if user.token_hash in seen_hashes:
            other = seen_hashes[user.token_hash]
            raise UsersError(f"{where}: token_sha256 is also users[{other}]'s "
                             f"({users[other].name}): every user needs a token of their own")
        seen_names[user.name] = seen_hashes[user.token_hash] = i
        users.append(user)
    return tuple(users)


def _check_mode(path: Path, mode: int) -> None:
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UsersError(f"{path}: writable by group or others (mode {mode & 0o777:o}): "
                         f"anyone could add an admin; run `chmod 600 {path}`")
    if mode & (stat.S_IRGRP | stat.S_IROTH):
        log.warning("%s: readable by group or others (mode %o); it holds token hashes only, "
                    "but `chmod 600 %s` keeps it private", path, mode & 0o777, path)


def load_users(path: str | Path,
               entities: Collection[str] | None = None) -> tuple[UserEntry, ...]:
    """Read and check the users file at ``path`` (see the module's docstring); ``entities``:
    the cluster's entity names (None: not checked). ``UsersError`` (one line) otherwise."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            _check_mode(path, os.fstat(f.fileno()).st_mode)
            data = f.read()
    except OSError as err:
        raise UsersError(f"{path}: {err.strerror}") from None
    try:
        parsed = parse_yaml(data)
    except FileError as err:
        raise UsersError(f"{path}: {err}") from None
    return parse_users(parsed, str(path), entities)


def list_users(path: str | Path) -> tuple[UserEntry, ...]:
    """The users of the file at ``path``; none when it does not exist yet."""
    return load_users(path) if Path(path).exists() else ()


def render(users: Sequence[UserEntry]) -> str:
    """The users file holding ``users``, as ``load_users`` reads it back."""
    rows = [{"name": u.name, "role": u.role,
             **({"entities": sorted(u.entities)} if u.entities else {}),
             **({"max_jobs": u.max_jobs} if u.max_jobs is not None else {}),
             "token_sha256": u.token_hash} for u in users]
    return HEADER + yaml.safe_dump({"users": rows}, sort_keys=False, width=200)


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``folder`` (its own fd, released on close): two
    ``user add`` at once each keep the other's user."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _write(path: Path, content: str) -> None:
    """Replace ``path`` with ``content`` atomically: a temporary file in the same folder
    (mode 0600 from creation on), fsynced, renamed over it, the folder fsynced."""
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(content)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, 0o600)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def _edit(path: Path, change, known_entities: Collection[str] | None = None):
    """Read the users file (none yet: no users), apply ``change(users) -> (users, result)``
    and write the result back; returns ``result``."""
    folder = path.parent
    if not folder.is_dir():
        raise UsersError(f"{path}: no such folder {folder}")
    try:
        with _locked(folder):
            users = load_users(path, known_entities) if path.exists() else ()
            users, result = change(users)
            _write(path, render(users))
    except OSError as err:
        raise UsersError(f"{path}: cannot write: {err.strerror}") from None
    return result


def add_user(path: str | Path, name: str, role: str, entities: Sequence[str], *,
             known_entities: Collection[str] | None = None,
             max_jobs: int | None = None) -> str:
    """Add user ``name`` with ``role``, ``entities`` (each among ``known_entities`` when
    given) and ``max_jobs`` (None: no cap) to the users file at ``path``, made if missing;
    returns their fresh token (``security.new_token()``), of which the file keeps only the
    hash."""
    path = Path(path)
    token = new_token()
    raw = {"name": name, "role": role, "entities": list(entities), "max_jobs": max_jobs,
           "token_sha256": token_hash(token)}
    entry = _parse_entry(raw, f"{path}: new user", known_entities)

    def add(users: tuple[UserEntry, ...]) -> tuple[tuple[UserEntry, ...], None]:
        if any(u.name == entry.name for u in users):
            raise UsersError(f"{path}: user {entry.name!r} already exists (remove it first "
                             "to give them a new token)")
        return (*users, entry), None

    _edit(path, add, known_entities)
    return token


def remove_user(path: str | Path, name: str) -> UserEntry:
    """Remove user ``name`` from the users file at ``path``; returns their entry."""
    path = Path(path)
    if not path.exists():
        raise UsersError(f"{path}: no such file")

    def remove(users: tuple[UserEntry, ...]) -> tuple[tuple[UserEntry, ...], UserEntry]:
        gone = [u for u in users if u.name == name]
        if not gone:
            raise UsersError(f"{path}: no user {name!r}")
        return tuple(u for u in users if u.name != name), gone[0]

    return _edit(path, remove)

