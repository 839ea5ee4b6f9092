"""Workers freed mid-round go to waiting jobs for the rest of the round (issue #18: no GPU
idle while a job waits; ``CoreConfig.refill_freed``, ``SchedulerCore.refill`` through
``RoundDriver.refill``), by the round's priorities (thesis §5.5), and the simulator, which
shares the core, models it."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simulator.engine as engine
from gavelsched.core import CoreConfig
from gavelsched.core.driver import RoundDriver, config_for
from policies import get_policy
from policies.base import Solution
from simulator.engine import simulate
from traces import TraceJob, default_table

from .test_core import R, Recording, job, make_core

ON = CoreConfig(round_seconds=R, refill_freed=True)


def first_round(config, counts, jobs):
    core = make_core(config=config, counts=counts)
    driver = RoundDriver(core)
    for spec in jobs:
        core.submit(spec, 0.0)
    return core, driver, driver.boundary(0.0).round


def test_a_job_that_finishes_mid_round_hands_its_gpu_to_a_waiting_job_until_the_round_ends():
    core, driver, rnd = first_round(ON, {"v100": 1}, [job(0, steps=100), job(1)])
    assert rnd.batch.keys == ("0",)
    assert driver.credit(("0",), ((100,),), 10.0) == ("0",)   # 100 steps at 10/s: t = 10 s
    more = driver.refill(rnd.batch.workers[0], 10.0, R)
    assert more.keys == ("1",) and more.workers == rnd.batch.workers
    assert int(more.steps[0, 0]) == int(10.0 * (R - 10.0))  # a lease for the rest of the round
    assert not more.extended[0]                             # a fresh start
    assert driver.in_flight.batch.keys == ("0", "1")
    nxt = driver.boundary(R, np.array([10.0, R - 10.0])).round
    # the refill's received time counts; it keeps its GPU next round as an extension
    assert nxt.batch.keys == ("1",) and nxt.batch.extended[0]


@pytest.mark.parametrize("refill_s", [R - 10.0, 0.0])
def test_received_time_of_a_refill_counts_toward_its_share(refill_s):
    """Job 1 had the freed GPU for the rest of the round: the next round goes to job 2
    (its deficit is larger); had it not run (0 s), job 1 would win the tie by age."""
    _, driver, rnd = first_round(ON, {"v100": 1}, [job(0, steps=100), job(1), job(2)])
    driver.credit(("0",), ((100,),), 10.0)
    assert driver.refill(rnd.batch.workers[0], 10.0, R).keys == ("1",)
    nxt = driver.boundary(R, np.array([10.0, refill_s])).round
    assert nxt.batch.keys == (("2",) if refill_s else ("1",))


def test_without_refill_freed_the_gpu_stays_idle_as_in_gavel():
    _, driver, rnd = first_round(CoreConfig(round_seconds=R), {"v100": 1},
                                 [job(0, steps=100), job(1)])
    driver.credit(("0",), ((100,),), 10.0)
    assert len(driver.refill(rnd.batch.workers[0], 10.0, R)) == 0
    assert driver.in_flight.batch.keys == ("0",)


def test_jobs_of_the_round_are_never_placed_twice():
    core, driver, rnd = first_round(ON, {"v100": 2}, [job(0, steps=100), job(1), job(2)])
    assert set(rnd.batch.keys) == {"0", "1"}
    at = rnd.batch.keys.index("0")
    driver.credit(("0",), ((100,),), 10.0)
    more = driver.refill(rnd.batch.workers[at], 10.0, R)
    assert more.keys == ("2",)
    # the same workers again: nothing is left waiting, so nothing more is placed
    assert len(driver.refill(rnd.batch.workers[at], 20.0, R)) == 0


def test_only_the_freed_workers_are_given():
    core, driver, rnd = first_round(ON, {"v100": 2, "k80": 2},
                                    [job(0, steps=100), job(1), job(2), job(3), job(4)])
    driver.credit(("0",), ((100,),), 10.0)
    freed = rnd.batch.workers[rnd.batch.keys.index("0")]
    more = driver.refill(freed, 10.0, R)
    assert more.workers == (freed,)


def test_no_refill_after_refill_until():
    """The daemon has planned the next round by then (``plan_lead``)."""
    _, driver, rnd = first_round(ON.but(refill_until=0.5), {"v100": 1},
                                 [job(0, steps=100), job(1)])
    assert len(driver.refill(rnd.batch.workers[0], 0.6 * R, R)) == 0
    assert driver.refill(rnd.batch.workers[0], 0.4 * R, R).keys == ("1",)
    with pytest.raises(ValueError, match="refill_until"):
        CoreConfig(refill_until=1.5)


def test_no_time_left_no_refill():
    _, driver, rnd = first_round(ON, {"v100": 1}, [job(0, steps=100), job(1)])
    assert len(driver.refill(rnd.batch.workers[0], R, R)) == 0


class HeadOnly(Recording):
    """All of the type to the first job, nothing to the others (FIFO's shape)."""

    def _solve(self, problem):
        first = min(problem.jobs, key=lambda j: int(j.id))
        return Solution({j.id: {t: 1.0 if j is first else 0.0 for t in problem.cluster}
                         for j in problem.jobs}, None, None)


@pytest.mark.parametrize("backfill", [False, True])
def test_a_policy_without_backfill_keeps_its_idle_gpus_idle(backfill):
    core = make_core(policy=HeadOnly(), counts={"v100": 1},
                     config=ON.but(backfill=backfill))
    driver = RoundDriver(core)
    for spec in (job(0, steps=100), job(1)):
        core.submit(spec, 0.0)
    rnd = driver.boundary(0.0).round
    driver.credit(("0",), ((100,),), 10.0)
    more = driver.refill(rnd.batch.workers[0], 10.0, R)
    assert more.keys == (("1",) if backfill else ())


@pytest.mark.parametrize("resolve", [False, True])
def test_a_stale_allocation_is_re_solved_first_when_asked(resolve):
    """A daemon at a round's start: the job it planned ended after the plan. Re-solved, the
    waiting job gets the time (FIFO's next in line); without, it has none (no backfill)."""
    core = make_core(policy=HeadOnly(), counts={"v100": 1}, config=ON.but(backfill=False))
    driver = RoundDriver(core)
    for spec in (job(0, steps=100), job(1)):
        core.submit(spec, 0.0)
    rnd = driver.boundary(0.0).round
    driver.credit(("0",), ((100,),), 10.0)
    more = driver.refill(rnd.batch.workers[0], 10.0, R, resolve=resolve)
    assert more.keys == (("1",) if resolve else ())


def test_the_simulator_gives_a_freed_gpu_to_the_waiting_job():
    """Two GPUs, a short job and two long ones: with refills the third job starts when the
    short one ends instead of at the next round, and finishes R - (short job's time)
    sooner; the others are untouched."""
    kind = "ResNet-18 (batch size 32)"
    jobs = [TraceJob(job_type=kind, scale_factor=1, total_steps=n, arrival_s=0.0)
            for n in (1000, 50_000, 50_000)]
    table, policy = default_table(), get_policy("max_min_fairness_perf")
    jct = {}
    for refill in (False, True):
        config = config_for(policy, table, ("v100",), round_seconds=R, refill_freed=refill)
        done = simulate(jobs, table, {"v100": 2}, policy, core_config=config).to_dict()["jobs"]
        jct[refill] = [j["jct_s"] for j in done]
    short = 1000 / table.get("v100", kind)
    assert jct[True][:2] == pytest.approx(jct[False][:2])
    # (within the whole steps its leases round down to)
    assert jct[False][2] - jct[True][2] == pytest.approx(R - short, abs=0.5)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 14), gpus=st.integers(1, 3),
       round_s=st.sampled_from([60.0, 360.0]), overhead=st.sampled_from([0.0, 20.0]),
       lead=st.sampled_from([0.0, 0.3]),
       name=st.sampled_from(["max_min_fairness_perf", "fifo_perf"]))
def test_in_the_simulator_no_worker_ever_runs_two_tasks_at_once(seed, n, gpus, round_s,
                                                                overhead, lead, name):
    """Every round, the intervals of the tasks holding a worker (refills included, and
    those at a round's start for jobs that ended after a plan made ``lead`` of a round
    early: ``SimConfig.plan_lead_s``) are disjoint, and every job finishes."""
    rng = np.random.default_rng(seed)
    table = default_table()
    types = sorted(table.job_types)[:6]
    jobs = [TraceJob(job_type=str(rng.choice(types)), scale_factor=1,
                     total_steps=int(rng.integers(50, 20_000)),
                     arrival_s=float(rng.integers(0, 3) * 100)) for _ in range(n)]
    seen = []
    original = engine._Run.refill

    def recording(self, tasks, now, span):
        out = original(self, tasks, now, span)
        seen.append(out)
        return out

    policy = get_policy(name)
    cluster = {"v100": gpus, "k80": gpus}
    config = config_for(policy, table, tuple(cluster), round_seconds=round_s,
                        refill_freed=True, refill_until=1.0 - lead)
    sim = engine.SimConfig(preemption_overhead_s={t: overhead for t in types},
                           plan_lead_s=lead * round_s)
    with mock.patch.object(engine._Run, "refill", recording):
        result = simulate(jobs, table, cluster, policy, core_config=config, sim=sim)
    assert len(result.to_dict()["jobs"]) == n
    for batch, seconds, _, _, start in seen:
        held: dict[int, list[tuple[float, float]]] = {}
        for workers, a, s in zip(batch.workers, start.tolist(), seconds.tolist()):
            for w in workers:
                held.setdefault(w, []).append((a, a + s))
        for spans in held.values():
            spans.sort()
            assert all(b[0] >= a[1] - 1e-9 for a, b in zip(spans, spans[1:]))
        assert (start + seconds <= round_s + 1e-9).all()
