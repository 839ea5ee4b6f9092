"""Log levels (issue #18): the daemons log their main events at INFO unless ``-q``, ``-v``
adds DEBUG; the other commands print only their output (warnings and errors aside). The
daemons' INFO logs are checked on real processes in ``tests/daemon/test_paths.py``."""

from __future__ import annotations

import logging
import signal
import socket
import subprocess
import sys

import pytest

from gavelsched.cli import build_parser, log_level
from gavelsched.daemon.local import subprocess_env

from ..daemon.cluster import wait_until

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


def test_sigusr1_writes_every_threads_stack_to_the_log_and_the_daemon_goes_on(tmp_path):
    """``kill -USR1``: what a daemon that seems stuck is doing (docs/runtime.md), here a
    real worker still trying to register with a scheduler that is not there."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]          # (closed: nothing listens there)
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "gavelsched", "worker", "--scheduler",
                                 f"127.0.0.1:{port}", "--type", "v100", "--gpus", "1",
                                 "--work-dir", str(tmp_path / "w")],
                                stdout=out, stderr=subprocess.STDOUT, env=subprocess_env())
    try:
        wait_until(lambda: "not reachable" in log.read_text(), 60, "the worker to retry")
        proc.send_signal(signal.SIGUSR1)
        wait_until(lambda: "in _register" in log.read_text(), 30, "the stacks")
        text = log.read_text()
        assert "Thread 0x" in text and "(most recent call first)" in text, text
        assert proc.poll() is None, text
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
