"""A scheduler under the restart rule imports what its re-solves' ``fewer_moves`` reads
when it is built, not at its first re-solve with runs going on: that import (about half a
second) fell on a round's start, and the round's refills began 0.3-0.5 s late (issue #29).
Under Gavel's rule it is never needed, and not imported."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gavelsched.daemon.local import subprocess_env

BUILD = """
import sys, tempfile
from pathlib import Path
from gavelsched.daemon.config import DaemonConfig
from gavelsched.daemon.executor import DaemonExecutor
from gavelsched.daemon.store import Store
from policies import get_policy
from traces import default_table
state = Path(tempfile.mkdtemp())
config = DaemonConfig(listen="127.0.0.1:0", policy="max_min_fairness_perf",
                      round_seconds=10, state_dir=state, restart_rule=sys.argv[1])
assert "scipy.optimize" not in sys.modules
DaemonExecutor(config, Store(state), get_policy("max_min_fairness_perf"), default_table(),
               None)
print("scipy.optimize" in sys.modules)
"""


@pytest.mark.parametrize("rule, imported", [("tenure", True), ("gavel", False)])
def test_the_moves_solver_is_imported_when_the_scheduler_is_built(rule, imported):
    done = subprocess.run([sys.executable, "-c", BUILD, rule], capture_output=True,
                          text=True, timeout=120, env=subprocess_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(imported)
