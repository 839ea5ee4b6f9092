"""Without torch, the commands that need it say so in one line and exit 2 before anything
starts (issue #29: ``vn check`` and ``profile`` printed a ModuleNotFoundError traceback,
``local-cluster`` started anyway and failed every job). Torch is hidden from a real
subprocess of the CLI (``sys.modules['torch'] = None``: importing it fails)."""

from __future__ import annotations

import subprocess
import sys

import pytest

HIDDEN = "import sys; sys.modules['torch'] = None; from gavelsched.cli import main; " \
         "sys.exit(main(sys.argv[1:]))"


def cli_without_torch(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", HIDDEN, *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


@pytest.mark.parametrize("args", [("vn", "check"), ("profile", "--type", "x", "-o", "p.json"),
                                  ("local-cluster",), ("local-cluster", "--workload", "resnet")])
def test_a_command_that_needs_torch_says_so_in_one_line(args, tmp_path):
    done = cli_without_torch(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs torch, which is not installed" in lines[0]
    assert "Traceback" not in done.stderr and list(tmp_path.iterdir()) == []


def test_local_cluster_with_the_steps_workload_does_not_need_torch(tmp_path):
    # it gets past the check (and stops at a bad flag instead, before starting anything)
    done = cli_without_torch("local-cluster", "--workload", "steps", "--jobs", "0",
                             cwd=tmp_path)
    assert done.returncode == 2 and "--jobs must be >= 1" in done.stderr
