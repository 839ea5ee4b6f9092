"""A sweep's journal (simulator/sweep_journal.py): a sweep that stops (a run that raised,
Ctrl-C) loses only the runs in flight, and the same command again makes only the runs it
lacks, with the CSV of a sweep that never stopped; another sweep's journal, or a file that
is not one, is refused in one line and left as it was; a line cut short is made again."""

from __future__ import annotations

import csv
import json
import logging
import os
import signal
import subprocess
import sys
import time

import pytest

import simulator.sweep as sweep_module
from gavelsched.cli import main
from simulator.sweep_journal import JOURNAL

SWEEP = ["simulate", "sweep", "--rates", "10,30", "--seeds", "0,1",
         "--policies", "max_min_fairness_perf,fifo_perf", "--jobs", "12",
         "--cluster", "2:2:2", "--processes", "1"]


def _rows(folder) -> list[dict]:
    """The CSV's rows without ``wall_s`` (each run's own time)."""
    with open(folder / "sweep.csv") as f:
        return [{k: v for k, v in row.items() if k != "wall_s"} for row in csv.DictReader(f)]


class Runs(list):
    """The points the sweeps in this process ran, in order; with ``fail_at = k`` the k-th
    run (from 1) raises, as a machine lost mid-sweep stops it."""

    fail_at: int | None = None


@pytest.fixture
def runs(monkeypatch) -> Runs:
    made = Runs()
    real = sweep_module.run_point

    def run_point(point, spec):
        made.append((point.policy, point.rate, point.seed))
        if len(made) == made.fail_at:
            raise RuntimeError("the machine was lost")
        return real(point, spec)
    monkeypatch.setattr(sweep_module, "run_point", run_point)
    return made


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """The rows of the sweep run once, without a stop (its own folder)."""
    folder = tmp_path_factory.mktemp("whole")
    assert main([*SWEEP, "--quiet", "-o", str(folder)]) == 0
    return _rows(folder)


def test_a_stopped_sweep_resumes_where_it_stopped(runs, whole, tmp_path, capsys):
    runs.fail_at = 4
    with pytest.raises(RuntimeError, match="machine was lost"):
        main([*SWEEP, "--quiet", "-o", str(tmp_path)])
    assert not (tmp_path / "sweep.csv").exists()
    made_before = runs[:3]
    lines = (tmp_path / JOURNAL).read_text().splitlines()
    assert len(lines) == 1 + 3                       # the sweep's name, then 3 rows
    runs.clear()
    runs.fail_at = None
    assert main([*SWEEP, "-o", str(tmp_path)]) == 0
    assert len(runs) == 5 and not set(runs) & set(made_before)   # only what it lacked
    err = capsys.readouterr().err
    assert f"resumed from {tmp_path / JOURNAL}: 3 of 8 runs already made" in err
    assert "sweep: 5/5 runs done" in err
    assert _rows(tmp_path) == whole


def test_a_finished_sweep_run_again_makes_nothing_in_a_new_process(whole, tmp_path):
    """(In a fresh process: the sweep's name does not depend on the process.)"""
    assert main([*SWEEP, "--quiet", "-o", str(tmp_path)]) == 0
    again = subprocess.run([sys.executable, "-m", "gavelsched", *SWEEP, "-o", str(tmp_path)],
                           capture_output=True, text=True, timeout=300, check=False)
    assert again.returncode == 0, again.stderr
    assert "8 of 8 runs already made" in again.stderr
    assert "runs done" not in again.stderr
    assert _rows(tmp_path) == whole


def test_another_sweep_s_journal_is_refused_in_one_line(runs, tmp_path, capsys):
    assert main([*SWEEP, "--quiet", "-o", str(tmp_path)]) == 0
    journal = (tmp_path / JOURNAL).read_bytes()
    capsys.readouterr()
    runs.clear()
    other = [*SWEEP[:-4], "--cluster", "4:4:4", "--processes", "1"]   # another cluster
    assert main([*other, "--quiet", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds the runs of another sweep" in err[0], err
    assert runs == [] and (tmp_path / JOURNAL).read_bytes() == journal


@pytest.mark.parametrize("content", [b"\xff\xfe not a journal\n", b"", b"[1, 2]\n"])
def test_a_file_that_is_not_a_journal_is_refused_in_one_line(content, runs, tmp_path, capsys):
    (tmp_path / JOURNAL).write_bytes(content)
    assert main([*SWEEP, "--quiet", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a sweep journal" in err[0], err
    assert runs == [] and (tmp_path / JOURNAL).read_bytes() == content


def _one_line_made_again(runs, whole, tmp_path, caplog) -> None:
    """The sweep again, its journal with one line it cannot read: that run is made again
    (one warning says so), and the CSV is the unstopped sweep's."""
    runs.clear()
    with caplog.at_level(logging.WARNING, logger="simulator.sweep_journal"):
        assert main([*SWEEP, "--quiet", "-o", str(tmp_path)]) == 0
    assert len(runs) == 1
    assert any("1 line could not be read" in r.getMessage() for r in caplog.records)
    assert _rows(tmp_path) == whole


def test_a_line_cut_short_is_made_again(runs, whole, tmp_path, caplog):
    assert main([*SWEEP, "--quiet", "-o", str(tmp_path)]) == 0
    path = tmp_path / JOURNAL
    data = path.read_bytes()
    path.write_bytes(data[:-40])                    # the last row's write cut short
    _one_line_made_again(runs, whole, tmp_path, caplog)
    runs.clear()
    assert main([*SWEEP, "--quiet", "-o", str(tmp_path)]) == 0      # now whole again
    assert runs == []


@pytest.mark.parametrize("edit", [
    lambda row: row.pop("avg_jct_s"),                       # a field missing
    lambda row: row.update(utilization="most"),            # text where a number goes
    lambda row: row.update(jcts_s=[1.0, None]),            # a JCT that is not a number
    lambda row: row.update(seed=True),
], ids=["a field missing", "text for a number", "a JCT not a number", "a boolean seed"])
def test_a_line_that_is_not_a_row_is_made_again(edit, runs, whole, tmp_path, caplog):
    """(A journal edited by hand: without the check, the CSV or the plot raised.)"""
    assert main([*SWEEP, "--quiet", "-o", str(tmp_path)]) == 0
    path = tmp_path / JOURNAL
    head, first, *rest = path.read_text().splitlines()
    row = json.loads(first)
    edit(row)
    path.write_text("\n".join([head, json.dumps(row), *rest]) + "\n")
    _one_line_made_again(runs, whole, tmp_path, caplog)


# ``gavelsched`` as a terminal starts it, Ctrl-C raising KeyboardInterrupt, whatever this
# test run was given: a process that ignores SIGINT (a job a shell starts in the
# background) passes that on, and a Python started so keeps ignoring it (CI's first run
# of this test: the sweep ran to its end; with SIGINT ignored here, the same).
INTERRUPTIBLE = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler);"
                 " from gavelsched.cli import main; sys.exit(main())")


def test_ctrl_c_stops_a_sweep_in_one_line_and_the_same_command_resumes_it(tmp_path):
    """Ctrl-C (SIGINT to the sweep's process group, as a terminal sends it) while two
    worker processes run: exit 130 with one line that says what the journal holds, no
    traceback, and no process left (before, the pool waited for runs its workers had
    dropped, and the sweep hung)."""
    slow = ["simulate", "sweep", "--jobs", "1500", "--rates", "5,6", "--seeds", "0,1",
            "--policies", "max_min_fairness_perf", "--cluster", "36:36:36", "-o", str(tmp_path)]
    sweep = subprocess.Popen([sys.executable, "-c", INTERRUPTIBLE, *slow, "--processes", "2"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    journal = tmp_path / JOURNAL
    try:
        while sweep.poll() is None and not (
                journal.exists() and len(journal.read_text().splitlines()) >= 2):
            time.sleep(0.05)                        # until a run's row is in the journal
        os.killpg(sweep.pid, signal.SIGINT)
        err = sweep.communicate(timeout=120)[1]
    finally:
        if sweep.poll() is None:                    # (hung: the group goes, not the test run)
            os.killpg(sweep.pid, signal.SIGKILL)
    made = len(journal.read_text().splitlines()) - 1
    assert sweep.returncode == 130 and 1 <= made < 4, err
    stopped = [line for line in err.splitlines() if not line.startswith("sweep: ")]
    expected = (f"gavelsched simulate: stopped: {made} of 4 runs are in {journal}; "
                "the same command again makes the others")
    assert stopped == [expected], err
    with pytest.raises(ProcessLookupError):
        os.killpg(sweep.pid, 0)                     # its workers ended with it
    again = subprocess.run([sys.executable, "-m", "gavelsched", *slow, "--processes", "1"],
                           capture_output=True, text=True, timeout=300, check=False)
    assert again.returncode == 0, again.stderr
    assert f"{made} of 4 runs already made" in again.stderr
    assert len(_rows(tmp_path)) == 4
