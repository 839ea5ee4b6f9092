"""Teams and users on a real cluster (issue #28): the real scheduler and a real emulated
worker daemon on loopback, a ``cluster.yaml`` with two entities and a users file made with
the real ``gavelsched user add`` (admin ``root``, ``alice`` of team-a, ``bob`` of team-b).

Over gRPC with each token, and with the CLI a user runs: a user submits only to their own
entities (another's: PERMISSION_DENIED, an unknown one: INVALID_ARGUMENT, one line each) and
acts only on their own jobs (another's: PERMISSION_DENIED, and the job is unchanged); drain
and reload are for admins; a token of no one is UNAUTHENTICATED; the daemon token submits
nothing; a job's own token acts on its own job only; ``history JOB`` and the scheduler's
log say who did what; a job run by the worker finishes on its own token (never the
worker's token file). An operator adds a team and a user with a reload. Bad input (the
users file, the entities block) is refused in one line naming the key, by ``gavelsched
reload``, SIGHUP and ``gavelsched scheduler --config``, and the settings in force stay.
Without a users file the single token is the admin's, as before.
"""

from __future__ import annotations

import math
import re
import shlex
import signal
import stat
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest
import yaml

from gavelsched.cli import main as cli_main
from gavelsched.client import ClientError, JobRequest, connect
from gavelsched.rpc import pb, pb_grpc
from gavelsched.rpc.identity import job_token, token_hash
from gavelsched.rpc.security import channel, write_token

from .cluster import ENV, JOB_TYPE, Cluster, running, wait_until
from .fake_worker import FakeWorker

DAEMON = "users-cluster-daemon-token"
ENTITIES = {"team-a": {"weight": 1.0}, "team-b": {"weight": 2.0, "policy": "fifo"}}
USERS = {"root": ("admin", ()), "alice": ("user", ("team-a",)), "bob": ("user", ("team-b",))}
LONG = 1_000_000             # steps: a job that runs until it is cancelled
NOT_FINAL = ("queued", "running", "preempted")
POLICY = "max_min_fairness_water_filling_perf"     # hierarchical: it reads the entities


# ---- helpers -------------------------------------------------------------------------------
def gavelsched(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """The CLI as a user runs it: a fresh process."""
    return subprocess.run([sys.executable, "-m", "gavelsched", *args], env=ENV,
                          capture_output=True, text=True, timeout=timeout)


def as_user(c: Cluster, name: str, *args: str) -> subprocess.CompletedProcess:
    """A client command of user ``name`` (``daemon``: the daemon token) against ``c``."""
    token_file = c.token_file if name == "daemon" else c.root / f"{name}.token"
    return gavelsched(*args, "--scheduler", c.address, "--token-file", str(token_file))


def refused_in_one_line(got: subprocess.CompletedProcess, *words: str) -> str:
    """The CLI's refusal: exit 2, one line on stderr holding ``words``, no traceback."""
    assert got.returncode == 2, (got.returncode, got.stdout, got.stderr)
    lines = got.stderr.splitlines()
    assert len(lines) == 1, got.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def refused(code: str, call, *words: str) -> ClientError:
    """``call()`` raises ``ClientError`` with gRPC status ``code`` in one line naming
    ``words``."""
    with pytest.raises(ClientError) as err:
        call()
    assert err.value.code == code, (err.value.code, str(err.value))
    line = str(err.value)
    assert "\n" not in line and "\n" not in err.value.details, line
    for word in words:
        assert word in line, line
    return err.value


def user_add(config: Path, name: str, role: str, entities=(), *more: str) -> str:
    """``gavelsched user add`` (``more``: its other flags): the token on the last line of
    its output."""
    got = gavelsched("user", "add", name, "--role", role, "--config", str(config),
                     *[arg for e in entities for arg in ("--entity", e)], *more)
    assert got.returncode == 0, got.stderr
    token = got.stdout.splitlines()[-1]
    assert token and " " not in token, got.stdout
    return token


def job(entity: str | None, total_steps: int = LONG, **kw) -> JobRequest:
    return JobRequest(job_type=JOB_TYPE, total_steps=total_steps, entity=entity,
                      workload=kw.pop("workload", "steps"), **kw)


def config_data(c: Cluster) -> dict:
    return yaml.safe_load(c.config_path.read_text())


@contextmanager
def config_as(c: Cluster, **changes):
    """The cluster's YAML with ``changes`` while inside; the file as it was afterwards."""
    before = c.config_path.read_text()
    c.config_path.write_text(yaml.safe_dump({**yaml.safe_load(before), **changes}))
    try:
        yield c.config_path
    finally:
        c.config_path.write_text(before)


def scheduler_log(c: Cluster) -> str:
    return (c.root / "scheduler.log").read_text(errors="replace")


# ---- the cluster ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("users")
    c = Cluster(root, token=DAEMON, round_seconds=1.5, policy=POLICY,
                extra={"entities": ENTITIES, "users_file": "users.yaml"})   # (beside it)
    c.tokens = {}
    for name, (role, entities) in USERS.items():
        c.tokens[name] = user_add(c.config_path, name, role, entities)
        write_token(root / f"{name}.token", c.tokens[name])
    c.clients = {name: connect(c.address, token=t) for name, t in c.tokens.items()}
    c.clients["daemon"] = connect(c.address, token=DAEMON)
    try:
        c.start_scheduler()
        c.start_worker("v100", gpus=2)
        wait_until(lambda: c.alive_workers() == 1, 60, "the worker")
        yield c
    finally:
        for client in c.clients.values():
            client.close()
        c.stop()


def api(c: Cluster, name: str):
    return c.clients[name]


def state(c: Cluster, job_id: str):
    """Job ``job_id`` as the admin sees it (finished or not)."""
    return api(c, "root").status().job(job_id)


def wait_state(c: Cluster, job_id: str, states, what: str):
    """Job ``job_id`` once it is in one of ``states``."""
    def reached():
        job = state(c, job_id)
        return job if job.state in states else None
    return wait_until(reached, 60, f"job {job_id} {what}")


# ---- the users file ------------------------------------------------------------------------
def test_the_users_file_holds_hashes_never_tokens(cluster):
    path = cluster.root / "users.yaml"
    text = path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for name, token in cluster.tokens.items():
        assert token not in text and token_hash(token) in text, name
    assert len(set(cluster.tokens.values())) == len(USERS)
    got = gavelsched("user", "list", "--config", str(cluster.config_path))
    assert got.returncode == 0, got.stderr
    rows = {line.split()[0]: line.split()[1] for line in got.stdout.splitlines()[1:]}
    assert rows == {"root": "admin", "alice": "user", "bob": "user"}
    # a duplicate user is refused by the CLI in one line, and the file is unchanged
    refused_in_one_line(gavelsched("user", "add", "alice", "--role", "user", "--entity",
                                   "team-a", "--config", str(cluster.config_path)),
                        "alice", "already exists")
    assert path.read_text() == text


# ---- submit: entities ----------------------------------------------------------------------
def test_a_user_submits_only_to_their_own_entities(cluster, tmp_path):
    alice, bob = api(cluster, "alice"), api(cluster, "bob")
    mine = alice.submit(job("team-a"))
    theirs = bob.submit(job("team-b"))
    jobs = {j.id: j for j in alice.status().jobs}
    assert (jobs[mine].user, jobs[mine].entity) == ("alice", "team-a")
    assert (jobs[theirs].user, jobs[theirs].entity) == ("bob", "team-b")
    before = len(alice.status(active=False).jobs)
    refused("PERMISSION_DENIED", lambda: alice.submit(job("team-b")), "alice", "team-b")
    refused("INVALID_ARGUMENT", lambda: alice.submit(job("team-z")), "entity", "team-z")
    # with no entity named, a user of one entity submits to it
    only = alice.submit(job(None))
    assert alice.status().job(only).entity == "team-a"
    # an admin submits to any entity; the daemon token and a job's own token to none
    root_job = api(cluster, "root").submit(job("team-b"))
    refused("PERMISSION_DENIED", lambda: api(cluster, "daemon").submit(job("team-a")),
            "may not submit")
    with connect(cluster.address, token=job_token(DAEMON, mine)) as as_job:
        refused("PERMISSION_DENIED", lambda: as_job.submit(job("team-a")), "may not submit")
    # the CLI: exit 2 and one line
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({"job_type": JOB_TYPE, "total_steps": LONG,
                                    "entity": "team-b", "workload": "steps"}))
    refused_in_one_line(as_user(cluster, "alice", "submit", str(spec)),
                        "PERMISSION_DENIED", "team-b")
    assert len(alice.status(active=False).jobs) == before + 2      # only and root_job
    for who, job_id in (("alice", mine), ("alice", only), ("bob", theirs),
                        ("root", root_job)):
        api(cluster, who).cancel(job_id)
    assert state(cluster, mine).state == "cancelled"


# ---- acting on jobs ------------------------------------------------------------------------
def test_a_user_acts_only_on_their_own_jobs(cluster):
    alice, bob, root = api(cluster, "alice"), api(cluster, "bob"), api(cluster, "root")
    target = alice.submit(job("team-a"))
    before = state(cluster, target)
    for call in (lambda: bob.cancel(target), lambda: bob.hold(target, "mine now"),
                 lambda: bob.release(target),
                 lambda: bob.update(target, priority_weight=5.0),
                 lambda: bob.update(target, entity="team-b"),
                 lambda: bob.history(target), lambda: list(bob.logs(target))):
        refused("PERMISSION_DENIED", call, "bob", target)
    after = state(cluster, target)
    assert after.state in NOT_FINAL and after.state != "held"
    assert (after.user, after.entity, after.priority_weight) == (
        before.user, before.entity, before.priority_weight) == ("alice", "team-a", 1.0)

    alice.hold(target, "waiting for data")
    held = wait_state(cluster, target, ("held",), "held")
    assert held.reason == "waiting for data"
    refused("PERMISSION_DENIED", lambda: bob.release(target), "bob")
    assert state(cluster, target).state == "held"
    alice.release(target)
    wait_state(cluster, target, NOT_FINAL, "released")
    assert root.update(target, priority_weight=2.0)          # an admin acts on any job
    assert state(cluster, target).priority_weight == 2.0
    alice.cancel(target)
    assert state(cluster, target).state == "cancelled"

    got = as_user(cluster, "alice", "history", target)
    assert got.returncode == 0, got.stderr
    events = [line.split()[1:3] for line in got.stdout.splitlines()[1:]]
    assert [e for e in events if e[0] != "scheduler"] == [
        ["alice", "submit"], ["alice", "hold"], ["alice", "release"], ["root", "update"],
        ["alice", "cancel"]]


def test_status_shows_the_user_and_mine_filters_by_it(cluster):
    alice, bob = api(cluster, "alice"), api(cluster, "bob")
    hers, his = alice.submit(job("team-a")), bob.submit(job("team-b"))
    try:
        users = {j.id: j.user for j in alice.status(active=False).jobs}
        assert {j.id for j in alice.status(active=False, mine=True).jobs} == {
            i for i, u in users.items() if u == "alice"}
        assert {j.id for j in bob.status(mine=True, active=True).jobs} == {his}
        assert {j.id for j in alice.status(user="bob", active=True).jobs} == {his}

        def rows(got: subprocess.CompletedProcess) -> dict[str, str]:
            assert got.returncode == 0, got.stderr
            lines = got.stdout.splitlines()
            assert lines[1].split()[:3] == ["id", "type", "user"]
            end = next(i for i, line in enumerate(lines) if line.startswith("workers:"))
            return {line.split()[0]: line.split()[2] for line in lines[2:end]}

        assert rows(as_user(cluster, "alice", "status", "--mine", "--all")) == {
            i: "alice" for i, u in users.items() if u == "alice"}
        everyone = rows(as_user(cluster, "root", "status"))
        assert (everyone[hers], everyone[his]) == ("alice", "bob")
    finally:
        alice.cancel(hers)
        bob.cancel(his)


# ---- admins --------------------------------------------------------------------------------
def test_drain_and_reload_are_for_admins(cluster):
    alice, root = api(cluster, "alice"), api(cluster, "root")
    server = int(root.status().workers[0].id)
    refused("PERMISSION_DENIED", lambda: alice.drain(server), "alice", "admins only")
    refused("PERMISSION_DENIED", lambda: alice.reload(), "alice", "admins only")
    refused("PERMISSION_DENIED", lambda: api(cluster, "daemon").reload(), "admins only")
    refused_in_one_line(as_user(cluster, "bob", "reload"), "PERMISSION_DENIED", "bob")
    assert not root.status().workers[0].drained
    assert root.drain(server).drained
    assert root.status().workers[0].drained
    assert not root.drain(server, undo=True).drained
    assert not root.status().workers[0].drained
    assert "reloaded by root: 2 entities, 3 users" in root.reload()


def test_a_token_of_no_one_is_unauthenticated(cluster, tmp_path):
    forged = f"gjob.1.{'A' * 43}"
    for token in ("nobody's token", forged, token_hash(cluster.tokens["alice"])):
        with connect(cluster.address, token=token) as client:
            refused("UNAUTHENTICATED", client.status, "UNAUTHENTICATED")
    write_token(tmp_path / "wrong", "nobody's token")
    refused_in_one_line(gavelsched("status", "--scheduler", cluster.address, "--token-file",
                                   str(tmp_path / "wrong")), "UNAUTHENTICATED")


def test_a_job_token_acts_on_its_own_job_only(cluster):
    alice = api(cluster, "alice")
    own, other = alice.submit(job("team-a")), alice.submit(job("team-a"))
    try:
        with channel(cluster.address, token=job_token(DAEMON, own)) as chan:
            iterator = pb_grpc.IteratorToSchedulerStub(chan)
            assert iterator.ReportSteps(pb.ReportStepsRequest(job_id=own), timeout=10).ok
            assert iterator.RenewLease(pb.RenewLeaseRequest(   # a stale run: told to stop
                job_id=own, generation=10**6), timeout=10).lease is not None
            for call, request in (
                    (iterator.RenewLease, pb.RenewLeaseRequest(job_id=other)),
                    (iterator.ReportSteps, pb.ReportStepsRequest(job_id=other)),
                    (iterator.InitJob, pb.InitJobRequest(job_id=other)),
                    (pb_grpc.WorkerToSchedulerStub(chan).Heartbeat, pb.HeartbeatRequest()),
                    (pb_grpc.ClientToSchedulerStub(chan).Cancel,
                     pb.CancelRequest(job_id=other))):
                with pytest.raises(grpc.RpcError) as err:
                    call(request, timeout=10)
                assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED, request
                assert "\n" not in err.value.details()
        # a user's token is not a job's: alice's own job's iterator calls are not hers
        with channel(cluster.address, token=cluster.tokens["alice"]) as chan:
            with pytest.raises(grpc.RpcError) as err:
                pb_grpc.IteratorToSchedulerStub(chan).RenewLease(
                    pb.RenewLeaseRequest(job_id=own), timeout=10)
            assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert state(cluster, other).state in NOT_FINAL
    finally:
        alice.cancel(own)
        alice.cancel(other)


def test_a_job_runs_to_the_end_on_its_own_token(cluster):
    seen = cluster.root / "job-env.txt"
    command = (f'echo "$GAVEL_JOB_TOKEN|${{GAVEL_TOKEN_FILE:-none}}" > {seen}; '
               f"exec {sys.executable} -m workers.workloads.steps")
    alice = api(cluster, "alice")
    job_id = alice.submit(job("team-a", total_steps=40, workload=None, command=command))
    done = alice.wait(job_id, timeout_s=120, poll_s=0.3)
    assert (done.state, done.steps_done) == ("done", 40), done
    assert seen.read_text().strip() == f"{job_token(DAEMON, job_id)}|none"
    assert list(alice.logs(job_id)) is not None        # her own job's logs are hers
    refused("PERMISSION_DENIED", lambda: list(api(cluster, "bob").logs(job_id)), "bob")
    history = alice.history(job_id)
    assert (history[0].user, history[0].action) == ("alice", "submit")
    assert any(e.user == "scheduler" and e.action == "done" for e in history), history


def test_the_scheduler_logs_who_did_what(cluster):
    """Its own actions: it ran on whichever worker process of the suite took it, where the
    actions of the tests above (the module's cluster is one per process) may not have run."""
    alice, root = api(cluster, "alice"), api(cluster, "root")
    target = alice.submit(job("team-a"))
    alice.hold(target, "audited")
    wait_state(cluster, target, ("held",), "held")
    alice.release(target)
    wait_state(cluster, target, NOT_FINAL, "released")
    root.update(target, priority_weight=2.0)
    alice.cancel(target)
    server = int(root.status().workers[0].id)
    root.drain(server)
    root.drain(server, undo=True)
    root.reload()
    wanted = [rf"gavelsched\.audit: {who}: {action} {target}\b" for who, action in (
        ("alice", "submit"), ("alice", "hold"), ("alice", "release"), ("root", "update"),
        ("alice", "cancel"))] + [r"gavelsched\.audit: root: drain \(server \d+\)",
                                 "reloaded by root"]
    wait_until(lambda: all(re.search(w, scheduler_log(cluster)) for w in wanted), 30,
               "the scheduler's log to name each action and who took it")


# ---- an operator adds a team and a user (docs/runtime.md) -----------------------------------
def test_an_operator_adds_a_team_and_a_user(cluster):
    data = config_data(cluster)
    data["entities"] = {**data["entities"], "team-c": {"weight": 1.0, "max_gpus": 1}}
    cluster.config_path.write_text(yaml.safe_dump(data))
    token = user_add(cluster.config_path, "carol", "user", ("team-c",))
    with connect(cluster.address, token=token) as carol:
        refused("UNAUTHENTICATED", carol.status)              # not before the reload
        got = as_user(cluster, "root", "reload")
        assert got.returncode == 0, got.stderr
        assert "reloaded by root: 3 entities, 4 users" in got.stdout
        job_id = carol.submit(job("team-c"))
        assert carol.status().job(job_id).user == "carol"
        assert {e.name for e in carol.status().entities} == {"team-a", "team-b", "team-c"}
        refused("PERMISSION_DENIED", lambda: carol.submit(job("team-a")), "carol")
        carol.cancel(job_id)
        got = gavelsched("user", "remove", "carol", "--config", str(cluster.config_path))
        assert got.returncode == 0, got.stderr
        api(cluster, "root").reload()
        refused("UNAUTHENTICATED", carol.status)              # her token stops working


def test_a_user_s_max_jobs_caps_their_unfinished_jobs(cluster):
    """A user with ``max_jobs`` (``gavelsched user add --max-jobs``) has at most that many
    unfinished jobs: a submission past it is refused whole, RESOURCE_EXHAUSTED in one line;
    a job that ends makes room again. Others' jobs do not count against it, and an admin
    without a cap is not capped."""
    token = user_add(cluster.config_path, "dana", "user", ("team-a",), "--max-jobs", "3")
    api(cluster, "root").reload()
    with connect(cluster.address, token=token) as dana:
        first = dana.submit_array(job("team-a"), 2).job_ids
        err = refused("RESOURCE_EXHAUSTED", lambda: dana.submit_array(job("team-a"), 2),
                      "dana has 2 unfinished jobs and may have at most 3 (max_jobs in the "
                      "users file): 2 more would make 4")
        assert err.details.startswith("dana has 2 unfinished jobs")
        assert sorted(j.id for j in dana.status(mine=True).jobs) == sorted(first)
        last = dana.submit(job("team-a"))                  # the third fits
        refused("RESOURCE_EXHAUSTED", lambda: dana.submit(job("team-a")), "dana has 3")
        others = api(cluster, "root").submit_array(job("team-a"), 4).job_ids   # not capped
        dana.cancel(first[0])
        wait_state(cluster, first[0], ("cancelled",), "cancelled")
        again = dana.submit(job("team-a"))                 # room again
        for job_id in (first[1], last, again):
            dana.cancel(job_id)
    for job_id in others:
        api(cluster, "root").cancel(job_id)
    got = gavelsched("user", "remove", "dana", "--config", str(cluster.config_path))
    assert got.returncode == 0, got.stderr
    api(cluster, "root").reload()


# ---- bad input: refused in one line, the settings in force stay -----------------------------
def _user(name: str, entities=("team-a",), digest: str | None = None) -> dict:
    return {"name": name, "role": "user", "entities": list(entities),
            "token_sha256": digest or token_hash(f"{name}-token")}


# (case, cluster.yaml changes, the users file's content (None: the good one), words)
BAD = [
    ("NaN weight", {"entities": {"team-a": {"weight": math.nan}}}, None,
     ["entities.team-a.weight", "finite"]),
    ("negative weight", {"entities": {"team-a": {"weight": -1}}}, None,
     ["entities.team-a.weight", "> 0"]),
    ("zero weight", {"entities": {"team-a": 0}}, None, ["entities.team-a", "> 0"]),
    ("unknown inner policy", {"entities": {"team-a": {"weight": 1, "policy": "lottery"}}},
     None, ["entities.team-a.policy", "lottery"]),
    ("malformed entities", {"entities": ["team-a", "team-b"]}, None, ["entities"]),
    ("unknown policy option", {"policy_options": {"budgett": 5}}, None,
     ["policy_options.budgett"]),
    ("duplicate user", {}, {"users": [_user("dave"), _user("dave", digest=token_hash("x"))]},
     ["users_file", "dave", "duplicate user"]),
    ("shared token", {}, {"users": [_user("dave"), _user("erin", digest=token_hash(
        "dave-token"))]}, ["users_file", "erin", "token_sha256"]),
    ("malformed users file", {}, "users: [\n", ["users_file", "bad YAML"]),
    ("user of an unknown entity", {}, {"users": [_user("dave", ("team-z",))]},
     ["users_file", "team-z"]),
    ("bad role", {}, {"users": [{**_user("dave"), "role": "root"}]}, ["users_file", "role"]),
    ("no jobs at all", {}, {"users": [{**_user("dave"), "max_jobs": 0}]},
     ["users_file", "dave", "max_jobs must be an integer >= 1"]),
    ("jobs not a count", {}, {"users": [{**_user("dave"), "max_jobs": 2.5}]},
     ["users_file", "dave", "max_jobs"]),
]


@contextmanager
def bad_config(c: Cluster, changes: dict, users) -> Path:
    """The cluster's YAML made bad by ``changes`` or by a users file holding ``users``."""
    if users is not None:
        path = c.root / "bad-users.yaml"
        path.write_text(users if isinstance(users, str) else yaml.safe_dump(users))
        path.chmod(0o600)
        changes = {**changes, "users_file": str(path)}
    with config_as(c, **changes) as config:
        yield config


def _still_in_force(c: Cluster) -> None:
    """The old settings and users are in force, and the scheduler serves."""
    alice = api(c, "alice")
    assert {(e.name, e.weight) for e in alice.status().entities} >= {
        ("team-a", 1.0), ("team-b", 2.0)}
    job_id = alice.submit(job("team-a"))
    refused("PERMISSION_DENIED", lambda: alice.submit(job("team-b")))
    alice.cancel(job_id)


@pytest.mark.parametrize("case,changes,users,words", BAD, ids=[b[0] for b in BAD])
def test_a_bad_reload_is_refused_and_the_old_settings_stay(cluster, case, changes, users,
                                                           words):
    with bad_config(cluster, changes, users):
        err = refused("INVALID_ARGUMENT", api(cluster, "root").reload, *words)
        assert "\n" not in err.details
        if case == "NaN weight":     # the CLI: exit 2 and the same line
            refused_in_one_line(as_user(cluster, "root", "reload"), *words)
    _still_in_force(cluster)


def test_a_bad_sighup_is_logged_and_the_old_settings_stay(cluster):
    with bad_config(cluster, {"entities": {"team-a": {"weight": -3}}}, None):
        cluster.scheduler.send_signal(signal.SIGHUP)
        line = wait_until(lambda: next((x for x in scheduler_log(cluster).splitlines()
                                        if "reload by SIGHUP refused" in x), None),
                          30, "the refused reload's log line")
        assert "entities.team-a.weight" in line
    assert cluster.scheduler.poll() is None and cluster.healthy()
    _still_in_force(cluster)
    cluster.scheduler.send_signal(signal.SIGHUP)          # the good file again
    wait_until(lambda: "reloaded by SIGHUP" in scheduler_log(cluster), 30, "the reload")
    _still_in_force(cluster)


@pytest.mark.parametrize("case,changes,users,words", BAD, ids=[b[0] for b in BAD])
def test_a_bad_config_stops_the_scheduler_in_one_line(tmp_path, capsys, case, changes,
                                                      users, words):
    """``gavelsched scheduler --config`` (in this process: the same ``main``; one case
    as a subprocess below): exit 2, one line naming the key, nothing served."""
    write_token(tmp_path / "token", DAEMON)
    good = tmp_path / "users.yaml"
    good.write_text(yaml.safe_dump({"users": [_user("alice")]}))
    good.chmod(0o600)
    data = {"listen": "127.0.0.1:0", "policy": POLICY, "round_seconds": 2,
            "state_dir": str(tmp_path / "state"), "auth_token_file": "token",
            "users_file": "users.yaml", "entities": ENTITIES, **changes}
    if users is not None:
        bad = tmp_path / "bad-users.yaml"
        bad.write_text(users if isinstance(users, str) else yaml.safe_dump(users))
        bad.chmod(0o600)
        data["users_file"] = str(bad)
    config = tmp_path / "cluster.yaml"
    config.write_text(yaml.safe_dump(data))
    assert cli_main(["scheduler", "--config", str(config)]) == 2
    err = capsys.readouterr().err.splitlines()
    err = [line for line in err if not line.startswith(tuple("0123456789"))]  # (log lines)
    assert len(err) == 1, err
    assert err[0].startswith("gavelsched scheduler: error: ")
    for word in words:
        assert word in err[0], err[0]
    assert not (tmp_path / "state").exists()
    if case == "duplicate user":
        refused_in_one_line(gavelsched("scheduler", "--config", str(config)), *words)


# ---- no users file -------------------------------------------------------------------------
def test_without_a_users_file_the_single_token_is_the_admin(tmp_path):
    token = "the-one-token"
    with running(Cluster(tmp_path, token=token, round_seconds=1.0)) as c:
        c.fakes.append(FakeWorker(c.address, "v100", token=token))
        wait_until(lambda: c.alive_workers() == 1, 30, "the worker")
        with connect(c.address, token=token) as admin:
            job_id = admin.submit(job("any-label"))
            assert admin.status().job(job_id).user == "admin"
            server = int(admin.status().workers[0].id)
            assert admin.drain(server).drained
            assert not admin.drain(server, undo=True).drained
            admin.cancel(job_id)
            assert admin.status(active=False).job(job_id).state == "cancelled"
            assert [e.action for e in admin.history(job_id)
                    if e.user == "admin"] == ["submit", "cancel"]
            assert "no users file" in admin.reload()
        with connect(c.address, token="another") as stranger:
            refused("UNAUTHENTICATED", stranger.status)
        # turning users on: an admin first, then the key, then a reload (no restart)
        data = config_data(c)
        c.config_path.write_text(yaml.safe_dump({**data, "users_file": "users.yaml"}))
        root_token = user_add(c.config_path, "root", "admin")
        with connect(c.address, token=token) as daemon, \
                connect(c.address, token=root_token) as root:
            assert "1 users" in daemon.reload()
            refused("PERMISSION_DENIED", lambda: daemon.submit(job("any-label")))
            refused("PERMISSION_DENIED", daemon.reload)
            assert root.status().job(job_id).user == "admin"         # its jobs stay
            root.cancel(root.submit(job("any-label")))


# ---- Kubernetes ----------------------------------------------------------------------------
def test_the_kubernetes_scheduler_reads_its_users_from_a_secret(tmp_path):
    """deploy/kubernetes/scheduler.yaml: ``users_file`` lies in the folder the
    ``gavelsched-users`` Secret is mounted at (mode 0400, not a subPath: updates reach the
    pod), the config folder too; ``user add`` works against the ConfigMap's entities."""
    deploy = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
    docs = list(yaml.safe_load_all((deploy / "scheduler.yaml").read_text()))
    (config_map,) = [d for d in docs if d["kind"] == "ConfigMap"]
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    data = yaml.safe_load(config_map["data"]["cluster.yaml"])
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    users = Path(data["users_file"])
    (name,) = [n for n, v in volumes.items()
               if v.get("secret", {}).get("secretName") == "gavelsched-users"]
    assert "subPath" not in mounts[name] and mounts[name]["readOnly"]
    assert users.parent == Path(mounts[name]["mountPath"])
    assert {"key": "users.yaml", "path": users.name} in volumes[name]["secret"]["items"]
    assert volumes[name]["secret"]["defaultMode"] == 0o400
    config = Path(container["command"][container["command"].index("--config") + 1])
    (config_mount,) = [m for m in mounts.values() if m["name"] == "config"]
    assert "subPath" not in config_mount and config.parent == Path(config_mount["mountPath"])
    assert data["entities"] and data["policy_options"] and data["prices"]
    # an operator's copy: the same entities, the users file beside it
    local = tmp_path / "cluster.yaml"
    local.write_text(yaml.safe_dump({**data, "users_file": "users.yaml"}))
    team = next(iter(data["entities"]))
    assert user_add(local, "carol", "user", (team,))
    refused_in_one_line(gavelsched("user", "add", "dan", "--role", "user", "--entity",
                                   "no-such-team", "--config", str(local)), "no-such-team")


# ---- the docs ------------------------------------------------------------------------------
def test_the_docs_commands_parse():
    """Every ``gavelsched`` command of docs/runtime.md's "Teams, users and quotas" parses."""
    from gavelsched.cli import build_parser

    text = (Path(__file__).resolve().parents[2] / "docs" / "runtime.md").read_text()
    section = text.split("### Teams, users and quotas", 1)[1].split("\n### ", 1)[0]
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", section, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip()
            if line.startswith("gavelsched "):
                commands.append(line)
    assert len(commands) >= 5
    for command in commands:
        args = shlex.split(command)[1:]
        try:
            build_parser(args).parse_args(args)
        except SystemExit as exit_:
            pytest.fail(f"`{command}` does not parse (exit {exit_.code})")

