"""``eta_error.py --pooled``: each saved run's finish errors and all their predictions
together, the share early counted over the pooled predictions (BENCHMARKS.md, "ETA error
against real finishes"); ``--startups``: the start-ups schedulers logged, by launch wave."""

from __future__ import annotations

import json
import logging

from tests.benchmark_modules import loaded

from .test_round_aligned import Scheduler


def _run(path, errors):
    """A saved run whose predictions, made at 0 s of jobs that finish at 10 s, are off by
    ``errors`` (None: no finish predicted)."""
    rows = [{"finish": None if e is None else 10.0 + e, "real_finish": 10.0, "at_s": 0.0}
            for e in errors]
    path.write_text(json.dumps({"rows": rows}))
    return str(path)


def test_the_pooled_row_counts_every_prediction_of_every_run(tmp_path, capsys):
    first = _run(tmp_path / "a.json", [-1.0, -0.1, 0.2, None])
    second = _run(tmp_path / "b.json", [0.3, 0.4, -0.6])
    with loaded("eta_error") as eta_error:
        assert eta_error.main(["--pooled", first, second]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in lines[2:]}
    assert rows[first][0] == "3" and rows[first][-2] == "67%"     # 2 of 3 early
    assert rows[second][0] == "3" and rows[second][-2] == "33%"
    pooled = rows["all 2"]
    assert pooled[0] == "6" and pooled[-2] == "50%"              # 3 of the 6
    assert pooled[-1] == "100% of 2"         # off by >= 0.5 s: -1.0 and -0.6, both early


def test_the_start_ups_a_scheduler_logs_are_tabled_by_their_launch_wave(tmp_path, capsys):
    """``--startups LOG...``: the scheduler's own log lines (``daemon/runs.py``, in the
    CLI's log format), by the processes launched at once on their machine."""
    sched = Scheduler(tmp_path, gpus=2)
    log = tmp_path / "scheduler.log"
    handler = logging.FileHandler(log)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    runs = logging.getLogger("gavelsched.daemon.runs")
    runs.addHandler(handler)
    old = runs.level
    runs.setLevel(logging.INFO)    # setLevel, not the attribute: it clears the logger's cache
    try:
        jobs = [sched.submit() for _ in range(2)]
        sched.at(1.0)                      # round 0: both launched at once on the machine
        sched.t = 1.3
        for job in jobs:
            sched.init(job)
    finally:
        runs.removeHandler(handler)
        runs.setLevel(old)
        handler.close()
        sched.close()
    with loaded("eta_error") as eta_error:
        assert eta_error.startups([log]) == [("2", 0.3), ("2", 0.3)]
        assert eta_error.main(["--startups", str(log)]) == 0
    assert "| 2 | 2 | 0.300 | 0.300 |" in capsys.readouterr().out.splitlines()
