"""One scheduler per state_dir (``gavelsched/daemon/statelock.py``): a second scheduler on
a state_dir another one holds is refused in one line naming the first (it started and
served beside it before, both writing one store); a holder that stops, or dies by
SIGKILL, leaves the state_dir to the next."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
import yaml

from gavelsched.cli import main
from gavelsched.daemon.config import load_config
from gavelsched.daemon.local import subprocess_env
from gavelsched.daemon.server import SchedulerDaemon
from gavelsched.daemon.statelock import StateInUse, StateLock


def _config(tmp_path, name: str) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"listen": "127.0.0.1:0", "policy": "fifo",
                                    "round_seconds": 6, "state_dir": str(tmp_path / "state"),
                                    "eta": False}))
    return str(path)


def test_a_second_scheduler_on_a_held_state_dir_is_refused_in_one_line(tmp_path, capsys):
    first = SchedulerDaemon(load_config(_config(tmp_path, "a"))).start()
    try:
        with pytest.raises(StateInUse, match=rf"another scheduler holds this state_dir "
                                             rf"\(pid {os.getpid()} on "):
            SchedulerDaemon(load_config(_config(tmp_path, "b")))
        assert main(["scheduler", "--config", _config(tmp_path, "b")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(
            f"gavelsched scheduler: error: {tmp_path / 'state'}: another scheduler holds "
            f"this state_dir (pid {os.getpid()} on "), err
        assert err[0].endswith("stop it first, or give this one a state_dir of its own")
    finally:
        first.stop()
    again = SchedulerDaemon(load_config(_config(tmp_path, "b")))    # the first stopped
    again.stop()


def test_a_holder_killed_by_sigkill_leaves_the_state_dir_to_the_next(tmp_path):
    state = tmp_path / "state"
    script = ("import sys, time; from gavelsched.daemon.statelock import StateLock; "
              "lock = StateLock(sys.argv[1]); print('held', flush=True); time.sleep(600)")
    holder = subprocess.Popen([sys.executable, "-c", script, str(state)],
                              stdout=subprocess.PIPE, text=True, env=subprocess_env())
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(StateInUse, match=f"pid {holder.pid} on "):
            StateLock(state)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
    StateLock(state).release()          # nothing left to clean up
