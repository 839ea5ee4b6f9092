"""Who is calling: a bearer token mapped to a ``Caller`` (a user, a worker daemon, a job).

- ``Identities(daemon_token, users)`` maps a token to a ``Caller``; it is a value, built
  once (from the cluster's token and the users file) and swapped whole on a reload.
- ``AuthCheck(current)`` refuses, with UNAUTHENTICATED and one line, every call whose
  ``authorization: Bearer T`` identifies no one, before any handler runs; ``current`` is a
  zero-argument callable returning the ``Identities`` in force, so a reload takes effect on
  the next call. ``caller_of(context, identities)`` says who called, inside a handler.
- ``token_hash`` is what a users file stores (never the token); ``job_token`` the token of
  one job's processes, derived from the daemon token, which acts on that job only.

Every comparison with a secret runs in constant time (``hmac.compare_digest``). Roles:
``admin`` (everything), ``user`` (their own jobs, their entities), ``daemon`` (the worker
daemons and the scheduler's own calls), ``job`` (one job's processes).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

AUTH_HEADER = "authorization"
REFUSED = "missing or wrong auth token"

ADMIN, USER, DAEMON, JOB = "admin", "user", "daemon", "job"
USER_ROLES = (ADMIN, USER)            # the roles a users file may give
HASH_PREFIX = "sha256:"
JOB_TOKEN_PREFIX = "gjob."
JOB_ID = re.compile(r"[A-Za-z0-9_.-]+")
# The callers that belong to no user of a users file.
LEGACY_ADMIN, OPEN_CALLER, DAEMON_CALLER = "admin", "anonymous", "daemon"
# Domain separation: a job token's mac is of this prefix and the job id, never of a bare id.
_JOB_MAC_CONTEXT = b"gavelsched job token v1\0"


class IdentityError(ValueError):
    """Identities that cannot be built (one line): a role unknown, a user twice."""


@dataclass(frozen=True)
class Caller:
    """Who made a call. ``entities``: the entities a user may submit to (None: any);
    ``job``: the one job a ``job`` caller may act on; ``max_jobs``: the most unfinished
    jobs a user may have at once (None: no cap; the users file's ``max_jobs``)."""

    name: str
    role: str
    entities: frozenset[str] | None = None
    job: str | None = None
    max_jobs: int | None = None

    @property
    def is_admin(self) -> bool:
        return self.role == ADMIN

    def may_act_as_daemon(self) -> bool:
        """Worker daemons' calls (register, heartbeat, a job's exit): the daemon token, or
        an admin (the single token of a cluster without a users file is both)."""
        return self.role in (DAEMON, ADMIN)

    def may_submit_to(self, entity: str) -> bool:
        """An admin: any entity. A user: one of theirs (None: any); a user with none, only
        the empty entity ``""``. Daemons and jobs submit nothing."""
        if self.is_admin:
            return True
        if self.role != USER:
            return False
        if self.entities is None:
            return True
        return entity in self.entities or (not self.entities and entity == "")

    def owns(self, job_user: str) -> bool:
        """A job submitted by ``job_user`` is this caller's: an admin's always, a user's
        when the names are equal; a daemon or a job owns none (see ``may_act_on``)."""
        return self.is_admin or (self.role == USER and self.name == job_user)

    def may_act_on(self, job_id: str, job_user: str) -> bool:
        """Whether this caller may act on (cancel, hold, read the logs of, renew the lease
        of) job ``job_id`` of ``job_user``: an admin and the daemon any job (the daemon
        token derives every job's token anyway), a user their own, a job's process only
        its own job."""
        if self.role == JOB:
            return self.job is not None and self.job == job_id
        return self.role == DAEMON or self.owns(job_user)


@dataclass(frozen=True)
class UserEntry:
    """One user of a users file: ``token_hash`` is ``token_hash(token)``, never the token."""

    name: str
    role: str
    entities: frozenset[str]
    token_hash: str
    max_jobs: int | None = None      # unfinished jobs at once (None: no cap)


def token_hash(token: str) -> str:
    """``"sha256:"`` and the hex SHA-256 of the UTF-8 token: what a users file stores.

    A fast hash suffices (no salt, no bcrypt/scrypt): a slow hash only protects secrets
    that can be guessed, and a user's token is 256 random bits (``security.new_token()``),
    so no dictionary of likely tokens exists and 2**256 preimages cannot be searched. A
    stolen users file lets no one call. This is how GitHub stores its tokens."""
    return HASH_PREFIX + hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def _job_mac(secret: str, job_id: str) -> str:
    digest = hmac.new(secret.encode("utf-8", "surrogatepass"),
                      _JOB_MAC_CONTEXT + job_id.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def job_token(secret: str, job_id: str) -> str:
    """The token of job ``job_id``'s processes: ``gjob.<job_id>.<mac>``, the mac an
    HMAC-SHA256 keyed by the cluster's daemon token ``secret`` (URL-safe base64, no
    padding). Whoever holds it may act on that job only; the scheduler checks it without
    storing it. A job id is letters, digits, ``_``, ``-`` and ``.``; the mac has no ``.``,
    so a token is parsed from the right."""
    if not secret:
        raise IdentityError("a job token needs the cluster's daemon token")
    if not JOB_ID.fullmatch(job_id):
        raise IdentityError(f"job id {job_id!r}: must be letters, digits, '_', '-' or '.'")
    return f"{JOB_TOKEN_PREFIX}{job_id}.{_job_mac(secret, job_id)}"


def _same(a: str, b: str) -> bool:
    """``a == b`` in constant time (for equal lengths), for any text."""
    return hmac.compare_digest(a.encode("utf-8", "surrogatepass"),
                               b.encode("utf-8", "surrogatepass"))


class Identities:
    """Who each token is; immutable (a reload builds a new one).

    - No daemon token and no users file: an open cluster (loopback only, no auth; see
      ``security.exposure``): every caller, with or without a token, is ``anonymous``, an
      admin.
    - No users file (``users`` None): today's single token is the admin token (named
      ``admin``), so existing clusters keep working; it also makes daemon calls.
    - A users file: the daemon token is the ``daemon`` (workers, the scheduler's own
      calls), each user's token is that user; an empty file means only the daemon token
      (and job tokens) work.
    - With a daemon token, ``job_token(daemon_token, id)`` is job ``id``'s process.
    Anything else is no one (None)."""

    __slots__ = ("_daemon", "_users", "_by_hash")

    def __init__(self, daemon_token: str | None, users: Sequence[UserEntry] | None) -> None:
        by_hash: dict[str, UserEntry] = {}
        names: set[str] = set()
        for user in users or ():
            if user.role not in USER_ROLES:
                raise IdentityError(f"user {user.name!r}: role must be admin or user, "
                                    f"got {user.role!r}")
            if user.name in names:
                raise IdentityError(f"user {user.name!r} appears twice")
            if user.token_hash in by_hash:
                raise IdentityError(f"users {by_hash[user.token_hash].name!r} and "
                                    f"{user.name!r} have the same token")
            names.add(user.name)
            by_hash[user.token_hash] = user
        if daemon_token and token_hash(daemon_token) in by_hash:
            raise IdentityError(f"user {by_hash[token_hash(daemon_token)].name!r} has the "
                                "daemon token")
        object.__setattr__(self, "_daemon", daemon_token or None)
        object.__setattr__(self, "_users", None if users is None else tuple(users))
        object.__setattr__(self, "_by_hash", by_hash)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Identities is immutable: build a new one")

    @property
    def is_open(self) -> bool:
        """No daemon token and no users file: every caller is an admin."""
        return self._daemon is None and self._users is None

    @property
    def users(self) -> tuple[UserEntry, ...] | None:
        """The users file's entries (None: no users file)."""
        return self._users

    def job_token(self, job_id: str) -> str | None:
        """``job_token`` for ``job_id`` under this cluster's daemon token (None without
        one: an open cluster needs none)."""
        return job_token(self._daemon, job_id) if self._daemon else None

    def identify(self, token: str | None) -> Caller | None:
        """The caller ``token`` (the bearer token, None if none was sent) identifies, or
        None. The daemon token and a job's mac are compared with ``hmac.compare_digest``.
        A user's token is found by its hash in a dict and the stored hash is then compared
        with ``compare_digest``: the dict lookup's timing depends only on the SHA-256 of
        the token presented, which tells an attacker bits of a hash of a 256-bit secret,
        and those do not help to find the secret."""
        if self.is_open:
            return Caller(OPEN_CALLER, ADMIN)
        if not token:
            return None
        if self._daemon is not None:
            if _same(token, self._daemon):
                if self._users is None:
                    return Caller(LEGACY_ADMIN, ADMIN)
                return Caller(DAEMON_CALLER, DAEMON)
            job = self._job_of(token)
            if job is not None:
                return Caller(f"job {job}", JOB, job=job)
        digest = token_hash(token)
        user = self._by_hash.get(digest)
        if user is None or not _same(digest, user.token_hash):
            return None
        return Caller(user.name, user.role,
                      entities=None if user.role == ADMIN else user.entities,
                      max_jobs=user.max_jobs)

    def _job_of(self, token: str) -> str | None:
        if not token.startswith(JOB_TOKEN_PREFIX):
            return None
        job, dot, mac = token[len(JOB_TOKEN_PREFIX):].rpartition(".")
        if not dot or not JOB_ID.fullmatch(job):
            return None
        return job if _same(mac, _job_mac(self._daemon, job)) else None


def bearer(metadata: Iterable[tuple[str, Any]] | None) -> str | None:
    """The token of the one ``authorization: Bearer <token>`` entry of ``metadata``, or
    None: no such entry, another scheme, or the header sent twice (ambiguous)."""
    values = [value for key, value in metadata or () if key == AUTH_HEADER]
    if len(values) != 1:
        return None
    value = values[0]
    if isinstance(value, bytes):
        try:
            value = value.decode()
        except UnicodeDecodeError:
            return None
    scheme, _, token = value.partition(" ")
    return token if scheme.lower() == "bearer" and token else None


def caller_of(context: grpc.ServicerContext, identities: Identities) -> Caller | None:
    """Inside a handler: who made this call (None: no one, which ``AuthCheck`` refuses
    before the handler runs)."""
    return identities.identify(bearer(context.invocation_metadata()))


def _refuse(request, context) -> None:
    context.abort(grpc.StatusCode.UNAUTHENTICATED, REFUSED)


def _refusal(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """A handler of ``handler``'s shape (unary or streaming) that refuses with
    UNAUTHENTICATED before reading a request."""
    if handler.request_streaming or handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(
            _refuse, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)
    return grpc.unary_unary_rpc_method_handler(
        _refuse, request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer)


class TokenGate(grpc.ServerInterceptor):
    """Refuses (UNAUTHENTICATED, ``REFUSED``) every call whose bearer token ``admits``
    refuses, whatever its handler's shape, before the handler runs (health included)."""

    def __init__(self, admits: Callable[[str | None], bool]) -> None:
        self._admits = admits

    def intercept_service(self, continuation, handler_call_details):
        if self._admits(bearer(handler_call_details.invocation_metadata)):
            return continuation(handler_call_details)
        handler = continuation(handler_call_details)
        return None if handler is None else _refusal(handler)


class AuthCheck(TokenGate):
    """A ``TokenGate`` that admits the callers ``current()`` (the ``Identities`` in force,
    read on each call) identifies."""

    def __init__(self, current: Callable[[], Identities]) -> None:
        super().__init__(lambda token: current().identify(token) is not None)
