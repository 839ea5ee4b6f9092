"""``benchmarks/gpu_runs.py``, which the GPU check counts each job's runs with (issue #31):
a run is paired with its exit by time, on every worker. A run whose lease was extended
exits under a later round's number than it was launched with; it was dropped, and the
check counted one run too few."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmark_modules import loaded


@pytest.fixture(scope="module")
def gpu_runs():
    with loaded("gpu_runs") as module:
        yield module


def worker(root: Path, name: str, runs) -> None:
    """A worker's log and its jobs' logs: ``runs`` of (job, launched round, exited round,
    launch second, up second, lease-end second, exit second, steps at start and end)."""
    lines = []
    for job, rnd, out, launch, up, end, exit_, first, last in runs:
        lines.append(f"2026-11-30 10:00:{launch:02d},000 INFO workers.daemon.launcher: job {job} "
                     f"round {rnd}: launched /usr/bin/python3 -m workers.workloads.resnet on "
                     f"GPUs [0]")
        lines.append(f"2026-11-30 10:00:{exit_:02d},500 INFO workers.daemon.launcher: job {job} "
                     f"round {out}: exited 0 after {exit_ - launch}.5 s")
        logs = root / name / "logs" / job
        logs.mkdir(parents=True, exist_ok=True)
        (logs / f"round{rnd}-rank0.err").write_text(
            f"2026-11-30 10:00:{up:02d},000 INFO gavelsched.iterator: job {job} rank 0: starts "
            f"at step {first} of 900, lease LeaseTerms()\n"
            f"2026-11-30 10:00:{end:02d},000 INFO gavelsched.iterator: job {job} rank 0: "
            f"lease of round {out} ends at step {last}\n")
    (root / f"{name}.log").write_text("\n".join(lines) + "\n")


def test_an_extended_run_counts_and_every_worker_is_read(gpu_runs, tmp_path):
    worker(tmp_path, "worker0", [("3", 2, 3, 0, 3, 20, 21, 0, 500),     # extended: 2 rounds
                                 ("3", 6, 6, 30, 33, 40, 41, 500, 700)])
    worker(tmp_path, "worker1", [("3", 8, 8, 42, 45, 52, 53, 700, 900),
                                 ("5", 8, 8, 42, 45, 52, 53, 0, 100)])
    runs = gpu_runs.runs(tmp_path)
    assert [(r.job_id, r.round) for r in runs] == [("3", 2), ("3", 6), ("3", 8), ("5", 8)]
    first = runs[0]
    assert (first.startup_s, first.train_s, first.end_s, first.steps) == (3.0, 17.0, 1.5, 500)


def test_a_run_still_going_at_the_end_is_left_out(gpu_runs, tmp_path):
    worker(tmp_path, "worker0", [("1", 0, 0, 0, 3, 9, 10, 0, 100)])
    log = tmp_path / "worker0.log"
    log.write_text(log.read_text() + "2026-11-30 10:00:20,000 INFO workers.daemon.launcher: "
                   "job 1 round 2: launched /usr/bin/python3 -m workers.workloads.resnet\n")
    assert [(r.job_id, r.round) for r in gpu_runs.runs(tmp_path)] == [("1", 0)]
