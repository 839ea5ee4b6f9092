"""An ended job's measured steps/s, and its co-located pairs', are forgotten: in memory as
it ends (``OnlineThroughputs.forget``) and at a restart (``progress.restored_online``); the
store keeps them until the job is retired with its checkpoints (``retention``,
``Store.forget_throughputs_later``). Before, a long-lived daemon kept the rows of every job
it ever ran, in memory and in the store, and read them all back at each start (issue #30)."""

from __future__ import annotations

import pytest

from gavelsched.daemon.retention import Retention
from gavelsched.daemon.store import Store

from .test_restart_keeps_runs import Restarted, measure
from .test_round_aligned import Scheduler


def stored(store: Store) -> tuple[set[str], set[str]]:
    """The jobs with measured rows, and the pairs, in the store."""
    return set(store.throughputs()), set(store.pair_throughputs())


@pytest.mark.parametrize("end", ["done", "cancelled"])
def test_a_job_that_ends_is_forgotten_and_its_rows_go_when_it_is_retired(tmp_path, end):
    s = Scheduler(tmp_path)
    try:
        job = s.submit(steps=8 if end == "done" else 100_000)
        measure(s, job, 8)
        if end == "cancelled":
            assert job in s.x.progress.online.measured
            s.x.cancel(job)
        assert s.x.jobs[job].state == end
        assert job not in s.x.progress.online.measured
        assert stored(s.store)[0] == {job}               # until it is retired
        (tmp_path / "checkpoints" / job).mkdir(parents=True)
        retention = Retention(tmp_path / "checkpoints", 60.0, s.store)
        assert retention.tick(s.x.jobs, s.x.now() + 59.0) == []
        assert stored(s.store)[0] == {job}
        retention = Retention(tmp_path / "checkpoints", 60.0, s.store)
        assert retention.tick(s.x.jobs, s.x.now() + 61.0) == [job]
        retention.join()
        assert stored(s.store) == (set(), set())
    finally:
        s.close()


def test_a_restart_restores_the_rates_of_jobs_that_have_not_ended_only(tmp_path):
    """Rows of jobs that ended, and pairs with an ended member, stay in the store (until
    retired) but are not read back into memory; a live job's are."""
    s = Scheduler(tmp_path)
    live, ended = s.submit(), s.submit()
    s.x.cancel(ended)
    for job in (live, ended, "404"):
        s.store.put_throughput_later(job, "v100", 2.0)
    s.store.put_pair_throughput_later(f"{live}+{ended}", live, "v100", 1.0)
    s.store.put_pair_throughput_later(f"{live}+{ended}", ended, "v100", 1.0)
    s.store.flush_later()
    s.close()
    r = Restarted(tmp_path, 7.0)
    try:
        assert set(r.x.progress.online.measured) == {live}
        assert r.x.progress.online.pairs == {}
        assert stored(r.store) == ({live, ended, "404"}, {f"{live}+{ended}"})
    finally:
        r.close()


def test_a_forgotten_job_s_rows_and_samples_waiting_to_be_written_go(tmp_path):
    store = Store(tmp_path)
    try:
        store.put_throughput_later("1", "v100", 2.0)
        store.put_pair_throughput_later("1+2", "1", "v100", 1.0)
        store.flush_later()
        store.put_throughput_later("1", "k80", 2.0)        # (waiting to be written)
        store.put_throughput_later("2", "v100", 3.0)
        store.put_pair_throughput_later("1+2", "2", "v100", 1.5)
        store.forget_throughputs_later(["1"])
        store.flush_later()
        assert store.throughputs() == {"2": {"v100": 3.0}}
        assert store.pair_throughputs() == {"1+2": {"v100": {"2": 1.5}}}  # (the partner's,
    finally:                                                              # until it goes)
        store.close()
