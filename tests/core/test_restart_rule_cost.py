"""``benchmarks/restart_rule_cost.py`` times what it names: the re-arranging for fewer moves
at both of its re-solves under ``tenure`` (it patches the function where the core calls it;
a move of that call to another module had left the benchmark failing), none under
``gavel``."""

from __future__ import annotations

import subprocess
import sys

from gavelsched.daemon.local import subprocess_env
from tests.benchmark_modules import BENCHMARKS


def test_both_re_solves_time_their_fewer_moves_under_tenure_only():
    done = subprocess.run([sys.executable, str(BENCHMARKS / "restart_rule_cost.py"),
                           "--jobs", "60", "--gpus", "48", "--rounds", "4"],
                          capture_output=True, text=True, timeout=300, env=subprocess_env())
    assert done.returncode == 0, done.stderr
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[1:-1]]
            for line in done.stdout.splitlines() if line.startswith("| gavel")
            or line.startswith("| tenure")}
    moves = {rule: row[4] for rule, row in rows.items()}
    assert moves["gavel"] == "-"
    timed = moves["tenure"].split(" / ")
    assert len(timed) == 2 and all(float(ms) >= 0 for ms in timed)
