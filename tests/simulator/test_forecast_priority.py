"""The forecast process yields the CPU to the jobs, not only to its scheduler: niced
within an autogroup of its own (Linux shares the CPU fairly between autogroups, and each
job runs in a session of its own, so a nice inside the scheduler's group was no nice
against a job; issue #29: a replay at a round's start slowed that round's start-ups).
Where the kernel keeps the group's priority, the process says so on stderr (the
scheduler's log)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gavelsched.daemon.local import subprocess_env, wait_until


def _priority(pid: int) -> tuple[int, int, str | None]:
    """(nice, session id, its autogroup's nice) of ``pid``; the nice is None without
    autogroups, or in the root group (an empty file: a process that has not yet left a
    session that init started, as under CI)."""
    nice = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])
    group = Path(f"/proc/{pid}/autogroup")
    words = group.read_text().split() if group.exists() else []
    return nice, os.getsid(pid), words[-1] if words else None


def test_the_forecast_process_is_niced_in_a_session_and_autogroup_of_its_own():
    child = subprocess.Popen([sys.executable, "-m", "simulator.forecast", "--nice", "10"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=subprocess_env())
    try:
        has_groups = Path("/proc/self/autogroup").exists()
        wanted = (10, child.pid, "10" if has_groups else None)
        try:
            wait_until(lambda: child.poll() is not None or _priority(child.pid) == wanted,
                       30, "the forecast process to lower its priority")
        except TimeoutError:
            child.stdin.close()
            said = child.stderr.read().decode()
            if has_groups and "its autogroup kept its priority" in said:
                pytest.skip(f"this kernel keeps the autogroup's priority: {said.strip()}")
            raise
        assert _priority(child.pid) == wanted
        assert os.getsid(0) != child.pid
    finally:
        if not child.stdin.closed:
            child.stdin.close()
        assert child.wait(timeout=30) == 0


REFUSED = """
import sys
from pathlib import Path
import simulator.forecast as forecast

def refuse(self, *args, **kwargs):
    raise PermissionError(13, "Permission denied")

Path.write_text = refuse
sys.exit(forecast.main(["--nice", "10"]))
"""


def test_a_group_the_kernel_will_not_nice_is_said_in_one_line_and_the_process_goes_on():
    if not Path("/proc/self/autogroup").exists():
        pytest.skip("this kernel has no autogroups")
    done = subprocess.run([sys.executable, "-c", REFUSED], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60, env=subprocess_env())
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines() == [
        "simulator.forecast: its autogroup kept its priority (Permission denied): jobs "
        "share the CPU with the replays"]
