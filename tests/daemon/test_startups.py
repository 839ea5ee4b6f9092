"""Restart statistics per job type (``gavelsched/daemon/startups.py``): means that survive
a restart of the scheduler and that one sample of a loaded moment does not set for good."""

from __future__ import annotations

import pytest

from gavelsched.daemon.startups import OUTLIER_AFTER, OUTLIER_RATIO, Startups
from gavelsched.daemon.store import Store


def test_means_survive_a_scheduler_restart(tmp_path):
    store = Store(tmp_path)
    first = Startups(store)
    first.record("A", 2.0)
    first.record("A", 4.0)
    first.record_save("A", 1.0)
    assert first.mean("A") == (3.0, 2) and first.restart_s("A") == 4.0
    assert first.first_measured == 1
    again = Startups(store)
    assert again.mean("A") == (3.0, 2) and again.restart_s("A") == 4.0
    store.close()


def test_one_slow_save_does_not_set_a_type_s_restart_cost_for_good(tmp_path):
    # issue #32's gap: saves of ~0.2 s, then one of 26 s at load 100 made the restart cost
    # ~10x the usual; each sample now counts at most OUTLIER_RATIO x the mean before it
    store = Store(tmp_path)
    stats = Startups(store)
    for _ in range(OUTLIER_AFTER):
        stats.record_save("A", 0.2)
    stats.record_save("A", 26.0)
    capped = (OUTLIER_AFTER * 0.2 + OUTLIER_RATIO * 0.2) / (OUTLIER_AFTER + 1)
    assert stats.restart_s("A") == pytest.approx(capped)
    # a real change moves it, a bounded step a run
    for _ in range(30):
        stats.record_save("A", 5.0)
    assert stats.restart_s("A") > 3.5             # (3.9 after 30 runs)
    store.close()
