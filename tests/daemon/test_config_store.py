"""The cluster YAML (bad keys exit 2 naming the key) and the SQLite store (WAL mode,
transactional writes, a restart restores everything)."""

from __future__ import annotations

import socket
import sys

import pytest
import yaml

from gavelsched.cli import main
from gavelsched.daemon.config import ConfigError, load_config, parse_config
from gavelsched.core import JobSpec
from gavelsched.daemon.store import JobRow, ServerRow, Store

GOOD = {"listen": "127.0.0.1:0", "policy": "max_min_fairness_perf", "round_seconds": 6,
        "state_dir": "state"}


def test_good_config_and_defaults(tmp_path):
    cfg = parse_config({**GOOD, "tls": {"cert": "c.pem", "key": "k.pem", "ca": "ca.pem"}},
                       base=tmp_path)
    assert cfg.state_dir == tmp_path / "state"
    assert cfg.checkpoints == tmp_path / "state" / "checkpoints"
    assert cfg.tls.ca == tmp_path / "ca.pem"
    assert cfg.plan_lead == pytest.approx(0.3 * 6)
    assert cfg.resolve_interval == pytest.approx(1920 * 6 / 360)
    assert cfg.state_dir_min_free_mb == 256


@pytest.mark.parametrize("change, key", [
    ({"bogus": 1}, "bogus"),
    ({"round_seconds": "fast"}, "round_seconds"),
    ({"round_seconds": -1}, "round_seconds"),
    ({"listen": "nowhere"}, "listen"),
    ({"policy": "no_such_policy"}, "policy"),
    ({"expected_workers": 1.5}, "expected_workers"),
    ({"metrics_job_series": -1}, "metrics_job_series"),
    ({"metrics_job_series": "all"}, "metrics_job_series"),
    ({"state_dir_min_free_mb": -1}, "state_dir_min_free_mb"),
    ({"state_dir_min_free_mb": float("nan")}, "state_dir_min_free_mb"),
    ({"tls": {"cert": "c", "key": "k", "pem": "x"}}, "tls.pem"),
    ({"tls": {"cert": "c"}}, "tls.cert"),
    ({"heartbeat_seconds": 0}, "heartbeat_seconds"),
    ({"workers_tls": "yes"}, "workers_tls"),
])
def test_bad_key_is_named(tmp_path, change, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        parse_config({**GOOD, **change}, base=tmp_path)


@pytest.mark.parametrize("missing", ["listen", "policy", "round_seconds", "state_dir"])
def test_missing_key_is_named(tmp_path, missing):
    data = {k: v for k, v in GOOD.items() if k != missing}
    with pytest.raises(ConfigError, match=f"missing key '{missing}'"):
        parse_config(data, base=tmp_path)


def test_bad_yaml_names_the_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("listen: [127.0.0.1\npolicy: x\n")
    with pytest.raises(ConfigError, match="bad YAML at line"):
        load_config(path)


def test_cli_exits_2_naming_the_key(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**GOOD, "round_secs": 6}))
    assert main(["scheduler", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "round_secs" in lines[0] and "Traceback" not in err


@pytest.mark.parametrize("key, interval", [({}, 0.001), ({"gil_switch_ms": 2.5}, 0.0025)])
def test_the_scheduler_process_switches_threads_on_the_gil_as_its_config_says(
        tmp_path, key, interval):
    """``gavelsched scheduler`` sets its process's switch interval from ``gil_switch_ms``
    (1 ms unless set) once its config has loaded, before it binds: its gRPC intake and
    store writes wait that long at most for the GIL from a busy plan (issue #30). A taken
    port ends the run there, after the interval is set."""
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**GOOD, **key, "state_dir": str(tmp_path / "state"),
                                    "listen": f"127.0.0.1:{held.getsockname()[1]}"}))
    default = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)
        assert main(["scheduler", "--config", str(path)]) == 2
        assert sys.getswitchinterval() == pytest.approx(interval)
    finally:
        sys.setswitchinterval(default)
        held.close()


@pytest.mark.parametrize("value", [0.05, 101, "fast", float("nan"), True])
def test_a_gil_switch_interval_out_of_range_is_refused_naming_its_key(value):
    with pytest.raises(ConfigError, match=r"gil_switch_ms must be a number of milliseconds "
                                          r"in 0\.1\.\.100"):
        parse_config({**GOOD, "gil_switch_ms": value})


def test_pair_partners_default_to_16_reach_the_rules_and_a_bad_count_is_refused():
    assert parse_config(GOOD).rules.pair_partners == 16
    assert parse_config({**GOOD, "pair_partners": 0}).rules.pair_partners == 0   # every pair
    for value in (-1, "8", True, 2**31, 1.5):
        with pytest.raises(ConfigError, match=r"pair_partners must be an integer >= 0 \(0: "
                                              r"every pair\) and <= 2147483647"):
            parse_config({**GOOD, "pair_partners": value})


def test_store_round_trip_in_wal_mode(tmp_path):
    store = Store(tmp_path)
    assert store.journal_mode == "wal"
    job = JobRow(JobSpec(id="0", job_type="A3C", scale_factor=1, total_steps=100, slo_s=30.0,
                         entity="team"), workload="steps", arrival_s=1.5)
    store.add_job(job)
    store.add_job(job.with_id("1").but(command="python train.py", workload=""))
    store.update_jobs([job.but(state="done", steps_done=100, completion_s=9.0)])
    store.put_server(ServerRow(3, "v100", (5, 6), "127.0.0.1:1", "h"))
    store.put_throughput_later("0", "v100", 12.5)
    store.set_meta({"round": 7})
    store.close()
    again = Store(tmp_path)
    jobs = again.jobs()
    assert [j.id for j in jobs] == ["0", "1"]
    assert jobs[0] == job.but(state="done", steps_done=100, completion_s=9.0)
    assert jobs[1].command == "python train.py"
    assert again.servers() == [ServerRow(3, "v100", (5, 6), "127.0.0.1:1", "h")]
    assert again.throughputs() == {"0": {"v100": 12.5}}
    assert again.get_meta("round") == "7" and again.next_job_id() == 2


def test_store_transaction_is_all_or_nothing(tmp_path):
    store = Store(tmp_path)
    job = JobRow(JobSpec(id="0", job_type="A3C", scale_factor=1, total_steps=100))
    store.add_job(job)
    with pytest.raises(RuntimeError), store.transaction() as db:
        db.execute("UPDATE jobs SET steps_done=50 WHERE id='0'")
        raise RuntimeError("crash mid-write")
    assert store.jobs()[0].steps_done == 0
