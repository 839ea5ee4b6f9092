"""Refused at the door (issue #17): the job YAML of ``gavelsched submit`` and the cluster YAML
of ``gavelsched scheduler``, fuzzed with random bytes, random structures and random values.

The property, for every input: no traceback, and either success or exit code 2 with exactly
one line on stderr naming the file and the bad field. For the job YAML an independent
restatement of its rules (``acceptable``) must also agree with the door's verdict. The CLI
runs in-process (``gavelsched.cli.main``); a submission that passes the door is captured
instead of sent, and a config that passes it starts no daemon.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gavelsched.cli import jobs as client
from gavelsched.cli import main
from gavelsched.client.request import JOB_KEYS
from gavelsched.daemon.config import OPTIONAL, REQUIRED
from traces.workloads import WORKLOADS

# More examples for a deeper search: GAVEL_FUZZ_EXAMPLES=5000 pytest tests/cli/test_fuzz_inputs.py
FUZZ = settings(max_examples=int(os.environ.get("GAVEL_FUZZ_EXAMPLES", "80")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
STRUCTURE = ("unknown key", "missing key", "bad YAML", "not UTF-8", "expected a mapping")

# Values of every kind a YAML file can hold, leaning to the edges: NaN, ±inf, 0, negatives,
# integers beyond 32 and 64 bits, control characters, NUL, nested containers.
EDGES = st.sampled_from([0, -1, 1, 2, 2**31 - 1, 2**31, 2**63 - 1, 2**63, 10**30, -(2**64),
                         0.0, -0.0, 1e-7, 1e6, 1e7, 1e308, math.nan, math.inf, -math.inf,
                         "", "A3C", "steps", "nope", "a\nb", "a\tb", "x\0y", "\x7f", True,
                         False, None])
VALUES = st.one_of(EDGES, st.integers(), st.floats(), st.text(max_size=12),
                   st.lists(st.integers(), max_size=2),
                   st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """One folder for a test's examples (hypothesis runs many in one test call)."""
    return tmp_path_factory.mktemp("fuzz")


def fuzz_file(folder: Path, data: bytes, suffix: str) -> Path:
    path = folder / f"input{suffix}"
    path.write_bytes(data)
    return path


def assert_door(rc: int, err: str, path: Path, names) -> None:
    """Success, or exit 2 with one line naming the file and a field (or what is wrong with
    the file as a whole)."""
    assert "Traceback" not in err
    assert rc in (0, 2), err
    if rc == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert str(path) in lines[0]
        assert any(name in lines[0] for name in (*names, *STRUCTURE)), lines[0]


# ----------------------------------------------------------------------------- job YAML

def _name(x, empty: bool = True) -> bool:
    return (type(x) is str and (empty or x != "")
            and not any(c < " " or c == "\x7f" for c in x))


def _int(x, low: int, high: int) -> bool:
    return type(x) is int and low <= x <= high


def _finite(x) -> bool:
    try:
        return type(x) in (int, float) and math.isfinite(float(x))
    except OverflowError:
        return False


def acceptable(data) -> bool:
    """The job YAML's rules restated on their own (docs/design.md, Safety rules)."""
    if not isinstance(data, dict) or set(data) - set(JOB_KEYS):
        return False
    v = {k: x for k, x in data.items() if x is not None}
    if "job_type" not in v or "total_steps" not in v:
        return False
    sf = v.get("scale_factor", 1)
    checks = [_name(v["job_type"], empty=False), _int(v["total_steps"], 1, 2**53),
              _int(sf, 1, 2**31 - 1)]
    if "priority_weight" in v:
        x = v["priority_weight"]
        checks.append(_finite(x) and 1e-6 <= x <= 1e6)
    if "slo_s" in v:
        checks.append(_finite(v["slo_s"]) and v["slo_s"] > 0)
    checks += [_name(v[k]) for k in ("entity", "workload") if k in v]
    if "workload" in v and _name(v["workload"]) and v["workload"]:
        checks.append(v["workload"] in WORKLOADS)
    if "command" in v:
        checks.append(type(v["command"]) is str and "\0" not in v["command"])
    if "mixed" in v:
        checks.append(type(v["mixed"]) is bool)
    if "min_scale_factor" in v:
        checks.append(_int(sf, 1, 2**31 - 1) and _int(v["min_scale_factor"], 1, sf))
    if "max_runtime_s" in v:
        checks.append(_finite(v["max_runtime_s"]) and v["max_runtime_s"] > 0)
    if "after" in v:
        ids = [v["after"]] if type(v["after"]) in (str, int) else v["after"]
        checks.append(type(ids) is list and len(ids) <= 1000
                      and all(type(x) is int or _name(x, empty=False) for x in ids))
    return all(checks)


NAMES = st.text("abcxyz-_.0123456789 ", min_size=1, max_size=8)
GOOD_JOB_VALUES = {
    "workload": st.sampled_from(tuple(WORKLOADS)), "command": st.text(max_size=8),
    "scale_factor": st.integers(1, 8), "priority_weight": st.floats(1e-6, 1e6) | st.integers(1, 9),
    "slo_s": st.floats(1.0, 1e9), "entity": NAMES, "mixed": st.booleans(),
    "min_scale_factor": st.integers(1, 2)}
GOOD_JOBS = st.fixed_dictionaries({"job_type": st.just("A3C") | NAMES,
                                   "total_steps": st.integers(1, 2**53)},
                                  optional=GOOD_JOB_VALUES)


def with_one(good, keys):
    """A good mapping with one key set to any value (or added)."""
    return st.tuples(good, st.sampled_from(keys) | st.text(max_size=6), VALUES).map(
        lambda t: {**t[0], t[1]: t[2]})


JOBS = st.one_of(GOOD_JOBS, with_one(GOOD_JOBS, JOB_KEYS),
                 st.dictionaries(st.sampled_from(JOB_KEYS) | st.text(max_size=6), VALUES,
                                 max_size=4))


@pytest.fixture
def sent(monkeypatch):
    """The requests ``submit`` would send: captured, answered with a job id."""
    requests = []

    class Reply:
        job_id = "7"

    def call(args, method, request):
        requests.append(request)
        return Reply()

    monkeypatch.setattr(client, "_call", call)
    return requests


def submit(path: Path, capsys) -> tuple[int, str]:
    rc = main(["submit", str(path), "--scheduler", "127.0.0.1:1"])
    return rc, capsys.readouterr().err


@FUZZ
@given(data=JOBS)
@example(data={"job_type": "A3C", "total_steps": 5, "priority_weight": math.nan})
@example(data={"job_type": "A3C", "total_steps": 5, "scale_factor": 0})
@example(data={"job_type": "A3C", "total_steps": 10**30})
@example(data={"job_type": "A3C", "total_steps": 5, "min_scale_factor": 0})
def test_job_yaml_values(data, sent, capsys, scratch):
    path = fuzz_file(scratch, yaml.safe_dump(data, allow_unicode=True).encode(), ".yaml")
    rc, err = submit(path, capsys)
    assert_door(rc, err, path, JOB_KEYS)
    assert (rc == 0) == acceptable(data), err
    if rc == 0:
        request = sent[-1]
        assert math.isfinite(request.priority_weight) and math.isfinite(request.slo_s)
        assert request.scale_factor == data.get("scale_factor", 1) or \
            data.get("scale_factor") is None


@FUZZ
@given(raw=st.binary(max_size=200), keep=st.booleans())
@example(raw=b"# caf\xe9\n", keep=True)
@example(raw=b"\xff\xfe", keep=False)
def test_job_yaml_bytes(raw, keep, sent, capsys, scratch):
    """Random bytes, alone or after a good job (as a comment or a value)."""
    good = b"job_type: A3C\ntotal_steps: 5\n"
    path = fuzz_file(scratch, good + raw if keep else raw, ".yaml")
    rc, err = submit(path, capsys)
    assert_door(rc, err, path, JOB_KEYS)


@pytest.mark.parametrize("text, words", [
    ("priority_weight: .nan", "priority_weight has a bad value nan"),
    ("priority_weight: .inf", "priority_weight has a bad value inf"),
    ("scale_factor: 0", "scale_factor has a bad value 0"),
    ("slo_s: 0", "slo_s has a bad value 0"),
    ("total_steps: 1000000000000000000000000000000", "total_steps has a bad value 10"),
    ("scale_factor: 4294967296", "scale_factor has a bad value 4294967296"),
    ("min_scale_factor: 0", "min_scale_factor has a bad value 0"),
    ("workload: nope", "workload: unknown workload 'nope'"),
    ("entity: \"a\\nb\"", "entity has a bad value 'a\\nb'"),
    ("command: \"run\\0\"", "command has a bad value"),
])
def test_what_the_issue_saw_exits_2_naming_the_field(tmp_path, sent, capsys, text, words):
    path = tmp_path / "job.yaml"
    lines = {"job_type": "job_type: A3C", "total_steps": "total_steps: 5"}
    lines[text.split(":")[0]] = text
    path.write_text("\n".join(lines.values()) + "\n")
    rc, err = submit(path, capsys)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and words in err, err
    assert not sent


def test_non_utf8_comment_names_the_line_and_offset(tmp_path, sent, capsys):
    path = tmp_path / "job.yaml"
    path.write_bytes(b"job_type: A3C\n# caf\xe9\ntotal_steps: 5\n")
    rc, err = submit(path, capsys)
    assert rc == 2 and "not UTF-8 text at line 2, byte offset 19 (0xe9)" in err, err


def test_a_good_job_is_sent_as_before(tmp_path, sent, capsys):
    path = tmp_path / "job.yaml"
    path.write_text("job_type: A3C\ntotal_steps: 5\nscale_factor: 2\npriority_weight: 2\n"
                    "slo_s: 60\nentity: team-a\nworkload: steps\nmin_scale_factor: 1\n")
    rc, err = submit(path, capsys)
    assert rc == 0, err
    (request,) = sent
    assert (request.job_type, request.total_steps, request.scale_factor,
            request.priority_weight, request.slo_s, request.entity, request.workload,
            request.min_scale_factor) == ("A3C", 5, 2, 2.0, 60.0, "team-a", "steps", 1)


# ----------------------------------------------------------------------------- cluster YAML

GOOD_CONFIG = {"listen": "127.0.0.1:0", "policy": "max_min_fairness_perf",
               "round_seconds": 6, "state_dir": "state"}
CONFIG_KEYS = REQUIRED + OPTIONAL


class Started(Exception):
    """The config passed the door: the daemon would start now."""


@pytest.fixture
def no_daemon(monkeypatch):
    """``scheduler --config`` checks its file, then starts nothing: it raises ``Started``
    with the checked config."""
    from gavelsched.daemon import server

    class Daemon:
        def __init__(self, config, *args, **kwargs) -> None:
            self.config = config

        def start(self):
            raise Started(self.config)

    monkeypatch.setattr(server, "SchedulerDaemon", Daemon)


def scheduler(path: Path, capsys):
    try:
        rc, config = main(["scheduler", "--config", str(path)]), None
    except Started as started:
        rc, config = 0, started.args[0]
    return rc, capsys.readouterr().err, config


PATHS = st.text("abc/._-~ ", min_size=1, max_size=8)
GOOD_CONFIGS = st.fixed_dictionaries(
    {"listen": st.just("127.0.0.1:0"),
     "policy": st.sampled_from(["max_min_fairness_perf", "fifo", "gandiva"]),
     "round_seconds": st.floats(0.1, 1e6), "state_dir": PATHS},
    optional={"auth_token_file": PATHS, "metrics_listen": st.just("127.0.0.1:9100"),
              "throughputs": PATHS, "expected_workers": st.integers(0, 2**63 - 1),
              "checkpoint_dir": PATHS, "heartbeat_seconds": st.floats(0.05, 1e6),
              "plan_lead_seconds": st.floats(0, 1e6), "min_resolve_interval_s": st.floats(0, 1e6),
              "seed": st.integers(0, 2**63 - 1), "workers_tls": st.booleans()})
CONFIGS = st.one_of(GOOD_CONFIGS, with_one(GOOD_CONFIGS, CONFIG_KEYS),
                    st.dictionaries(st.sampled_from(CONFIG_KEYS) | st.text(max_size=6), VALUES,
                                    max_size=5))


@FUZZ
@given(data=CONFIGS)
@example(data={**GOOD_CONFIG, "round_seconds": math.nan})
@example(data={**GOOD_CONFIG, "round_seconds": math.inf})
@example(data={**GOOD_CONFIG, "round_seconds": 10**400})
@example(data={**GOOD_CONFIG, "listen": "127.0.0.1:\u00b2"})
@example(data={**GOOD_CONFIG, "seed": 10**30})
@example(data={**GOOD_CONFIG, "state_dir": "a\0b"})
def test_cluster_yaml_values(data, no_daemon, capsys, scratch):
    path = fuzz_file(scratch, yaml.safe_dump(data, allow_unicode=True).encode(), ".yaml")
    rc, err, config = scheduler(path, capsys)
    assert_door(rc, err, path, CONFIG_KEYS)
    if config is not None:
        for key in ("round_seconds", "heartbeat_seconds", "plan_lead", "resolve_interval"):
            assert math.isfinite(getattr(config, key)) and getattr(config, key) >= 0
        assert 0 <= config.seed < 2**63 and 0 <= config.expected_workers < 2**63


@FUZZ
@given(raw=st.binary(max_size=200), keep=st.booleans())
@example(raw=b"# \xff\n", keep=True)
def test_cluster_yaml_bytes(raw, keep, no_daemon, capsys, scratch):
    good = yaml.safe_dump(GOOD_CONFIG).encode()
    path = fuzz_file(scratch, good + raw if keep else raw, ".yaml")
    rc, err, _ = scheduler(path, capsys)
    assert_door(rc, err, path, CONFIG_KEYS)
