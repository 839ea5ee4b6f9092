"""Job control and accounting on real daemons (issue #28): the real scheduler and two real
emulated worker daemons (4 v100 and 2 k80 GPUs) on loopback, one-second rounds, a users
file (an admin, alice of team-a, bob of team-b), prices and metrics; ``steps`` jobs are
real processes stepping GavelIterator, and every call is the CLI a user runs (in this
process) or the client API over gRPC.

``hold`` keeps a queued job from ever starting and stops a running one at its lease's
end, its durable steps kept, until ``release`` (it resumes from its checkpoint); ``update``
is in force and recorded; a time limit ends a job ``failed`` at its checkpoint with
reason "time limit"; ``after`` waits for done jobs and cancels down a chain; an array's
copies each see their ``GAVEL_ARRAY_INDEX`` and its id holds and cancels them all; the
usage report equals the store's runs at the configured prices, by user, entity and type,
and so do the Prometheus counters; bad input is one line and exit 2, and the scheduler
serves on."""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import shlex
import sqlite3
import sys
import urllib.request
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import grpc
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from gavelsched.cli import main
from gavelsched.client.api import connect
from gavelsched.client.request import JobRequest
from gavelsched.daemon.meter import TIME_LIMIT_SLACK_S
from gavelsched.daemon.users import add_user
from gavelsched.rpc import pb, pb_grpc
from gavelsched.rpc.security import channel, write_token
from traces import default_table

from .cluster import JOB_TYPE, LOOPBACK_ANY, Cluster, wait_until

DAEMON_TOKEN = "job-control-daemon-token"
ROUND_S = 1.0
PRICES = {"v100": 3.0, "k80": 1.0}
LIMIT_S = 3 * ROUND_S                  # the time-limited job's max_runtime_s
USERS = (("root", "admin", ()), ("alice", "user", ("team-a",)), ("bob", "user", ("team-b",)))
STEPS = f"exec {shlex.quote(sys.executable)} -m workers.workloads.steps"
FINAL = ("done", "failed", "cancelled")


def gavel(c: Cluster, user: str, *args: str) -> SimpleNamespace:
    """``gavelsched ARGS`` as ``user`` (their token file), in this process: exit code,
    stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([*args, "--scheduler", c.address, "--token-file", str(c.tokens[user])])
    return SimpleNamespace(rc=rc, out=out.getvalue(), err=err.getvalue())


def refused_in_one_line(got: SimpleNamespace, *words: str) -> str:
    assert got.rc == 2, (got.out, got.err)
    lines = got.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in got.err, got.err
    assert all(w in lines[0] for w in words), lines[0]
    return lines[0]


def job_file(folder: Path, name: str, **fields) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"job_type": JOB_TYPE, "workload": "steps", **fields}))
    return path


def submitted(c: Cluster, user: str, folder: Path, name: str, **fields) -> str:
    got = gavel(c, user, "submit", str(job_file(folder, name, **fields)))
    assert got.rc == 0, got.err
    return got.out.strip().splitlines()[-1]


def history(c: Cluster, user: str, job: str) -> list[tuple[str, str, str]]:
    return [(e.user, e.action, e.detail) for e in c.clients[user].history(job)]


def start_steps(c: Cluster, job: str) -> list[int]:
    """The step each run of ``job`` started at, from its processes' logs on the workers
    (GavelIterator: "starts at step S of T")."""
    found = []
    for path in sorted(c.root.glob(f"worker*/logs/{job}/round*-rank0.err")):
        found += [int(m) for m in re.findall(r"starts at step (\d+) of", path.read_text())]
    return found


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("control")
    users, tokens = root / "users.yaml", {}
    for name, role, entities in USERS:
        token = add_user(users, name, role, entities, known_entities={"team-a", "team-b"})
        tokens[name] = root / f"{name}.token"
        write_token(tokens[name], token)
    c = Cluster(root, token=DAEMON_TOKEN, round_seconds=ROUND_S, extra={
        "entities": {"team-a": 1, "team-b": 1}, "prices": PRICES, "users_file": str(users),
        "metrics_listen": LOOPBACK_ANY})
    c.tokens, c.clients = tokens, {}
    try:
        c.start_scheduler()
        c.start_worker("v100", gpus=4)
        c.start_worker("k80", gpus=2)
        wait_until(lambda: c.alive_workers() == 2, 60, "two workers")
        c.clients = {name: connect(c.address, token_file=tokens[name]) for name, *_ in USERS}
        alice = c.clients["alice"]
        # Stories that run on their own while the tests below act on the cluster.
        c.first = alice.submit(JobRequest(JOB_TYPE, 40, workload="steps"))
        c.second = alice.submit(JobRequest(JOB_TYPE, 20, workload="steps", after=(c.first,)))
        c.second_at_first = c.jobs()[c.second]
        c.limited = alice.submit(JobRequest(JOB_TYPE, 10**6, workload="steps",
                                            max_runtime_s=LIMIT_S))
        c.array_dir = root / "array"
        c.array_dir.mkdir()
        index_to = shlex.quote(str(c.array_dir)) + "/$GAVEL_JOB_ID"
        c.array = alice.submit_array(JobRequest(
            JOB_TYPE, 20, workload=None, command=f"echo $GAVEL_ARRAY_INDEX >> {index_to}; "
                                                 f"{STEPS}"), 3)
        yield c
    finally:
        for client in c.clients.values():
            client.close()
        c.stop()


# ---- hold and release ------------------------------------------------------------------------
def test_hold_keeps_a_queued_job_out_and_stops_a_running_one_at_its_lease_end(cluster,
                                                                               tmp_path):
    c = cluster
    running = submitted(c, "alice", tmp_path, "running", total_steps=150)
    wait_until(lambda: c.jobs()[running].state == "running", 60, "the job to run")
    assert gavel(c, "alice", "hold", running).rc == 0
    queued = submitted(c, "alice", tmp_path, "queued", total_steps=20)
    got = gavel(c, "alice", "hold", queued, "--reason", "waiting for data")
    assert got.rc == 0 and f"held {queued}" in got.out, got.err
    shown = c.jobs()[queued]
    assert (shown.state, shown.reason) == ("held", "waiting for data")
    assert c.jobs()[running].reason == "held by alice"
    got = gavel(c, "bob", "status", "--state", "held", "--json")
    assert got.rc == 0, got.err
    assert {(j["id"], j["reason"]) for j in json.loads(got.out)["jobs"]} == {
        (queued, "waiting for data"), (running, "held by alice")}

    other = submitted(c, "bob", tmp_path, "other", total_steps=20)   # rounds go on
    assert c.wait_done([other], timeout=90)[other].state == "done"
    held = wait_until(lambda: (j := c.jobs()[running]).gpus == 0 and j.steps_done > 0 and j,
                      60, "the held job's run to end")
    assert held.state == "held" and 0 < held.steps_done < 150
    shown = c.jobs()[queued]
    assert shown.state == "held" and shown.started_s < 0 and shown.steps_done == 0

    for job in (queued, running):
        assert gavel(c, "alice", "release", job).rc == 0
    done = c.wait_done([queued, running], timeout=90)
    assert [(done[j].state, done[j].steps_done) for j in (queued, running)] == [
        ("done", 20), ("done", 150)]
    assert held.steps_done in start_steps(c, running)      # resumed from its checkpoint
    assert [a for _, a, _ in history(c, "alice", queued)] == ["submit", "hold", "release",
                                                              "done"]
    assert ("alice", "hold", "waiting for data") in history(c, "alice", queued)


# ---- update, dependencies ------------------------------------------------------------------
def test_update_then_a_cancel_cascades_down_the_dependants(cluster, tmp_path):
    c = cluster
    head = submitted(c, "alice", tmp_path, "head", total_steps=10**6)
    waits = submitted(c, "alice", tmp_path, "waits", total_steps=20, after=[head])
    chain = submitted(c, "alice", tmp_path, "chain", total_steps=20, after=[head])
    tail = submitted(c, "bob", tmp_path, "tail", total_steps=20, after=[chain])
    shown = c.jobs()
    assert (shown[waits].state, shown[waits].reason) == ("queued", f"waiting for {head} "
                                                                   "(after)")
    assert shown[tail].reason == f"waiting for {chain} (after)"
    assert list(shown[tail].after) == [chain]

    assert gavel(c, "alice", "update", head, "--priority-weight", "3").rc == 0
    assert c.jobs()[head].priority_weight == 3.0
    assert history(c, "alice", head)[-1] == ("alice", "update", "priority_weight 3.0")
    refused_in_one_line(gavel(c, "bob", "update", head, "--priority-weight", "2"),
                        "PERMISSION_DENIED", f"bob may not update job {head}")
    refused_in_one_line(gavel(c, "alice", "update", head, "--entity", "team-b"),
                        "PERMISSION_DENIED", "team-b")
    assert c.jobs()[head].entity == "team-a"

    wait_until(lambda: c.jobs()[head].state == "running", 60, "the head to run")
    assert gavel(c, "alice", "cancel", head).rc == 0
    ended = c.wait_done([head, waits, chain, tail], timeout=60)
    assert ended[head].reason == "cancelled by alice"
    assert [(ended[j].state, ended[j].reason) for j in (waits, chain, tail)] == [
        ("cancelled", f"dependency {head} cancelled"),
        ("cancelled", f"dependency {head} cancelled"),
        ("cancelled", f"dependency {chain} cancelled")]
    assert all(ended[j].started_s < 0 for j in (waits, chain, tail))


def test_after_waits_until_its_job_is_done(cluster):
    c = cluster
    before = c.second_at_first
    assert (before.state, before.reason) == ("queued", f"waiting for {c.first} (after)")
    done = c.wait_done([c.first, c.second], timeout=90)
    assert done[c.first].state == done[c.second].state == "done"
    assert done[c.second].started_s >= done[c.first].ended_s


# ---- time limits ---------------------------------------------------------------------------
def test_a_time_limit_fails_the_job_at_its_checkpoint(cluster):
    c = cluster
    job = c.wait_done([c.limited], timeout=90)[c.limited]
    assert job.state == "failed" and job.reason.startswith("time limit"), job.reason
    assert job.max_runtime_s == LIMIT_S
    # it ran about its limit (it stops at the first checkpoint past it, then exits)
    assert LIMIT_S - TIME_LIMIT_SLACK_S <= job.run_s <= LIMIT_S + 4 * ROUND_S, job.run_s
    fastest = max(default_table().get(t, JOB_TYPE, 1) for t in PRICES)
    assert 0 < job.steps_done <= 1.05 * fastest * job.run_s     # its last checkpoint counts
    rows = store_usage(c, job_id=c.limited)
    assert sum(r["end_unix"] - r["start_unix"] for r in rows) == pytest.approx(job.run_s,
                                                                             abs=1e-3)


# ---- arrays ----------------------------------------------------------------------------------
def test_each_copy_of_an_array_sees_its_index(cluster):
    c = cluster
    ids, array_id = c.array.job_ids, c.array.array_id
    assert list(ids) == [f"{array_id}_{i}" for i in range(3)]
    done = c.wait_done(ids, timeout=90)
    for i, job in enumerate(ids):
        assert (done[job].state, done[job].array_id, done[job].array_index) == (
            "done", array_id, i)
        lines = (c.array_dir / job).read_text().split()
        assert lines and set(lines) == {str(i)}, lines


def test_an_arrays_id_holds_and_cancels_every_copy(cluster, tmp_path):
    c = cluster
    got = gavel(c, "alice", "submit", str(job_file(tmp_path, "array", total_steps=10**6)),
                "--count", "3")
    assert got.rc == 0, got.err
    array_id, *ids = got.out.split()
    assert ids == [f"{array_id}_{i}" for i in range(3)]
    wait_until(lambda: any(c.jobs()[j].state == "running" for j in ids), 60, "a copy to run")
    refused_in_one_line(gavel(c, "bob", "hold", array_id), "PERMISSION_DENIED")
    assert gavel(c, "alice", "hold", array_id, "--reason", "all of it").rc == 0
    wait_until(lambda: all((j := c.jobs()[i]).state == "held" and j.gpus == 0 for i in ids),
               60, "every copy held, its run ended")
    assert {c.jobs()[i].reason for i in ids} == {"all of it"}
    refused_in_one_line(gavel(c, "bob", "cancel", array_id), "PERMISSION_DENIED")
    got = gavel(c, "alice", "cancel", array_id)
    assert got.rc == 0 and got.out.strip() == f"cancelled {array_id}", got.err
    ended = c.wait_done(ids, timeout=30)
    assert {(ended[i].state, ended[i].reason) for i in ids} == {("cancelled",
                                                                 "cancelled by alice")}
    refused_in_one_line(gavel(c, "alice", "cancel", array_id), "already cancelled")
    assert [a for _, a, _ in history(c, "alice", ids[1])] == ["submit", "hold", "cancel",
                                                              "cancelled"]


# ---- bad input -------------------------------------------------------------------------------
def test_bad_input_is_one_line_and_the_scheduler_serves_on(cluster, tmp_path):
    c = cluster
    probe = submitted(c, "bob", tmp_path, "probe", total_steps=20)
    nxt = str(int(probe) + 1)                    # the id the next submission would take
    before = set(c.jobs())
    for fields, count, words in [
            ({"after": ["nope"]}, None, "after: no job or array 'nope'"),
            ({"after": [nxt]}, None, f"after: {nxt} is this submission itself"),
            ({"after": [nxt]}, "3", f"after: {nxt} is this submission itself"),
            ({"after": [f"{nxt}_2"]}, "3", f"after: {nxt}_2 is this submission itself"),
            ({}, "0", "count: must be between 1 and 10000, got 0"),
            ({}, "10001", "count: must be between 1 and 10000, got 10001"),
            ({"max_runtime_s": -5}, None, "max_runtime_s has a bad value -5"),
            ({"max_runtime_s": math.nan}, None, "max_runtime_s has a bad value nan"),
            ({"after": "a\nb"}, None, "after"),
    ]:
        args = ["submit", str(job_file(tmp_path, "bad", total_steps=20, **fields))]
        refused_in_one_line(gavel(c, "alice", *args, *(["--count", count] if count else [])),
                            words)
    refused_in_one_line(gavel(c, "alice", "hold", "nope"), "NOT_FOUND", "unknown job")
    refused_in_one_line(gavel(c, "alice", "release", "1234567"), "NOT_FOUND")
    refused_in_one_line(gavel(c, "alice", "update", "nope", "--priority-weight", "nan"),
                        "priority-weight")
    refused_in_one_line(gavel(c, "alice", "usage", "--since", "yesterday-ish"), "since")

    # the scheduler's own door, for what the CLI would not send
    chan = channel(c.address, token=c.tokens["alice"].read_text().strip())
    stub = pb_grpc.ClientToSchedulerStub(chan)
    for kw, words in [({"max_runtime_s": -5.0}, "max_runtime_s: must be"),
                      ({"max_runtime_s": math.nan}, "max_runtime_s: must be"),
                      ({"max_runtime_s": math.inf}, "max_runtime_s: must be"),
                      ({"count": 10_001}, "count: must be between 1 and 10000"),
                      ({"count": -3}, "count: must be between"),
                      ({"after": ["nope"]}, "after: no job or array 'nope'"),
                      ({"after": [nxt]}, "is this submission itself")]:
        with pytest.raises(grpc.RpcError) as err:
            stub.Submit(pb.JobRequest(job_type=JOB_TYPE, total_steps=20, workload="steps",
                                      **kw), timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert words in err.value.details() and "\n" not in err.value.details()
    some = sorted(before)[0]
    for call, request, code in [
            ("Hold", pb.JobControlRequest(job_id=some, reason="two\nlines"), "INVALID_ARGUMENT"),
            ("Hold", pb.JobControlRequest(job_id=some, reason="nul\0"), "INVALID_ARGUMENT"),
            ("Update", pb.UpdateRequest(job_id=some, entity="x\0y"), "INVALID_ARGUMENT"),
            ("Usage", pb.UsageRequest(by="colour"), "INVALID_ARGUMENT"),
            ("Usage", pb.UsageRequest(since_unix=math.nan), "INVALID_ARGUMENT")]:
        with pytest.raises(grpc.RpcError) as err:
            getattr(stub, call)(request, timeout=10)
        assert err.value.code().name == code and "\n" not in err.value.details()
    chan.close()

    assert set(c.jobs()) == before and c.healthy()     # nothing got an id; it serves
    job = submitted(c, "bob", tmp_path, "after-all", total_steps=20)
    assert job == nxt
    done = c.wait_done([probe, job], timeout=90)
    assert done[probe].state == done[job].state == "done"


# ---- accounting (last: every run of the tests above has ended) -------------------------------
def store_usage(c: Cluster, job_id: str | None = None) -> list[dict]:
    """The store's usage rows, read on a read-only connection of its own."""
    db = sqlite3.connect(f"file:{c.root / 'state' / 'gavelsched.db'}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    try:
        rows = db.execute("SELECT * FROM usage" + (" WHERE job_id = ?" if job_id else ""),
                          (job_id,) if job_id else ()).fetchall()
    finally:
        db.close()
    return [dict(r) for r in rows]


def test_usage_is_the_sum_over_the_stores_runs_at_the_prices(cluster):
    c = cluster
    wait_until(lambda: all(j.state in FINAL for j in c.jobs().values())
               and not any(w.runs for w in c.status().workers), 90, "every run to end")
    rows = store_usage(c)
    assert rows and {r["worker_type"] for r in rows} <= set(PRICES)
    for r in rows:
        assert r["price"] == pytest.approx(PRICES[r["worker_type"]])
        assert r["end_unix"] >= r["start_unix"]
    hours = {k: defaultdict(float) for k in ("user", "entity", "type")}
    cost = {k: defaultdict(float) for k in ("user", "entity", "type")}
    for r in rows:
        h = r["gpus"] * (r["end_unix"] - r["start_unix"]) / 3600
        for by, key in (("user", r["user"]), ("entity", r["entity"]),
                        ("type", r["worker_type"])):
            hours[by][key] += h
            cost[by][key] += h * r["price"]
    total_h, total_cost = sum(hours["type"].values()), sum(cost["type"].values())
    assert set(hours["user"]) == {"alice", "bob"} and set(hours["entity"]) == {"team-a",
                                                                               "team-b"}
    for by in ("user", "entity", "type"):
        for since in ([], ["--since", "1d"]):
            got = gavel(c, "bob", "usage", "--by", by, "--json", *since)
            assert got.rc == 0, got.err
            report = json.loads(got.out)
            assert report["by"] == by and report["runs"] == len(rows)
            assert report["gpu_hours"] == pytest.approx(total_h, rel=1e-9)
            assert report["cost"] == pytest.approx(total_cost, rel=1e-9)
            lines = {x["key"]: x for x in report["lines"]}
            assert set(lines) == set(hours[by])
            for key, line in lines.items():
                assert line["gpu_hours"] == pytest.approx(hours[by][key], rel=1e-9)
                assert line["cost"] == pytest.approx(cost[by][key], rel=1e-9)
    for t, h in hours["type"].items():
        assert cost["type"][t] == pytest.approx(PRICES[t] * h)

    text = urllib.request.urlopen(f"http://127.0.0.1:{c.metrics_port}/metrics",
                                  timeout=10).read().decode()
    seconds, dollars = defaultdict(float), defaultdict(float)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "gavelsched_gpu_seconds_total":
                for by, key in (("user", sample.labels["user"]),
                                ("entity", sample.labels["entity"]),
                                ("type", sample.labels["type"])):
                    seconds[by, key] += sample.value
            elif sample.name == "gavelsched_cost_dollars_total":
                dollars[sample.labels["entity"]] += sample.value
                dollars["user", sample.labels["user"]] += sample.value
    assert sum(v for (by, _), v in seconds.items() if by == "type") == pytest.approx(
        3600 * total_h, rel=1e-6)
    for by in ("user", "entity", "type"):
        for key, h in hours[by].items():
            assert seconds[by, key] == pytest.approx(3600 * h, rel=1e-6)
    for entity, money in cost["entity"].items():
        assert dollars[entity] == pytest.approx(money, rel=1e-6)
    for user, money in cost["user"].items():
        assert dollars["user", user] == pytest.approx(money, rel=1e-6)
