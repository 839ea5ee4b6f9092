"""The store on load is a door (issue #17; docs/design.md, Safety rules): a row of a real store's
SQLite file corrupted behind the daemon's back (a NaN weight, steps out of range, text that
is not UTF-8, an unknown state or job type) never crashes the daemon or reaches the core.
A bad job row is loaded as ``failed`` with a one-line ``refused at load: FIELD: ...`` reason,
written back, and the other jobs load and run; a bad server, throughput or meta row is
dropped with a warning. Checked on the ``Store``, on a real executor, and by restarting a
real scheduler daemon on a corrupted file."""

from __future__ import annotations

import json
import logging
import sqlite3

import pytest

from gavelsched.core import JobSpec
from gavelsched.daemon.store import UPSERT_ROWS, JobRow, ServerRow, Store, StoreError
from traces import default_table

from .cluster import Cluster, running
from .fake_worker import FakeWorker
from .test_round_aligned import Scheduler

SPEC = {"job_type": "A3C", "scale_factor": 1, "total_steps": 100, "priority_weight": 1.0,
        "slo_s": None, "entity": None, "mixed": False, "min_scale_factor": None,
        "workload": "steps", "command": ""}


def _store(path, jobs: int = 3) -> None:
    store = Store(path)
    for i in range(jobs):
        store.add_job(JobRow(JobSpec(id=str(i), job_type="A3C", scale_factor=1,
                                     total_steps=100), workload="steps", arrival_s=float(i)))
    store.close()


def _sql(path, statement: str, *args) -> None:
    db = sqlite3.connect(path / "gavelsched.db")
    db.execute(statement, args)
    db.commit()
    db.close()


def _damaged(path, statements: list[str]) -> None:
    """Run each of ``statements`` on the store's file behind its back."""
    for statement in statements:
        _sql(path, statement)


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def _spec(**change) -> str:
    return json.dumps({**SPEC, **change})


BAD_JOBS = [
    ("UPDATE jobs SET spec=? WHERE id='1'", (_spec(priority_weight=float("nan")),),
     "priority_weight: must be a finite number, got nan"),
    ("UPDATE jobs SET spec=? WHERE id='1'", (_spec(priority_weight=1e300),),
     "priority_weight: must be <= 1e+06, got 1e+300"),
    ("UPDATE jobs SET steps_done=-5 WHERE id='1'", (), "steps_done: must be >= 0, got -5"),
    ("UPDATE jobs SET steps_done=9223372036854775808 WHERE id='1'", (),
     "steps_done: must be an integer, got 9.223372036854776e+18"),
    ("UPDATE jobs SET steps_done=100 WHERE id='1'", (),
     "steps_done: must be < total_steps (100) for a queued job, got 100"),
    ("UPDATE jobs SET spec=? WHERE id='1'", (_spec(total_steps=2**64),),
     "total_steps: must be <= 9007199254740992, got 18446744073709551616"),
    ("UPDATE jobs SET spec=? WHERE id='1'", (_spec(total_steps=2**53 + 1),),  # (float64's)
     "total_steps: must be <= 9007199254740992, got 9007199254740993"),
    ("UPDATE jobs SET spec=CAST(X'7b226a6f625f74797065223a2022ff22' AS TEXT) WHERE id='1'",
     (), "spec: not UTF-8 text at line 1, byte offset 14 (0xff)"),
    ("UPDATE jobs SET reason=CAST(X'6f6bff' AS TEXT) WHERE id='1'", (),
     "reason: not UTF-8 text at line 1, byte offset 2 (0xff)"),
    ("UPDATE jobs SET state='zombie' WHERE id='1'", (),
     "state: must be one of queued, running, preempted, held, done, failed, cancelled, got "
     "'zombie'"),
    ("UPDATE jobs SET state=7 WHERE id='1'", (), "state: must be one of queued, running, "
                                                 "preempted, held, done, failed, cancelled, got "
                                                 "'7'"),
    ("UPDATE jobs SET steps_done=CAST(X'ff' AS TEXT) WHERE id='1'", (),
     "steps_done: not UTF-8 text at line 1, byte offset 0 (0xff)"),
    ("UPDATE jobs SET arrival_s='soon' WHERE id='1'", (),
     "arrival_s: must be a number, got 'soon'"),
    ("UPDATE jobs SET spec='{' WHERE id='1'", (), "spec: must be JSON, got '{'"),
    ("UPDATE jobs SET spec=? WHERE id='1'", ('{"gpus": 4}',), "spec: unknown key 'gpus'"),
    ("UPDATE jobs SET spec=? WHERE id='1'", ('{"scale_factor": 1}',),
     "job_type: missing from the stored spec"),
    ("UPDATE jobs SET spec=? WHERE id='1'", (_spec(scale_factor=0),),
     "scale_factor: must be >= 1, got 0"),
    ("UPDATE jobs SET spec=? WHERE id='1'", (_spec(min_scale_factor=2),),
     "min_scale_factor: must be <= 1, got 2"),
    ("UPDATE jobs SET spec=? WHERE id='1'", (_spec(job_type="A3C\n"),),
     "job_type: must not contain control characters, got 'A3C\\n'"),
    ("UPDATE jobs SET spec=? WHERE id='1'", (_spec(mixed="yes"),),
     "mixed: must be true or false, got 'yes'"),
    ("UPDATE jobs SET spec=? WHERE id='1'", (_spec(workload="rm -rf"),), "workload: "),
]


@pytest.mark.parametrize("statement, args, reason", BAD_JOBS)
def test_a_bad_job_row_loads_failed_naming_the_field(tmp_path, statement, args, reason):
    _store(tmp_path)
    _sql(tmp_path, statement, *args)
    store = Store(tmp_path)
    jobs = store.jobs()
    assert [j.id for j in jobs] == ["0", "1", "2"]
    bad = jobs[1]
    assert bad.state == "failed" and "\n" not in bad.reason
    assert bad.reason.startswith(f"refused at load: {reason}"), bad.reason
    assert [(j.state, j.reason, j.spec.total_steps) for j in (jobs[0], jobs[2])] == \
        [("queued", None, 100)] * 2
    store.close()
    db = sqlite3.connect(tmp_path / "gavelsched.db")          # written back
    assert db.execute("SELECT state, reason FROM jobs WHERE id='1'").fetchone() == \
        ("failed", bad.reason)
    db.close()
    again = Store(tmp_path)
    assert again.jobs() == jobs
    again.close()


def test_a_job_type_the_table_does_not_know_is_refused_with_the_table(tmp_path):
    _store(tmp_path)
    _sql(tmp_path, "UPDATE jobs SET spec=? WHERE id='0'", _spec(job_type="Bogus"))
    _sql(tmp_path, "UPDATE jobs SET spec=? WHERE id='2'", _spec(scale_factor=3))
    store = Store(tmp_path)
    assert [j.state for j in store.jobs()] == ["queued"] * 3     # no table: not checked
    jobs = store.jobs(default_table())
    assert [j.state for j in jobs] == ["failed", "queued", "failed"]
    assert jobs[0].reason == ("refused at load: job_type: no worker type of the throughput "
                              "table runs it at scale factor 1, got 'Bogus'")
    assert jobs[2].reason.endswith("runs it at scale factor 3, got 'A3C'")
    store.close()


def test_a_row_without_a_usable_id_is_left_out_and_kept(tmp_path, caplog):
    _store(tmp_path)
    _sql(tmp_path, "UPDATE jobs SET id=CAST(X'ff' AS TEXT) WHERE id='1'")
    with caplog.at_level(logging.WARNING, logger="gavelsched.daemon.store"):
        store = Store(tmp_path)
        assert [j.id for j in store.jobs()] == ["0", "2"]
    assert any("id: not UTF-8" in r.getMessage() for r in caplog.records)
    assert store.next_job_id() == 3
    store.close()
    db = sqlite3.connect(tmp_path / "gavelsched.db")
    assert db.execute("SELECT COUNT(*) FROM jobs").fetchone() == (3,)
    db.close()


def test_bad_server_throughput_scaling_and_meta_rows_are_dropped_with_a_warning(tmp_path,
                                                                               caplog):
    store = Store(tmp_path)
    store.put_server(ServerRow(0, "v100", (0, 1), "127.0.0.1:1", "h"))
    for sid, wtype in ((1, "k80"), (2, "p100"), (3, "k80"), (4, "v100")):
        store.put_server(ServerRow(sid, wtype, (10 + sid,), "127.0.0.1:1", "h"))
    for job, rate in (("0", 12.5), ("1", 3.0), ("2", 4.0), ("3", 5.0)):
        store.put_throughput_later(job, "v100", rate)
    for gpus, rate in ((2, 20.0), (3, 27.0), (4, 33.0)):
        store.put_scaling("A3C", "v100", gpus, rate)
    store.set_meta({"round": 7, "epoch_unix": 1.5e9, "startup_s/A3C": "2.5",
                    "startup_n/A3C": 3, "attempts/0": "[]", "attempts/1": "[]",
                    "next_generation": 6, "generation/0": 5, "checkpoint_generation/0": 4})
    store.add_job(JobRow(JobSpec(id="0", job_type="A3C", scale_factor=1, total_steps=9)))
    store.close()
    _damaged(tmp_path, [
            "UPDATE servers SET workers='[0' WHERE id=1",
            "UPDATE servers SET worker_type=CAST(X'ff' AS TEXT) WHERE id=2",
            "UPDATE servers SET workers='[1]' WHERE id=3",           # v100 0's GPU
            "UPDATE throughputs SET steps_per_s=-1.0 WHERE job_id='1'",
            "UPDATE throughputs SET steps_per_s='fast' WHERE job_id='2'",
            "UPDATE throughputs SET worker_type=CAST(X'ff' AS TEXT) WHERE job_id='3'",
            "UPDATE scaling SET gpus=0 WHERE gpus=3",
            "UPDATE scaling SET steps_per_s='nan' WHERE gpus=4",
            "UPDATE meta SET value='abc' WHERE key='round'",
            "UPDATE meta SET value='nan' WHERE key='epoch_unix'",
            "UPDATE meta SET value='inf' WHERE key='startup_s/A3C'",
            "UPDATE meta SET value='[{\"round\": -1}]' WHERE key='attempts/0'",
            "UPDATE meta SET value=CAST(X'ff' AS TEXT) WHERE key='attempts/1'",
            "UPDATE meta SET value='0' WHERE key='next_job_id'",
            "UPDATE meta SET value='-6' WHERE key='next_generation'"])
    with caplog.at_level(logging.WARNING, logger="gavelsched.daemon.store"):
        store = Store(tmp_path)
        servers, rates, counts = store.servers(), store.throughputs(), store.scaling()
    assert [s.id for s in servers] == [0, 4]
    assert rates == {"0": {"v100": 12.5}}
    assert counts == {("A3C", "v100", 2): 20.0}
    meta = {k: store.get_meta(k) for k in ("round", "epoch_unix", "startup_s/A3C",
                                           "startup_n/A3C", "attempts/0", "attempts/1")}
    assert meta == {"round": None, "epoch_unix": None, "startup_s/A3C": None,
                    "startup_n/A3C": "3", "attempts/0": None, "attempts/1": None}
    assert store.next_job_id() == 1                  # past the stored job, not 0 again
    assert store.get_meta("next_generation") == "6"  # past every generation issued
    warnings = _warnings(caplog)
    assert len(warnings) == 16 and all("\n" not in w for w in warnings), warnings
    assert any("servers row" in w and "workers: must be JSON" in w for w in warnings)
    assert any("must not repeat another server's worker ids" in w for w in warnings)
    assert any("meta row" in w and "round: must be an integer, got 'abc'" in w
               for w in warnings)
    store.close()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="gavelsched.daemon.store"):
        again = Store(tmp_path)                      # deleted: the next start is quiet
        assert [s.id for s in again.servers()] == [0, 4] and again.throughputs() == rates
    assert not caplog.records
    again.close()


def test_pairs_measured_rates_round_trip_and_a_bad_row_is_dropped(tmp_path, caplog):
    store = Store(tmp_path)
    rows = {("0+1", "0", "v100"): 3.0, ("0+1", "1", "v100"): 2.5, ("0+1", "1", "k80"): 1.0,
            ("2+3", "2", "v100"): 4.0, ("2+4", "2", "v100"): 5.0, ("5+6", "5", "v100"): 6.0,
            ("7+8", "7", "v100"): 7.0}
    for (pair, job, wtype), rate in rows.items():
        store.put_pair_throughput_later(pair, job, wtype, rate)
    store.close()
    again = Store(tmp_path)
    assert again.pair_throughputs()["0+1"] == {"v100": {"0": 3.0, "1": 2.5}, "k80": {"1": 1.0}}
    again.close()
    _damaged(tmp_path, ["UPDATE pair_throughputs SET pair='2' WHERE pair='2+3'",
                        "UPDATE pair_throughputs SET job_id='9' WHERE pair='2+4'",
                        "UPDATE pair_throughputs SET steps_per_s='nan' WHERE pair='5+6'",
                        "UPDATE pair_throughputs SET pair=CAST(X'ff' AS TEXT) WHERE pair='7+8'"])
    with caplog.at_level(logging.WARNING, logger="gavelsched.daemon.store"):
        again = Store(tmp_path)
        assert again.pair_throughputs() == {
            "0+1": {"v100": {"0": 3.0, "1": 2.5}, "k80": {"1": 1.0}}}
    warnings = _warnings(caplog)
    assert len(warnings) == 4 and all("pair_throughputs row" in w and "\n" not in w
                                      for w in warnings), warnings
    assert any("pair: must name two jobs" in w for w in warnings)
    assert any("job_id: must be a job of pair 2+4" in w for w in warnings)
    again.close()


def test_a_real_executor_runs_the_good_jobs_of_a_corrupted_store(tmp_path):
    """Store + ``DaemonExecutor`` (real core, policy solves, SQLite) on a hand-moved clock:
    the bad rows are failed at load and never reach the core; the good ones are placed."""
    state = tmp_path / "state"
    _store(state, jobs=4)
    _sql(state, "UPDATE jobs SET spec=? WHERE id='1'", _spec(priority_weight=float("inf")))
    _sql(state, "UPDATE jobs SET steps_done=-1 WHERE id='2'")
    s = Scheduler(tmp_path, gpus=2)
    try:
        jobs = s.x.jobs
        assert [jobs[j].state for j in "0123"] == ["queued", "failed", "failed", "queued"]
        assert jobs["1"].reason == ("refused at load: priority_weight: must be a finite "
                                    "number, got inf")
        assert set(s.x.core.pending_jobs) == {"0", "3"}
        s.at(1.0)
        assert {r.job_id for r in s.sent.runs} == {"0", "3"}
        status = {j.id: (j.state, j.reason) for j in s.x.snapshot.status().jobs}
        assert status["2"] == ("failed", "refused at load: steps_done: must be >= 0, got -1")
    finally:
        s.close()


def test_a_real_scheduler_restarts_on_a_corrupted_store(tmp_path):
    """Three jobs are submitted to a real scheduler daemon; it stops; its SQLite file is
    corrupted (a NaN weight, an unknown state, a bad meta and server row); it restarts: the
    good job runs to done on a new worker, and ``status`` shows each bad job failed with its
    reason."""
    cluster = Cluster(tmp_path, round_seconds=1.0, heartbeat_seconds=0.3)
    with running(cluster) as c:
        ids = [c.submit(30), c.submit(30), c.submit(30)]
    state = tmp_path / "state"
    spec = json.loads(sqlite3.connect(state / "gavelsched.db").execute(
        "SELECT spec FROM jobs WHERE id=?", (ids[0],)).fetchone()[0])
    _sql(state, "UPDATE jobs SET spec=? WHERE id=?",
         json.dumps({**spec, "priority_weight": float("nan")}), ids[0])
    _sql(state, "UPDATE jobs SET state='paused' WHERE id=?", ids[2])
    _sql(state, "INSERT OR REPLACE INTO meta VALUES ('round', 'x')")
    _sql(state, "INSERT INTO servers VALUES (9, 'v100', 'oops', '127.0.0.1:1', 'h')")
    with running(cluster) as c:
        c.fakes.append(FakeWorker(c.address, "v100"))
        done = c.wait_done(ids)
        assert done[ids[1]].state == "done"
        assert (done[ids[0]].state, done[ids[0]].reason) == (
            "failed", "refused at load: priority_weight: must be a finite number, got nan")
        assert (done[ids[2]].state, done[ids[2]].reason) == (
            "failed", "refused at load: state: must be one of queued, running, preempted, "
                      "held, done, failed, cancelled, got 'paused'")
        assert [w.type for w in c.status().workers] == ["v100"]
    log = (tmp_path / "scheduler.log").read_text()
    assert "Traceback" not in log
    assert "servers row" in log and "meta row" in log


def test_the_executor_loads_its_jobs_with_its_table(tmp_path):
    _store(tmp_path / "state", jobs=2)
    _sql(tmp_path / "state", "UPDATE jobs SET spec=? WHERE id='0'", _spec(job_type="Bogus"))
    s = Scheduler(tmp_path)
    try:
        assert [s.x.jobs[j].state for j in "01"] == ["failed", "queued"]
    finally:
        s.close()


def test_a_one_row_write_is_one_statement_and_several_rows_one_transaction(tmp_path):
    """Each sqlite call lets go of the GIL, which the executor must then wait for (issue
    #30): a write of one row is one statement, committed on its own, not BEGIN, the
    statement and COMMIT; a write of several rows stays all or none."""
    store = Store(tmp_path)
    sent: list[str] = []
    store._db.set_trace_callback(sent.append)
    store.add_usage(("j", 1, "u", "e", "v100", 1, 0.0, 10.0, 1.0))
    store.add_hosts("j", [3])
    store.set_meta({"round": 3, "next_generation": 2})     # several keys: one statement
    assert not [s for s in sent if s.startswith(("BEGIN", "COMMIT"))] and len(sent) == 3
    sent.clear()
    store.add_hosts("k", [4, 5])
    assert sent[0].startswith("BEGIN") and sent[-1] == "COMMIT" and len(sent) == 4
    store._db.set_trace_callback(None)
    assert store.hosts() == {"j": (3,), "k": (4, 5)}
    assert len(store.usage()) == 1
    assert store.get_meta("round") == "3"
    store.close()


def test_estimates_are_written_behind_in_one_transaction_and_read_back_at_once(tmp_path):
    """Start-up statistics and measured throughputs (estimates, thousands a round at 2,048
    GPUs) wait for ``flush_later``: one transaction for all of them, the newest value of
    each key. A read of them, and ``close``, flush first; a ``set_meta`` of the same key
    is newer than what waits."""
    store = Store(tmp_path)
    sent: list[str] = []
    store._db.set_trace_callback(sent.append)
    for n in range(1, 4):
        store.put_throughput_later("j", "v100", 2.5 * n)
        store.put_throughput_later(f"k{n}", "k80", 1.0)
        store.set_meta_later({"startup_s/a": f"{1.5 * n}", "startup_n/a": n})
    store.set_meta_later({"restart_s/a": "9.0"})
    store.set_meta({"restart_s/a": "4.0"})                   # newer than the one waiting
    assert len(sent) == 1                                     # that set_meta alone
    sent.clear()
    store.flush_later()
    assert sent[0].startswith("BEGIN") and sent[-1] == "COMMIT" and len(sent) == 4
    sent.clear()
    store.flush_later()                                       # nothing waits: no call
    assert sent == []
    for mono, flushed in ((10.0, True), (10.5, False), (11.0, True)):   # once a second
        store.put_throughput_later("j", "k80", mono)
        store.flush_estimates(mono)
        assert bool(sent) == flushed and store._later_rates == ({} if flushed else
                                                                {("j", "k80"): mono})
        sent.clear()
    store._db.set_trace_callback(None)
    assert store.throughputs() == {"j": {"v100": 7.5, "k80": 11.0}, "k1": {"k80": 1.0},
                                   "k2": {"k80": 1.0}, "k3": {"k80": 1.0}}
    assert store.meta_family("startup_") == {"s/a": "4.5", "n/a": "3"}
    assert store.get_meta("restart_s/a") == "4.0"
    store.set_meta_later({"exit_s/a": "0.7"})
    assert store.get_meta("exit_s/a") == "0.7"                # a read flushes first
    store.put_throughput_later("j", "p100", 1.5)
    with store.transaction() as db:                           # (inside one: no BEGIN again)
        store.set_meta({"round": 1}, db)
        assert store.throughputs()["j"] == {"v100": 7.5, "k80": 11.0, "p100": 1.5}
    store.set_meta_later({"save_n/a": 2})
    store.close()                                             # close flushes
    again = Store(tmp_path)
    assert again.get_meta("save_n/a") == "2" and again.get_meta("round") == "1"
    with pytest.raises(KeyError, match="declared nowhere"):
        again.set_meta_later({"no_such_key": 1})
    many = 2 * UPSERT_ROWS + 500                  # more than one statement binds
    again._db.set_trace_callback(sent.append)
    sent.clear()
    again.set_meta({f"attempts/{i}": "[]" for i in range(many)})
    for i in range(many):
        again.put_throughput_later(f"m{i}", "k80", 1.0 + i)
    again.flush_later()
    assert [s.split(" ")[0] for s in sent] == ["BEGIN", "INSERT", "INSERT", "INSERT", "COMMIT"] * 2
    again._db.set_trace_callback(None)
    assert len(again.meta_family("attempts/")) == many
    rates = again.throughputs()
    assert len(rates) == many + 4 and rates[f"m{many - 1}"] == {"k80": float(many)}
    again.close()


def test_a_batchs_meta_rows_and_hosts_are_written_together_as_it_ends(tmp_path):
    """A round's launches (``DaemonExecutor._start_round``): their fencing tokens and hosts,
    thousands at 2,048 GPUs, in one transaction as the batch ends, before their calls are
    sent; a read inside flushes first, and a batch that fails keeps what it did."""
    store = Store(tmp_path)
    sent: list[str] = []
    store._db.set_trace_callback(sent.append)
    with store.batched():
        for i in range(300):
            store.set_meta({"next_generation": i + 2, f"generation/{i}": i + 1})
            store.add_hosts(str(i), [i % 7, 100])
        with store.batched():                   # (nested: the outer one writes)
            store.add_hosts("x", [1])
        assert sent == []
    assert [s.split(" ")[0] for s in sent] == ["BEGIN", "INSERT", "INSERT", "COMMIT"]
    sent.clear()
    store._db.set_trace_callback(None)
    assert store.get_meta("next_generation") == "301" and store.get_meta("generation/299") == "300"
    assert store.hosts()["299"] == (5, 100) and store.hosts()["x"] == (1,)
    with pytest.raises(RuntimeError):
        with store.batched():
            store.set_meta({"next_generation": 999})
            assert store.get_meta("next_generation") == "999"     # a read flushes first
            store.add_hosts("y", [2])
            raise RuntimeError("a launch failed")
    store.close()
    again = Store(tmp_path)
    assert again.get_meta("next_generation") == "999" and again.hosts()["y"] == (2,)
    again.close()


def test_a_usage_table_from_before_shares_loads_with_every_run_its_own(tmp_path):
    # usage.share came with space sharing on the workers (a pair's job: half its GPU's time)
    tmp_path.mkdir(exist_ok=True)
    db = sqlite3.connect(tmp_path / "gavelsched.db")
    db.execute("CREATE TABLE usage (job_id TEXT NOT NULL, generation INTEGER NOT NULL, "
               "user TEXT NOT NULL, entity TEXT NOT NULL, worker_type TEXT NOT NULL, "
               "gpus INTEGER NOT NULL, start_unix REAL NOT NULL, end_unix REAL NOT NULL, "
               "price REAL NOT NULL)")
    db.execute("INSERT INTO usage VALUES ('j', 1, 'u', '', 'v100', 1, 0.0, 10.0, 1.0)")
    db.commit()
    db.close()
    store = Store(tmp_path)
    store.add_usage(("k", 1, "u", "", "v100", 1, 0.0, 10.0, 1.0, 0.5))
    assert [(row[0], row[-1]) for row in store.usage()] == [("j", 1.0), ("k", 0.5)]
    store.close()


def test_a_store_file_that_is_not_a_database_stops_the_start_in_one_line(tmp_path, capsys):
    """A damaged ``gavelsched.db`` (bytes that are no SQLite file): ``gavelsched scheduler``
    exits 2 with one line naming the file and what to do, and leaves it as it was (it
    printed SQLite's traceback before)."""
    from gavelsched.cli import main

    state = tmp_path / "state"
    state.mkdir()
    damaged = bytes(range(256)) * 40
    (state / "gavelsched.db").write_bytes(damaged)
    config = tmp_path / "cluster.yaml"
    config.write_text(f"listen: 127.0.0.1:0\npolicy: fifo\nround_seconds: 6\n"
                      f"state_dir: {state}\neta: false\n")
    assert main(["scheduler", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    line = (f"gavelsched scheduler: error: {state / 'gavelsched.db'}: the scheduler's store "
            f"cannot be opened (file is not a database): it is left as it is: restore it from "
            f"a backup, or move it away to start with no jobs")
    assert err.splitlines() == [line], err
    assert (state / "gavelsched.db").read_bytes() == damaged
    with pytest.raises(StoreError, match="file is not a database"):
        Store(state)
