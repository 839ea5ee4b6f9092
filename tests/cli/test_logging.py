"""Log levels (issue #18): the daemons log their main events at INFO unless ``-q``, ``-v``
adds DEBUG; the other commands print only their output (warnings and errors aside). The
daemons' INFO logs are checked on real processes in ``tests/daemon/test_paths.py``."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from gavelsched.cli import build_parser, log_level
from gavelsched.daemon.local import subprocess_env

DAEMONS = {"scheduler": ["scheduler", "--config", "c.yaml"],
           "worker": ["worker", "--scheduler", "h:1", "--type", "v100", "--gpus", "1"]}
OTHERS = {"solve": ["solve", "p.json", "--policy", "fifo"],
          "trace": ["trace", "show", "t.jsonl"],
          "local-cluster": ["local-cluster"]}


@pytest.mark.parametrize("flags,level", [([], logging.INFO), (["-q"], logging.WARNING),
                                         (["-qq"], logging.ERROR), (["-v"], logging.DEBUG),
                                         (["-vv"], logging.DEBUG)])
@pytest.mark.parametrize("command", sorted(DAEMONS))
def test_daemons_log_info_by_default(command, flags, level):
    argv = [*flags, *DAEMONS[command]]
    assert log_level(build_parser(argv).parse_args(argv)) == level


@pytest.mark.parametrize("flags,level", [([], logging.WARNING), (["-q"], logging.ERROR),
                                         (["-v"], logging.INFO), (["-vv"], logging.DEBUG)])
@pytest.mark.parametrize("command", sorted(OTHERS))
def test_other_commands_log_warnings_by_default(command, flags, level):
    argv = [*flags, *OTHERS[command]]
    assert log_level(build_parser(argv).parse_args(argv)) == level


def test_a_plain_command_prints_its_output_and_no_log(tmp_path):
    out = subprocess.run([sys.executable, "-m", "gavelsched", "trace", "generate", "--jobs",
                          "3", "--rate", "1", "-o", "t.jsonl"], cwd=tmp_path,
                         env=subprocess_env(), capture_output=True, text=True, check=True)
    assert out.stdout.startswith("wrote 3 jobs to t.jsonl")
    assert out.stderr == ""
