"""Who is calling (``gavelsched.rpc.identity``): every branch of ``Identities.identify``,
the roles' rights, job tokens, constant-time comparisons, and ``AuthCheck`` on a real gRPC
server on 127.0.0.1 (a user's token passes, a wrong one is UNAUTHENTICATED, a reload's new
``Identities`` holds from the next call on)."""

from __future__ import annotations

import base64
import hashlib
import hmac

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from hypothesis import given, settings
from hypothesis import strategies as st

from gavelsched.rpc import identity
from gavelsched.rpc.identity import (
    ADMIN,
    DAEMON,
    JOB,
    USER,
    Caller,
    Identities,
    IdentityError,
    UserEntry,
    bearer,
    caller_of,
    job_token,
    token_hash,
)
from gavelsched.rpc.security import channel, new_token, serve

DAEMON_TOKEN = new_token()
ALICE, ROOT, BOB = new_token(), new_token(), new_token()
USERS = (UserEntry("alice", USER, frozenset({"team-a"}), token_hash(ALICE)),
         UserEntry("root", ADMIN, frozenset({"team-a"}), token_hash(ROOT)),
         UserEntry("bob", USER, frozenset(), token_hash(BOB)))
WITH_USERS = Identities(DAEMON_TOKEN, USERS)
LEGACY = Identities(DAEMON_TOKEN, None)
OPEN = Identities(None, None)
USERS_NO_DAEMON = Identities(None, USERS)
EMPTY_FILE = Identities(DAEMON_TOKEN, ())


def _tampered(token: str) -> str:
    head, _, mac = token.rpartition(".")
    return f"{head}.{('B' if mac[0] == 'A' else 'A')}{mac[1:]}"


# (case, identities, token, the caller expected: None for no one)
IDENTIFY = [
    ("open: no token", OPEN, None, Caller("anonymous", ADMIN)),
    ("open: any token", OPEN, "whatever", Caller("anonymous", ADMIN)),
    ("legacy: the single token is admin", LEGACY, DAEMON_TOKEN, Caller("admin", ADMIN)),
    ("legacy: a wrong token", LEGACY, "wrong", None),
    ("legacy: the token plus a character", LEGACY, DAEMON_TOKEN + "x", None),
    ("legacy: no token", LEGACY, None, None),
    ("legacy: an empty token", LEGACY, "", None),
    ("legacy: a user's token means nothing", LEGACY, ALICE, None),
    ("legacy: a job token", LEGACY, job_token(DAEMON_TOKEN, "7"),
     Caller("job 7", JOB, job="7")),
    ("users: the daemon token", WITH_USERS, DAEMON_TOKEN, Caller("daemon", DAEMON)),
    ("users: a user", WITH_USERS, ALICE, Caller("alice", USER, frozenset({"team-a"}))),
    ("users: a user of no entity", WITH_USERS, BOB, Caller("bob", USER, frozenset())),
    ("users: an admin may submit anywhere", WITH_USERS, ROOT, Caller("root", ADMIN, None)),
    ("users: an unknown token", WITH_USERS, new_token(), None),
    ("users: a user's token hash is no token", WITH_USERS, token_hash(ALICE), None),
    ("users: no token", WITH_USERS, None, None),
    ("users: a job token", WITH_USERS, job_token(DAEMON_TOKEN, "job-1.a_b"),
     Caller("job job-1.a_b", JOB, job="job-1.a_b")),
    ("users: a tampered job mac", WITH_USERS, _tampered(job_token(DAEMON_TOKEN, "7")), None),
    ("users: job 7's mac under job 8's id", WITH_USERS,
     job_token(DAEMON_TOKEN, "7").replace("gjob.7.", "gjob.8."), None),
    ("users: a job token of another cluster", WITH_USERS, job_token("other", "7"), None),
    ("users: a job token without a mac", WITH_USERS, "gjob.7", None),
    ("users: a job token with a bad id", WITH_USERS,
     "gjob.a/b." + job_token(DAEMON_TOKEN, "a").rpartition(".")[2], None),
    ("users, no daemon token: a user", USERS_NO_DAEMON, ALICE,
     Caller("alice", USER, frozenset({"team-a"}))),
    ("users, no daemon token: no job tokens", USERS_NO_DAEMON, job_token("x", "7"), None),
    ("users, no daemon token: no token", USERS_NO_DAEMON, None, None),
    ("empty users file: the daemon token", EMPTY_FILE, DAEMON_TOKEN, Caller("daemon", DAEMON)),
    ("empty users file: a user's token", EMPTY_FILE, ALICE, None),
]


@pytest.mark.parametrize(("case", "ids", "token", "expected"), IDENTIFY,
                         ids=[row[0] for row in IDENTIFY])
def test_identify(case, ids, token, expected):
    assert ids.identify(token) == expected


def test_token_hash_is_sha256_of_the_utf8_token():
    assert token_hash("abc") == ("sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb4"
                                 "10ff61f20015ad")
    assert token_hash("é") == "sha256:" + hashlib.sha256("é".encode()).hexdigest()


def test_job_token_format_is_parsed_from_the_right():
    token = job_token("secret", "a.b-c_9")
    prefix, _, mac = token.rpartition(".")
    assert prefix == "gjob.a.b-c_9"
    assert "=" not in mac and "." not in mac and len(mac) == 43
    raw = base64.urlsafe_b64decode(mac + "=")
    assert raw == hmac.new(b"secret", b"gavelsched job token v1\0a.b-c_9",
                           hashlib.sha256).digest()
    ids = Identities("secret", ())
    assert ids.identify(token) == Caller("job a.b-c_9", JOB, job="a.b-c_9")
    assert ids.job_token("a.b-c_9") == token
    assert OPEN.job_token("7") is None


@pytest.mark.parametrize(("secret", "job_id"), [("", "7"), ("s", ""), ("s", "a b"),
                                                ("s", "a/b"), ("s", "a\nb"), ("s", "é")])
def test_job_token_refuses_bad_input(secret, job_id):
    with pytest.raises(IdentityError):
        job_token(secret, job_id)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=80))
def test_no_random_text_is_anyone(token):
    assert WITH_USERS.identify(token) is None
    assert LEGACY.identify(token) is None


def test_job_token_of_one_job_acts_on_that_job_only():
    caller = WITH_USERS.identify(job_token(DAEMON_TOKEN, "A"))
    assert caller is not None and caller.role == JOB
    assert caller.may_act_on("A", "alice")
    assert not caller.may_act_on("B", "alice")
    assert not caller.may_submit_to("") and not caller.may_act_as_daemon()
    assert not caller.owns("alice") and not caller.is_admin


def test_every_secret_comparison_is_constant_time(monkeypatch):
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def recording(a, b):
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", recording)
    assert LEGACY.identify(DAEMON_TOKEN) is not None
    assert (DAEMON_TOKEN.encode(), DAEMON_TOKEN.encode()) in calls
    calls.clear()
    assert WITH_USERS.identify(job_token(DAEMON_TOKEN, "7")) is not None
    mac = job_token(DAEMON_TOKEN, "7").rpartition(".")[2].encode()
    assert (mac, mac) in calls
    calls.clear()
    assert WITH_USERS.identify(ALICE) is not None
    digest = token_hash(ALICE).encode()
    assert (digest, digest) in calls
    calls.clear()
    assert WITH_USERS.identify("wrong") is None
    assert calls                                    # the daemon token was compared
    assert all(isinstance(a, bytes) and isinstance(b, bytes) for a, b in calls)


# (caller, entity, may submit)
SUBMIT = [
    (Caller("root", ADMIN), "team-z", True),
    (Caller("alice", USER, frozenset({"team-a"})), "team-a", True),
    (Caller("alice", USER, frozenset({"team-a"})), "team-b", False),
    (Caller("alice", USER, frozenset({"team-a"})), "", False),
    (Caller("alice", USER, frozenset({"team-a", ""})), "", True),
    (Caller("bob", USER, frozenset()), "", True),
    (Caller("bob", USER, frozenset()), "team-a", False),
    (Caller("carol", USER, None), "team-q", True),
    (Caller("daemon", DAEMON), "", False),
    (Caller("job 7", JOB, job="7"), "", False),
]


@pytest.mark.parametrize(("caller", "entity", "expected"), SUBMIT)
def test_may_submit_to(caller, entity, expected):
    assert caller.may_submit_to(entity) is expected


# (caller, job id, job's user, owns the user's jobs, may act on the job, daemon calls)
RIGHTS = [
    (Caller("root", ADMIN), "1", "alice", True, True, True),
    (Caller("alice", USER), "1", "alice", True, True, False),
    (Caller("alice", USER), "1", "bob", False, False, False),
    (Caller("daemon", DAEMON), "1", "alice", False, True, True),
    (Caller("job 1", JOB, job="1"), "1", "alice", False, True, False),
    (Caller("job 1", JOB, job="1"), "2", "alice", False, False, False),
    (Caller("job 1", JOB, job="1"), "1", "job 1", False, True, False),
    (Caller("daemon", DAEMON), "1", "daemon", False, True, True),
]


@pytest.mark.parametrize(("caller", "job", "user", "owns", "acts", "daemon"), RIGHTS)
def test_rights(caller, job, user, owns, acts, daemon):
    assert caller.owns(user) is owns
    assert caller.may_act_on(job, user) is acts
    assert caller.may_act_as_daemon() is daemon


@pytest.mark.parametrize(("users", "daemon", "message"), [
    ((UserEntry("a", "root", frozenset(), token_hash("1")),), None, "role must be"),
    ((UserEntry("a", DAEMON, frozenset(), token_hash("1")),), None, "role must be"),
    ((UserEntry("a", USER, frozenset(), token_hash("1")),
      UserEntry("a", USER, frozenset(), token_hash("2"))), None, "appears twice"),
    ((UserEntry("a", USER, frozenset(), token_hash("1")),
      UserEntry("b", USER, frozenset(), token_hash("1"))), None, "the same token"),
    ((UserEntry("a", USER, frozenset(), token_hash("d")),), "d", "the daemon token"),
])
def test_identities_refuse_ambiguous_users(users, daemon, message):
    with pytest.raises(IdentityError, match=message):
        Identities(daemon, users)


def test_identities_are_immutable():
    with pytest.raises(AttributeError):
        WITH_USERS._daemon = "x"   # noqa: SLF001 - the point of the test
    assert WITH_USERS.users == USERS and LEGACY.users is None
    assert OPEN.is_open and not LEGACY.is_open and not USERS_NO_DAEMON.is_open


@pytest.mark.parametrize(("metadata", "expected"), [
    (None, None),
    ((), None),
    ((("authorization", "Bearer abc"),), "abc"),
    ((("authorization", "bearer abc"),), "abc"),
    ((("authorization", b"Bearer abc"),), "abc"),
    ((("authorization", b"Bearer \xff"),), None),
    ((("authorization", "abc"),), None),
    ((("authorization", "Basic abc"),), None),
    ((("authorization", "Bearer "),), None),
    ((("authorization", "Bearer a"), ("authorization", "Bearer b")), None),
    ((("x-other", "Bearer abc"), ("authorization", "Bearer abc")), "abc"),
])
def test_bearer(metadata, expected):
    assert bearer(metadata) == expected


class _Context:
    def __init__(self, metadata):
        self._metadata = metadata

    def invocation_metadata(self):
        return self._metadata


def test_caller_of_reads_the_calls_metadata():
    assert caller_of(_Context((("authorization", f"Bearer {ALICE}"),)), WITH_USERS) \
        == Caller("alice", USER, frozenset({"team-a"}))
    assert caller_of(_Context(()), WITH_USERS) is None
    assert caller_of(_Context(()), OPEN) == Caller("anonymous", ADMIN)


# ----------------------------------------------------------------------------- on the wire

@pytest.fixture
def server():
    """A health service behind ``AuthCheck`` on 127.0.0.1; ``current[0]`` is the
    ``Identities`` in force (a test swaps it as a reload would)."""
    current = [WITH_USERS]
    servicer = health.HealthServicer()
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    srv, port = serve("127.0.0.1:0",
                      [lambda s: health_pb2_grpc.add_HealthServicer_to_server(servicer, s)],
                      identities=lambda: current[0], max_workers=4)
    yield f"127.0.0.1:{port}", current
    srv.stop(None)


def _check(address: str, token: str | None) -> grpc.StatusCode:
    with channel(address, token=token) as chan:
        try:
            reply = health_pb2_grpc.HealthStub(chan).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=10)
        except grpc.RpcError as err:
            assert err.details() == "missing or wrong auth token"
            return err.code()
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    return grpc.StatusCode.OK


def test_auth_check_on_a_real_server(server):
    address, _ = server
    assert _check(address, ALICE) == grpc.StatusCode.OK
    assert _check(address, DAEMON_TOKEN) == grpc.StatusCode.OK
    assert _check(address, job_token(DAEMON_TOKEN, "7")) == grpc.StatusCode.OK
    assert _check(address, "wrong") == grpc.StatusCode.UNAUTHENTICATED
    assert _check(address, None) == grpc.StatusCode.UNAUTHENTICATED


def test_auth_check_refuses_a_streaming_call(server):
    address, _ = server
    with channel(address, token="wrong") as chan:
        stream = health_pb2_grpc.HealthStub(chan).Watch(
            health_pb2.HealthCheckRequest(service=""), timeout=10)
        with pytest.raises(grpc.RpcError) as err:
            next(stream)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with channel(address, token=ALICE) as chan:
        stream = health_pb2_grpc.HealthStub(chan).Watch(
            health_pb2.HealthCheckRequest(service=""), timeout=10)
        assert next(stream).status == health_pb2.HealthCheckResponse.SERVING
        stream.cancel()


def test_a_reloaded_identities_holds_from_the_next_call(server):
    address, current = server
    assert _check(address, ALICE) == grpc.StatusCode.OK
    new_alice = new_token()
    current[0] = Identities(DAEMON_TOKEN, (UserEntry("alice", USER, frozenset(),
                                                     token_hash(new_alice)),))
    assert _check(address, ALICE) == grpc.StatusCode.UNAUTHENTICATED
    assert _check(address, new_alice) == grpc.StatusCode.OK
    assert _check(address, ROOT) == grpc.StatusCode.UNAUTHENTICATED


def test_the_token_gate_of_a_worker_admits_its_one_token_only():
    """``serve(token=T)`` (the workers') admits T and nothing else: no job token, and a
    header without ``Bearer`` is refused as before."""
    servicer = health.HealthServicer()
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    srv, port = serve("127.0.0.1:0",
                      [lambda s: health_pb2_grpc.add_HealthServicer_to_server(servicer, s)],
                      token=DAEMON_TOKEN, max_workers=2)
    address = f"127.0.0.1:{port}"
    try:
        assert _check(address, DAEMON_TOKEN) == grpc.StatusCode.OK
        assert _check(address, job_token(DAEMON_TOKEN, "7")) == grpc.StatusCode.UNAUTHENTICATED
        assert _check(address, "wrong") == grpc.StatusCode.UNAUTHENTICATED
        with grpc.insecure_channel(address) as chan:
            with pytest.raises(grpc.RpcError) as err:
                health_pb2_grpc.HealthStub(chan).Check(
                    health_pb2.HealthCheckRequest(service=""), timeout=10,
                    metadata=(("authorization", DAEMON_TOKEN),))
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        srv.stop(None)


def test_roles_are_the_documented_names():
    assert (identity.ADMIN, identity.USER, identity.DAEMON, identity.JOB) == \
        ("admin", "user", "daemon", "job")
