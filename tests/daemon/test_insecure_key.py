"""The cluster YAML's ``insecure`` key and the metrics endpoint (issue #17; docs/design.md, Safety
rules: nothing listens beyond loopback without authentication unless ``--insecure`` says
so). ``insecure: true`` is ``gavelsched scheduler --insecure``; ``/metrics`` has no auth, so
a ``metrics_listen`` beyond loopback needs that opt-in, or the scheduler refuses to start
with one line saying how to fix it. Binds 127.0.0.1 or 0.0.0.0 only."""

from __future__ import annotations

import subprocess
import sys
import urllib.request

import pytest
import yaml

from gavelsched.cli import main
from gavelsched.daemon.config import ConfigError, load_config, parse_config
from gavelsched.daemon.local import free_port, subprocess_env, wait_until
from gavelsched.daemon.server import SchedulerDaemon

GOOD = {"listen": "127.0.0.1:0", "policy": "max_min_fairness_perf", "round_seconds": 2,
        "state_dir": "state"}


def _config(tmp_path, **extra) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({**GOOD, "state_dir": str(tmp_path / "state"), **extra}))
    return str(path)


@pytest.mark.parametrize("value", ["yes", 1, "true", [True]])
def test_insecure_must_be_a_boolean(tmp_path, value):
    with pytest.raises(ConfigError, match="insecure must be true or false"):
        parse_config({**GOOD, "insecure": value}, base=tmp_path)


def test_insecure_key_and_flag_are_the_same_opt_in(tmp_path):
    assert not parse_config(GOOD, base=tmp_path).insecure
    assert parse_config({**GOOD, "insecure": True}, base=tmp_path).insecure
    assert parse_config(GOOD, base=tmp_path, insecure=True).insecure
    assert parse_config({**GOOD, "insecure": False}, base=tmp_path, insecure=True).insecure


@pytest.mark.parametrize("metrics", ["127.0.0.1:9100", "localhost:9100", "[::1]:9100",
                                     "127.0.0.2:0"])
def test_metrics_on_loopback_needs_nothing(tmp_path, metrics):
    config = parse_config({**GOOD, "metrics_listen": metrics}, base=tmp_path)
    assert config.metrics_listen == metrics and not config.metrics_exposed


@pytest.mark.parametrize("metrics", ["0.0.0.0:9100", "10.1.2.3:9100",
                                     "metrics.example.org:9100", "[::]:9100"])
def test_metrics_beyond_loopback_is_refused_without_the_opt_in(tmp_path, metrics):
    with pytest.raises(ConfigError) as err:
        parse_config({**GOOD, "metrics_listen": metrics}, base=tmp_path, name="c.yaml")
    line = str(err.value)
    assert "\n" not in line
    assert line == (f"c.yaml: metrics_listen {metrics} is beyond loopback and /metrics has "
                    f"no auth: bind it to 127.0.0.1:9100, or set insecure: true (or pass "
                    f"--insecure) to expose it")
    for opt_in in ({"insecure": True}, {}):
        config = parse_config({**GOOD, "metrics_listen": metrics, **opt_in}, base=tmp_path,
                              insecure=not opt_in)
        assert config.metrics_exposed and config.insecure


def test_cli_refuses_exposed_metrics_in_one_line_before_opening_anything(tmp_path, capsys):
    path = _config(tmp_path, metrics_listen="0.0.0.0:0")
    assert main(["scheduler", "--config", path]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("gavelsched scheduler: error: ")
    assert "metrics_listen 0.0.0.0:0 is beyond loopback" in lines[0]
    assert "bind it to 127.0.0.1:0, or set insecure: true" in lines[0]
    assert not (tmp_path / "state").exists()


def _metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        return reply.read().decode()


def test_the_flag_lets_metrics_listen_on_every_interface(tmp_path):
    config = load_config(_config(tmp_path, metrics_listen="0.0.0.0:0"), insecure=True)
    daemon = SchedulerDaemon(config, insecure=config.insecure).start()
    try:
        assert "gavelsched_jobs" in _metrics(daemon.metrics_port)   # every interface
    finally:
        daemon.stop()


def test_insecure_key_starts_a_scheduler_beyond_loopback_and_warns(tmp_path):
    """As ``--insecure``: the scheduler listens on every interface without a token and
    serves ``/metrics`` there, warning once for each."""
    metrics = free_port()
    path = _config(tmp_path, listen="0.0.0.0:0", metrics_listen=f"0.0.0.0:{metrics}",
                   insecure=True)
    out, err = tmp_path / "out", tmp_path / "err"
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen([sys.executable, "-m", "gavelsched", "scheduler", "--config",
                                 path], stdout=o, stderr=e, env=subprocess_env())
    try:
        def listening():
            if proc.poll() is not None:
                raise AssertionError(f"scheduler exited {proc.returncode}: {err.read_text()}")
            return "listening on port" in out.read_text()
        wait_until(listening, 90, "the scheduler to listen")
        assert "gavelsched_jobs" in _metrics(metrics)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    lines = err.read_text().splitlines()
    assert len([x for x in lines if "WARNING" in x and "--insecure:" in x
                and "has no auth token" in x]) == 1, lines
    assert len([x for x in lines if "WARNING" in x and f"/metrics on 0.0.0.0:{metrics} has "
                "no auth" in x]) == 1, lines
