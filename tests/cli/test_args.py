"""``parse_counts``: the one reader of TYPE=N flags (``simulate --cluster``,
``--gpus-per-server``, ``trace show --cluster``, ``local-cluster --workers``, ``vn plan
--gpus``), a table of accepted inputs and of refusals with their one-line messages, and the
same refusals through each sub-command's door (exit code 2, one line naming the flag)."""

from __future__ import annotations

import json

import pytest

from gavelsched.cli import InputError, main
from gavelsched.cli.args import counts_text, parse_counts

ACCEPTED = [
    ("v100=36,p100=36,k80=36", {}, {"v100": 36, "p100": 36, "k80": 36}),
    ("v100=2", {}, {"v100": 2}),
    (" v100 = 2 , k80=1 ", {}, {"v100": 2, "k80": 1}),  # blanks around anything
    ("k80=1,v100=2", {}, {"k80": 1, "v100": 2}),  # the order given is kept
    ("V100=1", {}, {"V100": 1}),  # names keep their case (unknown names are refused later)
    ("v100=0,k80=1", {}, {"v100": 0, "k80": 1}),  # a 0 among others
    ("v100=007", {}, {"v100": 7}),
    ("2:2:2", {}, {"v100": 2, "p100": 2, "k80": 2}),  # Gavel's V100:P100:K80
    (" 4 : 0 : 1 ", {}, {"v100": 4, "p100": 0, "k80": 1}),
    ("v100=1,k80=2", {"allow_zero": False}, {"v100": 1, "k80": 2}),
    ("4", {"every_type": True, "allow_zero": False}, 4),  # N for every type
    ("v100=2,k80=4", {"every_type": True, "allow_zero": False}, {"v100": 2, "k80": 4}),
    ("1:2:4", {"every_type": True, "allow_zero": False}, {"v100": 1, "p100": 2, "k80": 4}),
]


@pytest.mark.parametrize("text, options, expected", ACCEPTED)
def test_accepted(text, options, expected):
    assert parse_counts(text, what="--flag", **options) == expected


REFUSED = [
    ("", {}, "--flag: expected TYPE=N[,TYPE=N...], got ''"),
    ("v100", {}, "--flag: expected TYPE=N[,TYPE=N...], got 'v100'"),
    ("=2", {}, "--flag: expected TYPE=N[,TYPE=N...], got '=2'"),
    ("v100=1,", {}, "--flag: expected TYPE=N[,TYPE=N...], got ''"),
    ("v100=1,,k80=1", {}, "--flag: expected TYPE=N[,TYPE=N...], got ''"),
    ("4", {}, "--flag: expected TYPE=N[,TYPE=N...], got '4'"),  # bare N needs every_type
    ("v100=", {}, "--flag: the count of 'v100' must be a whole number >= 0, got ''"),
    ("v100=two", {}, "--flag: the count of 'v100' must be a whole number >= 0, got 'two'"),
    ("v100=-1", {}, "--flag: the count of 'v100' must be a whole number >= 0, got '-1'"),
    ("v100=+1", {}, "--flag: the count of 'v100' must be a whole number >= 0, got '+1'"),
    ("v100=1_0", {}, "--flag: the count of 'v100' must be a whole number >= 0, got '1_0'"),
    ("v100=1.5", {}, "--flag: the count of 'v100' must be a whole number >= 0, got '1.5'"),
    ("v100=\u00b2", {}, "--flag: the count of 'v100' must be a whole number >= 0, got '\u00b2'"),
    ("v100=1=2", {}, "--flag: the count of 'v100' must be a whole number >= 0, got '1=2'"),
    ("v100=1,v100=2", {}, "--flag: 'v100' is given twice in 'v100=1,v100=2'"),
    ("v100=1, v100 =2", {}, "--flag: 'v100' is given twice in 'v100=1, v100 =2'"),
    ("v100=0", {}, "--flag: every count in 'v100=0' is 0"),
    ("0:0:0", {}, "--flag: every count in '0:0:0' is 0"),
    ("1:2", {}, "--flag: Gavel's form is V100:P100:K80, got '1:2'"),
    ("1:2:3:4", {}, "--flag: Gavel's form is V100:P100:K80, got '1:2:3:4'"),
    ("2:x:2", {}, "--flag: the count of 'p100' must be a whole number >= 0, got 'x'"),
    ("v100=0,k80=1", {"allow_zero": False},
     "--flag: the count of 'v100' must be a whole number >= 1, got '0'"),
    ("1:0:1", {"allow_zero": False},
     "--flag: the count of 'p100' must be a whole number >= 1, got '0'"),
    ("0", {"every_type": True},
     "--flag: the count of every type must be a whole number >= 1, got '0'"),
    ("x", {"every_type": True},
     "--flag: the count of every type must be a whole number >= 1, got 'x'"),
    ("", {"every_type": True},
     "--flag: the count of every type must be a whole number >= 1, got ''"),
]


@pytest.mark.parametrize("text, options, message", REFUSED)
def test_refused(text, options, message):
    with pytest.raises(InputError) as err:
        parse_counts(text, what="--flag", **options)
    assert str(err.value) == message


# Each sub-command that reads a TYPE=N flag: its argv with the flag's value as {value}.
DOORS = {
    "simulate --cluster": ["simulate", "--jobs", "2", "--quiet", "--cluster", "{value}"],
    "simulate --gpus-per-server": ["simulate", "--jobs", "2", "--quiet",
                                   "--gpus-per-server", "{value}"],
    "trace show --cluster": ["trace", "show", "{trace}", "--cluster", "{value}"],
    "local-cluster --workers": ["local-cluster", "--workers", "{value}"],
    "vn plan --gpus": ["vn", "plan", "--batch", "8", "--profile", "{profile}",
                       "--gpus", "{value}"],
}


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("value", ["v100=x", "v100=1,v100=1", "v100", "1:2", "v100=-1"])
def test_every_door_refuses_alike(door, value, tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps({"job_type": "CycleGAN", "scale_factor": 1, "total_steps": 5,
                                 "arrival_s": 0}) + "\n")
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"v100": {"memory_gb": 16, "step_s": {"1": 0.01}}}))
    flag = DOORS[door][DOORS[door].index("{value}") - 1]
    argv = [a.format(value=value, trace=trace, profile=profile) for a in DOORS[door]]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert f"{flag}:" in err[0] and "Traceback" not in err[0], err[0]


@pytest.mark.parametrize("argv", [
    ["simulate", "--jobs", "2", "--quiet", "--gpus-per-server", "0"],
    ["simulate", "--jobs", "2", "--quiet", "--gpus-per-server", "v100=0,k80=1"],
    ["local-cluster", "--workers", "v100=0,k80=1"],
])
def test_zero_refused_where_a_count_must_be_positive(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ">= 1, got '0'" in err[0], err


def test_counts_text_is_what_parse_counts_reads():
    counts = {"v100": 36, "a100": 0, "k80": 2}
    assert counts_text(counts) == "v100=36,a100=0,k80=2"
    assert parse_counts(counts_text(counts), what="--cluster") == counts


def test_every_door_refuses_a_negative_slo_the_same_way():
    # the job YAML (CLI, Python API) and the wire's JobRequest (0 there is unset: no SLO)
    from gavelsched.client.request import JobRequest
    from gavelsched.rpc import pb
    from gavelsched.client.errors import InputError
    for make in (lambda: JobRequest.from_dict({"job_type": "A3C", "total_steps": 5,
                                               "slo_s": -5}),
                 lambda: JobRequest.from_pb(pb.JobRequest(job_type="A3C", total_steps=5,
                                                          slo_s=-5.0))):
        with pytest.raises(InputError, match=r"slo_s has a bad value -5.*must be > 0 seconds"):
            make()
    assert JobRequest.from_pb(pb.JobRequest(job_type="A3C", total_steps=5)).slo_s is None


@pytest.mark.parametrize("argv, message", [
    (["simulate", "--jobs", "abc"],
     ("gavelsched simulate: error: argument --jobs: invalid int value: 'abc' "
      "(see gavelsched simulate --help)")),
    (["simulate", "sweep", "--rates", "1", "-o", "x", "--seeds", "1", "--processes", "two"],
     ("gavelsched simulate sweep: error: argument --processes: invalid int value: 'two' "
      "(see gavelsched simulate sweep --help)")),
    (["no-such-command"], "gavelsched: error: argument COMMAND: invalid choice: "),
    ([], ("gavelsched: error: the following arguments are required: COMMAND "
          "(see gavelsched --help)")),
])
def test_a_flag_argparse_refuses_is_one_line_with_the_way_to_the_help(argv, message, capsys):
    """No usage block before the line (it buried the error under twenty lines)."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith(message), err
