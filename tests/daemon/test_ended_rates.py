"""An ended job's measured steps/s, and its co-located pairs', are forgotten: in memory
(``OnlineThroughputs.forget``) and in the store (``Store.forget_throughputs_later``), as it
ends and, for a store written before, at the next start (``progress.restored_online``).
Without it a long-lived daemon keeps the rows of every job it ever ran (issue #30)."""

from __future__ import annotations

import pytest

from gavelsched.daemon.store import Store

from .test_restart_keeps_runs import Restarted
from .test_round_aligned import Scheduler


def measured(s: Scheduler, job: str, steps: int) -> None:
    """``job`` runs from t=1 and has ``steps`` durable 5 s later (a sample of its rate)."""
    s.at(1.0)
    s.init(job)
    s.t = 6.0
    s.x.processes.durable_steps(job, steps, s.gen(job), seconds=4.0)


def stored(store: Store) -> tuple[set[str], set[str]]:
    """The jobs with measured rows, and the pairs, in the store."""
    return set(store.throughputs()), set(store.pair_throughputs())


@pytest.mark.parametrize("end", ["done", "cancelled"])
def test_a_job_that_ends_leaves_no_measured_rate_in_memory_or_in_the_store(tmp_path, end):
    s = Scheduler(tmp_path)
    try:
        job = s.submit(steps=8 if end == "done" else 100_000)
        measured(s, job, 8)
        if end == "cancelled":
            assert job in s.x.progress.online.measured and stored(s.store)[0] == {job}
            s.x.cancel(job)
        assert s.x.jobs[job].state == end
        assert job not in s.x.progress.online.measured
        assert stored(s.store) == (set(), set())
    finally:
        s.close()


def test_a_restart_drops_and_deletes_the_rows_of_jobs_that_ended_before_it(tmp_path):
    """A store written before ended jobs were forgotten: their rows, and every pair with an
    ended member, are not restored and are deleted; a live job's rows stay."""
    s = Scheduler(tmp_path)
    live, ended = s.submit(), s.submit()
    s.x.cancel(ended)
    for job in (live, ended, "404"):       # (as an older daemon left them)
        s.store.put_throughput_later(job, "v100", 2.0)
    s.store.put_pair_throughput_later(f"{live}+{ended}", live, "v100", 1.0)
    s.store.put_pair_throughput_later(f"{live}+{ended}", ended, "v100", 1.0)
    s.store.flush_later()
    s.close()
    r = Restarted(tmp_path, 7.0)
    try:
        assert set(r.x.progress.online.measured) == {live}
        assert r.x.progress.online.pairs == {}
        assert stored(r.store) == ({live}, set())
    finally:
        r.close()


def test_samples_waiting_to_be_written_for_a_forgotten_job_are_not_written(tmp_path):
    store = Store(tmp_path)
    try:
        store.put_throughput_later("1", "v100", 2.0)
        store.put_throughput_later("2", "v100", 3.0)
        store.put_pair_throughput_later("1+2", "2", "v100", 1.0)
        store.put_pair_throughput_later("2+3", "3", "v100", 1.0)
        store.forget_throughputs_later(["1"], ["1+2"])
        store.flush_later()
        assert store.throughputs() == {"2": {"v100": 3.0}}
        assert store.pair_throughputs() == {"2+3": {"v100": {"3": 1.0}}}
    finally:
        store.close()
