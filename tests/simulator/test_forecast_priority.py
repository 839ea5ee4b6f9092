"""The forecast process yields the CPU to the jobs, not only to its scheduler: niced
within an autogroup of its own (Linux shares the CPU fairly between autogroups, and each
job runs in a session of its own, so a nice inside the scheduler's group was no nice
against a job; issue #29: a replay at a round's start slowed that round's start-ups)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gavelsched.daemon.local import subprocess_env, wait_until


def _priority(pid: int) -> tuple[int, int, str | None]:
    """(nice, session id, its autogroup's nice or None without autogroups) of ``pid``."""
    nice = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])
    group = Path(f"/proc/{pid}/autogroup")
    return nice, os.getsid(pid), group.read_text().split()[-1] if group.exists() else None


def test_the_forecast_process_is_niced_in_a_session_and_autogroup_of_its_own():
    child = subprocess.Popen([sys.executable, "-m", "simulator.forecast", "--nice", "10"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             env=subprocess_env())
    try:
        has_groups = Path("/proc/self/autogroup").exists()
        wanted = (10, child.pid, "10" if has_groups else None)
        wait_until(lambda: _priority(child.pid) == wanted or child.poll() is not None, 60,
                   "the forecast process to lower its priority")
        assert _priority(child.pid) == wanted
        assert os.getsid(0) != child.pid
    finally:
        child.stdin.close()
        assert child.wait(timeout=30) == 0
