"""Restart statistics per job type (``gavelsched/daemon/startups.py``): means that survive
a restart of the scheduler and that one sample of a loaded moment does not set for good."""

from __future__ import annotations

import json

import pytest

from gavelsched.daemon.meta import STARTUP_WAVE
from gavelsched.daemon.startups import (EXIT_PRIOR_SHARE, OUTLIER_AFTER, OUTLIER_RATIO,
                                        RESTART_BAND, WAVE_WINDOW, Startups)
from gavelsched.daemon.store import Store
from gavelsched.rpc import pb

from .test_round_aligned import R, Scheduler


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


def test_the_cost_weighed_moves_only_past_the_band_and_survives_a_restart(tmp_path):
    """Start-ups vary from run to run; the restart rule's thresholds follow the cost the
    core weighs, which moves only when the measured cost leaves ``RESTART_BAND`` of it
    (issue #29: one run's noise decided which runs were kept near their jobs' ends)."""
    store = Store(tmp_path)
    stats = Startups(store)
    assert stats.restart_s("A") == 0.0                      # nothing measured yet
    stats.record("A", 0.30)
    assert stats.restart_s("A") == 0.30                     # the first measurement
    stats.record("A", 0.36)                                  # mean 0.33: within the band
    assert stats.mean("A")[0] == pytest.approx(0.33) and stats.restart_s("A") == 0.30
    assert Startups(store).restart_s("A") == 0.30            # as weighed before a restart
    for _ in range(4):
        stats.record("A", 0.30 * (2 + RESTART_BAND))        # mean past the band
    assert stats.restart_s("A") == pytest.approx(stats.mean("A")[0], abs=1e-3)
    store.close()


def test_a_type_not_measured_yet_is_expected_to_cost_what_the_measured_ones_do(tmp_path):
    """Issue #29: a first run of a job type counted as free (no start-up, no restart
    cost) lost its GPUs at the next plan in the scheduler's forecast, while the scheduler
    held it there once its start-up was measured, seconds later: ETAs jumped by a round
    and back. Before its first start-up, a type takes the means of the types measured."""
    store = Store(tmp_path)
    stats = Startups(store)
    assert stats.expected_startup("new") == 0.0 and stats.restart_s("new") == 0.0
    stats.record("A", 2.0)
    stats.record_save("A", 1.0)
    stats.record("B", 4.0)
    assert stats.expected_startup("new") == pytest.approx(3.0)
    assert stats.restart_s("new") == pytest.approx((3.0 + 4.0) / 2)
    assert stats.mean("new") == (0.0, 0)                    # nothing recorded for it
    again = Startups(store)                                  # after a scheduler restart
    assert again.expected_startup("new") == pytest.approx(3.0)
    assert again.restart_s("new") == pytest.approx(3.5)
    again.record("new", 1.0)                                 # then its own
    assert again.expected_startup("new") == 1.0 and again.restart_s("new") == 1.0
    store.close()


def test_a_type_s_exit_after_its_last_step_is_measured_and_expected_like_its_start_up(tmp_path):
    """Issue #29: a finished torch run frees its GPUs half a second after its last step,
    when its process exits; a forecast that freed them at the last step refilled them
    before a plan that the daemon's refill missed. The exit is kept per type, as the
    start-ups are (a type not measured yet: its start-up times the share measured)."""
    store = Store(tmp_path)
    stats = Startups(store)
    assert stats.expected_exit("A") == 0.0      # nothing measured: no start-up to share
    stats.record("A", 2.0)
    assert stats.expected_exit("A") == pytest.approx(EXIT_PRIOR_SHARE * 2.0)
    stats.record_exit("A", 0.4)
    stats.record_exit("A", 0.6)
    stats.record("B", 1.0)
    assert stats.expected_exit("A") == pytest.approx(0.5)
    assert stats.expected_exit("B") == pytest.approx(0.25)  # B's first exit is still to come:
    #                                                         its start-up x A's 0.5 / 2.0
    assert Startups(store).expected_exit("A") == pytest.approx(0.5)   # after a restart
    store.close()


def test_the_scheduler_times_a_finished_run_s_exit_and_publishes_it(tmp_path):
    sched = Scheduler(tmp_path)
    job = sched.submit(steps=50)
    sched.at(1.0)                                   # round 0: its run is launched
    sched.t = 2.0
    sched.init(job)
    sched.t = 5.0                                   # its last step is durable
    assert sched.x.processes.durable_steps(job, 50, sched.gen(job), seconds=3.0)
    sched.t = 5.6                                   # its process exits 0.6 s later
    sched.exited(job, 50)
    assert sched.x.startups.expected_exit("A3C") == pytest.approx(0.6)
    sched.submit()
    sched.x.publish()
    waiting = [j for j in sched.x.snapshot.status().jobs if j.state != "done"]
    assert [j.exit_s for j in waiting] == [pytest.approx(0.6)]     # its type's, published
    sched.close()


def test_a_preempted_run_s_exit_after_its_save_is_measured_as_well(tmp_path):
    """A run preempted at its lease's end saves, commits and exits: the same path from its
    last commit to its exit as a finished run's. It is timed too, so a type's exit is known
    from its first preemption on (issue #29: until one of its jobs finished, the forecast
    started refills a torch process's exit, 0.65 s, early). The exit's own report, which
    repeats the last commit, does not restart the clock."""
    sched = Scheduler(tmp_path)
    sched.submit(), sched.submit()
    sched.at(1.0)                                   # round 0: one job on the one GPU
    (run,) = sched.sent.runs
    sched.t = 1.5
    sched.init(run.job_id)
    sched.at(1.0 + R - sched.x.config.plan_lead)    # round 1 goes to the other job
    sched.t = 1.0 + R - 0.05                        # the run's save commits at its end
    assert sched.x.processes.durable_steps(run.job_id, 80, sched.gen(run.job_id), seconds=8.0)
    sched.at(1.0 + R)
    assert sched.x.startups.expected_exit("A3C") == pytest.approx(     # (none timed yet)
        EXIT_PRIOR_SHARE * sched.x.startups.expected_startup("A3C"))
    sched.t = 1.0 + R + 0.4                         # its process exits
    sched.exited(run.job_id, 80)
    assert sched.x.startups.expected_exit("A3C") == pytest.approx(0.45)
    sched.close()


def test_before_any_exit_is_timed_a_run_is_expected_to_exit_in_a_share_of_its_start_up(
        tmp_path):
    """Under the restart rule no run of a fresh cluster is preempted before a job first
    ends, so no exit is timed until then: the forecasts charged refills none, and started
    them a torch process's exit (0.65-0.9 s) early (issue #29). Until one is timed, a
    type's exit is a share of its start-up; once one is, the timed ones count."""
    store = Store(tmp_path)
    stats = Startups(store)
    stats.record("torch", 2.8)
    stats.record("steps", 0.15)
    assert stats.expected_exit("torch") == pytest.approx(EXIT_PRIOR_SHARE * 2.8)
    assert stats.expected_exit("steps") == pytest.approx(EXIT_PRIOR_SHARE * 0.15)
    stats.record_exit("torch", 0.7)
    assert stats.expected_exit("torch") == pytest.approx(0.7)
    # a type not timed yet: its start-up times the share measured on the others
    assert stats.expected_exit("steps") == pytest.approx(0.15 * 0.7 / 2.8)
    store.close()


def test_a_start_up_is_recorded_with_the_processes_its_round_launched_on_its_machine(
        tmp_path):
    """Processes that start at once on one machine share its CPUs and disks (issue #29:
    0.15 s alone, 0.24 s three at once): each start-up is kept with its launch wave, the
    launches of its round's start on its machine (another machine's do not count, and a
    refill starts alone)."""
    sched = Scheduler(tmp_path, gpus=3)
    other = sched.x.roster.register(pb.RegisterWorkerRequest(
        worker_type="v100", gpus=1, address="10.0.0.2:7", hostname="h2",
        previous_server_id=-1), sched.t).server_id
    jobs = [sched.submit() for _ in range(4)]
    sched.at(1.0)                                    # round 0: all four launched
    on = {job: next(iter(sched.x.runs.get(job).servers)) for job in jobs}
    assert sorted(on.values()) == [sched.server] * 3 + [other]
    sched.t = 1.4
    for job in jobs:
        sched.x.processes.init_job(pb.InitJobRequest(job_id=job, round=0, rank=0, server_id=on[job],
                                                     generation=sched.gen(job)))
    stored = [json.loads(v) for v in sched.store.meta_family(STARTUP_WAVE.name).values()]
    assert sorted(w for _, w, _, _ in stored) == [1, 3, 3, 3]
    assert [s for _, _, s, _ in stored] == [pytest.approx(0.4)] * 4
    sched.close()


def test_the_wave_slope_and_each_type_s_start_up_alone_survive_a_restart_and_follow_the_window(
        tmp_path):
    store = Store(tmp_path)
    stats = Startups(store)
    assert stats.wave_slope() == 0.0 and stats.expected_alone("A") == 0.0
    for wave, seconds in [(1, 0.15), (2, 0.18), (3, 0.24)] * 4:
        stats.record("A", seconds, wave)
    slope, alone = stats.wave_slope(), stats.expected_alone("A")
    assert 0.15 < slope < 0.35 and alone == pytest.approx(0.15, rel=0.1)
    assert stats.expected_alone("B") == alone         # not measured: the measured types'
    again = Startups(store)
    assert (again.wave_slope(), again.expected_alone("A")) == (slope, alone)
    for _ in range(WAVE_WINDOW):                      # the window: the most recent only
        again.record("A", 0.2, 1)
    assert again.wave_slope() == 0.0 and again.expected_alone("A") == pytest.approx(0.2)
    assert len(store.meta_family(STARTUP_WAVE.name)) == WAVE_WINDOW     # a ring of rows
    third = Startups(store)
    assert third.wave_slope() == 0.0 and third.expected_alone("A") == pytest.approx(0.2)
    store.close()


def test_the_status_carries_the_wave_slope_and_each_job_s_start_up_alone(tmp_path):
    sched = Scheduler(tmp_path)
    for wave, seconds in [(1, 0.15), (2, 0.18), (3, 0.24)] * 4:
        sched.x.startups.record("A3C", seconds, wave)
    sched.submit()
    sched.x.publish()
    status = sched.x.snapshot.status()
    assert status.startup_wave_slope == sched.x.startups.wave_slope() > 0
    assert [j.startup_alone_s for j in status.jobs] == [
        pytest.approx(sched.x.startups.expected_alone("A3C"))]
    sched.close()
