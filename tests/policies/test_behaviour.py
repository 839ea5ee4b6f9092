"""Behaviour of individual policies beyond their objectives."""

from __future__ import annotations

import dataclasses
from functools import partial

import numpy as np
import pytest
from scipy.optimize import linprog

from policies import (
    Infeasible,
    Job,
    Pair,
    Problem,
    SolverFailed,
    UnknownOption,
    UnknownPolicy,
    get_policy,
    pair_key,
    policy_names,
)
from policies.columns import build_columns
from policies.errors import ProblemError

from .conftest import assert_valid, effective_throughput, table_6_1_throughputs

CLUSTER = {"v100": 2, "p100": 2, "k80": 2}


def jobs_from(models, **kw):
    return [Job(str(i), table_6_1_throughputs(m), remaining_steps=1000.0 * (i + 1), **kw)
            for i, m in enumerate(models)]


@pytest.mark.parametrize("name", policy_names())
def test_empty_problem_gives_empty_allocation(name):
    options = {"budget": 10.0} if name == "min_makespan_with_budget" else {}
    allocation = get_policy(name, **options).solve(Problem(cluster=CLUSTER))
    assert allocation.allocation == {} and allocation.policy == name


@pytest.mark.parametrize("name", ["max_min_fairness_perf", "finish_time_fairness_perf",
                                  "min_total_duration_perf", "fifo_perf", "max_sum_throughput_perf",
                                  "max_min_fairness_water_filling_perf", "isolated", "allox"])
def test_job_gets_nothing_where_it_cannot_run(name):
    jobs = [Job("a", {"v100": 10.0, "p100": 0.0}, remaining_steps=100.0),
            Job("b", {"v100": 5.0, "p100": 4.0, "k80": 2.0}, remaining_steps=100.0)]
    allocation = get_policy(name).solve(Problem(cluster=CLUSTER, jobs=jobs))
    assert allocation.share("a", "p100") == 0.0 and allocation.share("a", "k80") == 0.0


@pytest.mark.parametrize("name", ["finish_time_fairness_perf", "finish_time_fairness_mixed",
                                  "max_min_fairness_perf", "min_total_duration_perf"])
def test_jobs_with_no_steps_left_give_a_valid_allocation(name):
    """Themis ρ of a job with nothing left and no time yet is 0/0: it must not reach the
    solver as NaN (it did, as a traceback from `gavelsched solve`)."""
    jobs = [Job(str(i), {"v100": 2.0, "k80": 1.0}, remaining_steps=0.0) for i in range(2)]
    problem = Problem(cluster={"v100": 1, "k80": 1}, jobs=jobs)
    allocation = get_policy(name).solve(problem)
    assert_valid(problem, allocation)


def test_job_larger_than_a_type_gets_nothing_there():
    jobs = [Job("big", {"v100": 10.0, "k80": 2.0}, scale_factor=4)]
    allocation = get_policy("max_min_fairness_perf").solve(
        Problem(cluster={"v100": 2, "k80": 4}, jobs=jobs))
    assert allocation.share("big", "v100") == 0.0
    assert allocation.share("big", "k80") == pytest.approx(1.0, abs=1e-6)


def test_infeasible_slos_name_the_jobs_refused_in_order_of_arrival():
    """Strict mode admits "fast", refuses "also" (both need the one V100), and admits
    "easy", which came after "also" but fits with "fast"."""
    jobs = [Job("fast", {"v100": 10.0, "k80": 1.0}, remaining_steps=1000.0, slo_s=110.0),
            Job("also", {"v100": 10.0, "k80": 1.0}, remaining_steps=1000.0, slo_s=110.0),
            Job("easy", {"v100": 10.0, "k80": 1.0}, remaining_steps=10.0, slo_s=1e6)]
    problem = Problem(cluster={"v100": 1, "k80": 1}, jobs=jobs, prices={"v100": 3, "k80": 1})
    with pytest.raises(Infeasible) as err:
        get_policy("max_sum_throughput_normalized_by_cost_perf_SLOs").solve(problem)
    assert err.value.refused() == err.value.jobs == ("also",)
    assert str(err.value).endswith("refusing the new jobs whose SLO does not fit, in order "
                                   "of arrival: also")


def test_slo_already_missed_is_named_and_dropped(caplog):
    """Even in strict mode: its job runs on (refusing it would throw its work away)."""
    jobs = [Job("late", {"v100": 1.0}, remaining_steps=10.0, elapsed_s=50.0, slo_s=40.0)]
    got = get_policy("max_sum_throughput_normalized_by_cost_perf_SLOs").solve(
        Problem(cluster={"v100": 1}, jobs=jobs, prices={"v100": 1.0}))
    assert "dropping SLOs already lost: late" in caplog.text
    assert got.allocation["late"]["v100"] == pytest.approx(1.0)


def test_best_effort_slos_drop_lost_slos_and_meet_the_rest_as_well_as_possible():
    """A running scheduler must not stop on an SLO it cannot meet (issue #3's simulator)."""
    jobs = [Job("late", {"v100": 10.0, "k80": 1.0}, remaining_steps=10.0, elapsed_s=50.0,
                slo_s=40.0),
            Job("fast", {"v100": 10.0, "k80": 1.0}, remaining_steps=1000.0, slo_s=110.0),
            Job("also", {"v100": 10.0, "k80": 1.0}, remaining_steps=1000.0, slo_s=110.0)]
    problem = Problem(cluster={"v100": 1, "k80": 1}, jobs=jobs, prices={"v100": 3, "k80": 1})
    name = "max_sum_throughput_normalized_by_cost_perf_SLOs"
    with pytest.raises(Infeasible, match="in order of arrival: also$"):
        get_policy(name).solve(problem)     # strict: the late one dropped, the newest refused
    allocation = get_policy(name, slo_mode="best_effort").solve(problem)
    assert_valid(problem, allocation)
    eff = effective_throughput(problem, allocation)
    # the two competing SLOs (9.09 steps/s each) share the V100 and the K80: 11 steps/s in all
    assert eff["fast"] + eff["also"] == pytest.approx(11.0, rel=1e-4)
    with pytest.raises(ProblemError, match="slo_mode"):
        get_policy(name, slo_mode="sometimes")


def test_cost_policy_prefers_cost_effective_types():
    """Chapter 6 / Table 6.1: A3C is most cost-effective on a K80, ResNet-50 on a V100."""
    jobs = [Job("a3c", table_6_1_throughputs("A3C")),
            Job("resnet", table_6_1_throughputs("ResNet-50"))]
    problem = Problem(cluster={"v100": 1, "k80": 1, "p100": 0},
                      prices={"v100": 2.48, "p100": 1.46, "k80": 0.45}, jobs=jobs)
    allocation = get_policy("max_sum_throughput_normalized_by_cost_perf").solve(problem)
    assert allocation.share("a3c", "k80") == pytest.approx(1.0, abs=1e-5)
    assert allocation.share("resnet", "v100") == pytest.approx(1.0, abs=1e-5)


def test_unknown_policy_and_bad_option():
    with pytest.raises(UnknownPolicy, match="no_such"):
        get_policy("no_such")
    with pytest.raises(UnknownOption, match="unknown option 'colour'; accepted: .*solver"):
        get_policy("max_min_fairness_perf", colour="red")
    with pytest.raises(ProblemError, match="budget"):
        get_policy("min_makespan_with_budget")


# ---- FIFO and SJF ---------------------------------------------------------------------

def test_fifo_perf_gives_jobs_their_fastest_free_type_in_arrival_order():
    jobs = jobs_from(["ResNet-50", "ResNet-18", "A3C", "Transformer"])
    allocation = get_policy("fifo_perf").solve(Problem(cluster={"v100": 1, "p100": 1, "k80": 1},
                                                       jobs=jobs))
    assert allocation.share("0", "v100") == 1.0
    assert allocation.share("1", "p100") == 1.0
    assert allocation.share("2", "k80") == 1.0
    assert allocation.job_time("3") == 0.0


def test_fifo_head_of_line_blocks():
    """Nobody overtakes the head of the queue, even when a later job would fit."""
    jobs = [Job("0", {"v100": 1.0}), Job("1", {"v100": 1.0}, scale_factor=2),
            Job("2", {"v100": 1.0})]
    for name in ["fifo", "fifo_perf"]:
        allocation = get_policy(name).solve(Problem(cluster={"v100": 2}, jobs=jobs))
        assert allocation.share("0", "v100") == 1.0
        assert allocation.job_time("1") == 0.0 and allocation.job_time("2") == 0.0


def test_fifo_keeps_running_jobs_and_hands_freed_type_to_next():
    jobs = [Job(str(i), {"v100": 2.0, "k80": 1.0}) for i in range(1, 4)]
    previous = {"0": {"v100": 1.0, "k80": 0.0}, "1": {"v100": 0.0, "k80": 1.0}}
    problem = Problem(cluster={"v100": 1, "k80": 1}, jobs=jobs, previous=previous)
    allocation = get_policy("fifo").solve(problem)
    assert allocation.share("1", "k80") == 1.0  # stays where it was
    assert allocation.share("2", "v100") == 1.0  # takes the finished job's V100
    assert allocation.job_time("3") == 0.0


def test_fifo_random_choice_is_deterministic_per_seed():
    jobs = [Job(str(i), {"v100": 2.0, "p100": 1.5, "k80": 1.0}) for i in range(30)]
    problem = Problem(cluster={"v100": 10, "p100": 10, "k80": 10}, jobs=jobs)
    fifo = partial(get_policy, "fifo", type_choice="random")
    one, two = fifo(seed=3).solve(problem), fifo(seed=3).solve(problem)
    assert one.allocation == two.allocation
    used = {t for row in one.allocation.values() for t, x in row.items() if x > 0}
    assert used == {"v100", "p100", "k80"}


def test_fifo_gavel_type_choice_gives_new_jobs_the_last_listed_type():
    """Gavel's FIFOPolicy code gives a new job the last type (by name) of its list of types
    with free workers, whatever type it drew; a type that fills up exactly leaves the list."""
    jobs = [Job(str(i), {"v100": 2.0, "p100": 1.5, "k80": 1.0}) for i in range(3)]
    allocation = get_policy("fifo").solve(
        Problem(cluster={"v100": 3, "p100": 3, "k80": 3}, jobs=jobs))
    assert all(allocation.share(str(i), "v100") == 1.0 for i in range(3))


def test_fifo_gavel_type_choice_oversubscribes_as_gavel_does():
    """Once the last listed type is full but still listed (another type left the list in
    its place), later jobs pile onto it too, beyond its workers: Gavel's mechanism then
    shares it among them in turns. Which type leaves the list is a seeded draw."""
    jobs = [Job(str(i), {"v100": 2.0, "p100": 1.5, "k80": 1.0}) for i in range(3)]
    problem = Problem(cluster={"v100": 1, "p100": 1, "k80": 1}, jobs=jobs)
    piled = 0
    for seed in range(20):
        allocation = get_policy("fifo", seed=seed).solve(problem)
        assert allocation.share("0", "v100") == 1.0
        if all(allocation.share(str(i), "v100") == 1.0 for i in range(3)):
            piled += 1
        else:
            assert_valid(problem, allocation)
    assert 0 < piled < 20


def test_fifo_gavel_type_choice_keeps_running_jobs_where_they_are():
    jobs = [Job(str(i), {"v100": 2.0, "k80": 1.0}) for i in range(3)]
    previous = {"0": {"v100": 1.0, "k80": 0.0}, "1": {"v100": 1.0, "k80": 0.0}}
    allocation = get_policy("fifo").solve(
        Problem(cluster={"v100": 1, "k80": 1}, jobs=jobs, previous=previous))
    assert allocation.share("0", "v100") == allocation.share("1", "v100") == 1.0
    assert allocation.share("2", "k80") == 1.0


def test_fifo_rejects_an_unknown_type_choice():
    with pytest.raises(ProblemError, match="type_choice.*'best'"):
        get_policy("fifo", type_choice="best")


def test_shortest_job_first_runs_shortest_on_fastest_type():
    jobs = [Job("long", {"v100": 10.0, "k80": 5.0}, remaining_steps=1e6),
            Job("short", {"v100": 10.0, "k80": 5.0}, remaining_steps=10.0)]
    allocation = get_policy("shortest_job_first_perf").solve(
        Problem(cluster={"v100": 1, "k80": 1}, jobs=jobs))
    assert allocation.share("short", "v100") == 1.0
    assert allocation.share("long", "k80") == 1.0


# ---- space sharing ------------------------------------------------------------------

def packing_problem(gain: float) -> Problem:
    jobs = [Job(str(i), {"v100": 10.0}) for i in range(4)]
    pairs = [Pair((str(a), str(b)), {"v100": (10.0 * gain / 2, 10.0 * gain / 2)})
             for a in range(4) for b in range(a + 1, 4)]
    return Problem(cluster={"v100": 2}, jobs=jobs, pairs=pairs)


def test_packed_uses_pairs_that_beat_time_slicing():
    problem = packing_problem(gain=1.5)
    allocation = get_policy("max_min_fairness_packed").solve(problem)
    assert_valid(problem, allocation)
    assert any("+" in key and sum(row.values()) > 0.1 for key, row in allocation.allocation.items())
    alone = get_policy("max_min_fairness_perf").solve(problem)
    eff, eff_alone = effective_throughput(problem, allocation), effective_throughput(problem, alone)
    assert min(eff.values()) == pytest.approx(1.5 * min(eff_alone.values()), rel=1e-4)


def test_pairs_that_do_not_beat_time_slicing_are_left_out():
    cols = build_columns(packing_problem(gain=0.9), pairs=True)
    assert all("+" not in key for key in cols.keys)


def test_max_partners_caps_pairs_per_job():
    cols = build_columns(packing_problem(gain=1.5), pairs=True, max_partners=1)
    pairs = [key for key in cols.keys if "+" in key]
    members = [job for key in pairs for job in key.split("+")]
    assert len(pairs) == 2 and len(set(members)) == 4


def test_gandiva_pairs_only_when_oversubscribed_and_keeps_helpful_pairs():
    problem = packing_problem(gain=1.5)
    under = get_policy("gandiva").solve(problem.with_jobs(problem.jobs[:2]))
    assert all("+" not in key for key, row in under.allocation.items() if sum(row.values()) > 0)
    over = get_policy("gandiva").solve(problem)
    assert_valid(problem, over)
    combos = [key for key, row in over.allocation.items() if sum(row.values()) > 0]
    assert len(combos) == 2 and all("+" in key for key in combos)
    shares = {sum(over.allocation[key].values()) for key in combos}
    assert len(shares) == 1  # equal time per combination
    assert sorted(map(sorted, over.policy_state["pairs"])) == sorted(
        sorted(key.split("+")) for key in combos)
    # A pair handed back in the state stays while it helps, whatever the generator draws.
    for seed in range(5):
        kept = Problem(cluster=problem.cluster, jobs=problem.jobs, pairs=problem.pairs,
                       policy_state={"pairs": [["0", "3"]]})
        again = get_policy("gandiva", seed=seed).solve(kept)
        assert sum(again.allocation[pair_key("0", "3")].values()) > 0


def test_gandiva_keeps_a_pair_by_gavels_test():
    """A pair stays while its normalised packed throughputs, summed over the types, reach 1
    (Gavel's test: on two types, 0.6 of time slicing on each passes)."""
    def kept(pair_rates, types=("v100",)):
        jobs = [Job(str(i), dict.fromkeys(types, 10.0)) for i in range(3)]
        pairs = [Pair(("0", "1"), pair_rates)] if pair_rates else []
        # Room for every job: no new pairs are drawn, kept ones are tested all the same.
        problem = Problem(cluster=dict.fromkeys(types, 3), jobs=jobs, pairs=pairs,
                          policy_state={"pairs": [["0", "1"]]})
        return ["0", "1"] in get_policy("gandiva", seed=3).solve(problem).policy_state["pairs"]

    assert kept({"v100": (6.0, 6.0)})                         # 1.2 on one type
    assert not kept({"v100": (4.5, 4.5)})                     # 0.9
    assert kept({"v100": (3.0, 3.0), "k80": (3.0, 3.0)}, ("v100", "k80"))  # 0.6 + 0.6
    assert not kept({"v100": (6.0, 6.0)}, ("v100", "k80"))    # cannot share on k80
    assert not kept(None)                                     # cannot share anywhere


def test_gandiva_rejects_malformed_state():
    problem = Problem(cluster={"v100": 1}, jobs=[Job("0", {"v100": 1.0})],
                      policy_state={"pairs": [["0"]]})
    with pytest.raises(ProblemError, match="policy_state.pairs"):
        get_policy("gandiva").solve(problem)


def test_gandiva_time_on_a_type_a_pair_cannot_share_is_dropped():
    jobs = [Job(str(i), {"v100": 10.0, "k80": 5.0}) for i in range(3)]
    pairs = [Pair(("0", "1"), {"v100": (6.0, 6.0)})]  # no co-located run on k80
    problem = Problem(cluster={"v100": 1, "k80": 1}, jobs=jobs, pairs=pairs,
                      policy_state={"pairs": [["0", "1"]]})
    allocation = get_policy("gandiva").solve(problem)
    assert_valid(problem, allocation)
    assert allocation.share(pair_key("0", "1"), "k80") == 0.0


def test_allox_rejects_multi_gpu_jobs_by_name():
    # the name lets the core drop that job and plan the others (a live cluster under allox
    # planned nothing at all once a 2-GPU job was submitted)
    with pytest.raises(ProblemError, match="single-GPU") as err:
        get_policy("allox").solve(Problem(cluster={"v100": 4},
                                          jobs=[Job("x", {"v100": 1.0}, scale_factor=2)]))
    assert err.value.job_id == "x"


def test_allox_runs_a_job_per_gpu_minimising_completion_time():
    jobs = [Job("slow", {"v100": 1.0, "k80": 1.0}, remaining_steps=100.0),
            Job("quick", {"v100": 10.0, "k80": 1.0}, remaining_steps=100.0)]
    allocation = get_policy("allox").solve(Problem(cluster={"v100": 1, "k80": 1}, jobs=jobs))
    assert allocation.share("quick", "v100") == 1.0
    assert allocation.share("slow", "k80") == 1.0


def test_allox_runs_the_head_of_each_gpu_s_queue():
    """40 jobs on 10 + 10 GPUs: every GPU has a queue, so 20 jobs run, one a GPU."""
    jobs = [Job(str(i), {"v100": 1.0 + i % 7, "k80": 1.0}, remaining_steps=100.0 + i)
            for i in range(40)]
    problem = Problem(cluster={"v100": 10, "k80": 10}, jobs=jobs)
    allocation = get_policy("allox").solve(problem)
    assert_valid(problem, allocation)
    for t in ("v100", "k80"):
        assert sum(allocation.share(job.id, t) for job in jobs) == 10


def test_allox_refuses_more_queue_levels_than_it_matches(monkeypatch):
    """Too many jobs per GPU (queue levels past ``MAX_LEVELS``) are refused before the
    matching is made, in one line that names the ``alpha`` that fits; with it, it plans."""
    monkeypatch.setattr("policies.baselines.MAX_LEVELS", 7)
    jobs = [Job(str(i), {"v100": 2.0, "k80": 1.0}, remaining_steps=100.0) for i in range(8)]
    problem = Problem(cluster={"v100": 2, "k80": 2}, jobs=jobs)     # 4 levels a type
    with pytest.raises(ProblemError, match=r"^allox: 8 jobs on 4 free GPUs make 8 queue "
                                           r"levels to match, above 7 \(too many jobs per "
                                           r"GPU\); match the 6 waiting longest with the "
                                           r"option alpha=0.75, or use a policy without "
                                           r"queue positions, such as "
                                           r"shortest_job_first_perf$"):
        get_policy("allox").solve(problem)
    assert_valid(problem, get_policy("allox", alpha=0.75).solve(problem))


def test_allox_keeps_a_job_on_its_gpu_until_it_finishes():
    """Gavel's AlloX is not preemptive: a job the last allocation gave a whole GPU keeps
    it, though a job that arrived since is quicker there; the matching is over the GPUs
    left."""
    long = Job("long", {"v100": 1.0, "k80": 0.5}, remaining_steps=1000.0, elapsed_s=50.0)
    quick = Job("quick", {"v100": 1.0, "k80": 0.5}, remaining_steps=10.0, elapsed_s=1.0)
    fresh = get_policy("allox").solve(Problem(cluster={"v100": 1}, jobs=[long, quick]))
    assert fresh.share("quick", "v100") == 1.0                     # SPT on an empty GPU
    kept = get_policy("allox").solve(Problem(cluster={"v100": 1}, jobs=[long, quick],
                                             previous={"long": {"v100": 1.0}}))
    assert kept.share("long", "v100") == 1.0 and kept.share("quick", "v100") == 0.0
    more = get_policy("allox").solve(Problem(cluster={"v100": 1, "k80": 1},
                                             jobs=[long, quick],
                                             previous={"long": {"v100": 1.0}}))
    assert more.share("quick", "k80") == 1.0


def test_allox_matches_only_the_alpha_share_that_waited_longest():
    """``alpha``: of 4 waiting jobs on 1 GPU, 0.5 matches the 2 that waited longest (the
    quickest of them starts), though a later one is quicker still."""
    jobs = [Job(str(i), {"v100": 1.0}, remaining_steps=s, elapsed_s=e)
            for i, (s, e) in enumerate([(30.0, 40.0), (20.0, 30.0), (1.0, 20.0), (2.0, 10.0)])]
    problem = Problem(cluster={"v100": 1}, jobs=jobs)
    assert get_policy("allox").solve(problem).share("2", "v100") == 1.0
    assert get_policy("allox", alpha=0.5).solve(problem).share("1", "v100") == 1.0
    for bad in (0, 1.5, float("nan"), "half", True):
        with pytest.raises(ProblemError, match=r"^allox: alpha must be in \(0, 1\], got "):
            get_policy("allox", alpha=bad)


# ---- finish-time fairness --------------------------------------------------------------

def test_finish_time_fairness_is_optimal_by_bisection():
    """ρ* is optimal: an LP (scipy, independent) finds an allocation with every job within
    ρ*(1 + 1e-5), and none within ρ*(1 - 1e-4)."""
    rng = np.random.default_rng(4)
    types = ["v100", "p100", "k80"]
    jobs = [Job(str(i), dict(zip(types, rng.uniform(1, 10, 3))), remaining_steps=rng.uniform(1e3, 1e5),
                elapsed_s=rng.uniform(0, 1e3)) for i in range(12)]
    problem = Problem(cluster={"v100": 3, "p100": 3, "k80": 3}, jobs=jobs)
    rho = get_policy("finish_time_fairness_perf").solve(problem).objective

    T = np.array([[j.throughputs[t] for t in types] for j in jobs])
    W = np.array([3.0, 3.0, 3.0])
    iso_share = W / len(jobs)
    iso_share = iso_share / max(iso_share.sum(), 1.0)
    s = np.array([j.remaining_steps for j in jobs])
    t = np.array([j.elapsed_s for j in jobs])
    reference = t + s / (T @ iso_share)

    def feasible(r):
        need = s / (r * reference - t)  # throughput each job needs to reach ρ = r
        if (need < 0).any():
            return False
        m, n = T.shape
        A = [np.kron(np.eye(m)[i], np.ones(n)) for i in range(m)]  # rows <= 1
        A += [np.kron(np.ones(m), np.eye(n)[j]) for j in range(n)]  # types <= W
        A += [-np.kron(np.eye(m)[i], T[i]) for i in range(m)]  # throughput >= need
        b = np.concatenate([np.ones(m), W, -need])
        return linprog(np.zeros(m * n), A_ub=np.array(A), b_ub=b, bounds=(0, 1),
                       method="highs").status == 0

    assert feasible(rho * (1 + 1e-5)) and not feasible(rho * (1 - 1e-4))


# ---- POP -------------------------------------------------------------------------------

def test_partitions_stay_close_to_optimal_and_valid():
    rng = np.random.default_rng(0)
    models = ["ResNet-50", "A3C", "Transformer", "CycleGAN", "ResNet-18"]
    jobs = [Job(str(i), table_6_1_throughputs(models[rng.integers(5)])) for i in range(400)]
    problem = Problem(cluster={"v100": 100, "p100": 100, "k80": 100}, jobs=jobs)
    exact = get_policy("max_min_fairness_perf").solve(problem)
    pop = get_policy("max_min_fairness_perf", partitions=4).solve(problem)
    assert_valid(problem, pop)
    assert pop.objective >= exact.objective * (1 - 0.015)
    assert set(pop.allocation) == set(exact.allocation)


def test_placement_sensitivity_as_two_worker_types():
    """§5.3.1: consolidated and unconsolidated placements are two worker types."""
    jobs = [Job("comm-heavy", {"v100-packed": 10.0, "v100-spread": 4.0}, scale_factor=4),
            Job("compute", {"v100-packed": 10.0, "v100-spread": 9.5}, scale_factor=4)]
    problem = Problem(cluster={"v100-packed": 4, "v100-spread": 4}, jobs=jobs)
    allocation = get_policy("max_sum_throughput_perf").solve(problem)
    assert allocation.share("comm-heavy", "v100-packed") == pytest.approx(1.0, abs=1e-5)
    assert allocation.share("compute", "v100-spread") == pytest.approx(1.0, abs=1e-5)


def test_isolated_scales_each_job_to_full_time_on_its_own():
    """X^isolated gives each of n jobs 1/n of every type; a job asked more than full time is
    scaled down to 1 alone, leaving the others' shares (Gavel's IsolatedPolicy)."""
    jobs = [Job("small", {"v100": 1.0}), Job("big", {"v100": 4.0}, scale_factor=4)]
    problem = Problem(cluster={"v100": 4}, jobs=jobs)
    allocation = get_policy("isolated").solve(problem)
    assert allocation.share("small", "v100") == pytest.approx(1.0)  # 2 GPUs' worth, capped
    assert allocation.share("big", "v100") == pytest.approx(0.5)    # 2 of its 4 GPUs
    assert_valid(problem, allocation)


def test_fifo_gavel_type_choice_draws_from_one_generator_across_solves():
    """Gavel's FIFOPolicy draws from one generator seeded once. The policy stays pure by
    handing the generator's state back (``Allocation.policy_state``) and continuing from
    the state it is given (``Problem.policy_state``)."""
    import random

    jobs = [Job(str(i), {"v100": 1.0}) for i in range(2)]
    first = get_policy("fifo", seed=7).solve(Problem(cluster={"v100": 2}, jobs=jobs))
    expected = random.Random(7)
    expected.randrange(1), expected.randrange(1)  # one draw per job placed
    assert first.policy_state["rng"][1] == list(expected.getstate()[1])
    # The next solve continues from that state (a third job finds no room: no draw).
    more = Problem(cluster={"v100": 2}, jobs=[*jobs, Job("2", {"v100": 1.0})],
                   previous=first.allocation, policy_state=first.policy_state)
    second = get_policy("fifo", seed=7).solve(more)
    assert second.policy_state == first.policy_state
    with pytest.raises(ProblemError, match="policy_state.rng"):
        get_policy("fifo").solve(Problem(cluster={"v100": 2}, jobs=jobs,
                                         policy_state={"rng": [3, [1, 2], None]}))


def test_policy_state_round_trips_through_json():
    problem = Problem.from_dict({"cluster": {"v100": 1}, "jobs": [],
                                 "policy_state": {"rng": [3, [1], None]}})
    assert problem.to_dict()["policy_state"] == {"rng": [3, [1], None]}
    allocation = get_policy("fifo").solve(Problem(cluster={"v100": 1},
                                                  jobs=[Job("0", {"v100": 1.0})]))
    again = type(allocation).from_dict(allocation.to_dict())
    assert again.policy_state["rng"] == allocation.policy_state["rng"]
    with pytest.raises(ProblemError, match="policy_state"):
        Problem.from_dict({"cluster": {"v100": 1}, "policy_state": [1]})


def test_compiled_max_min_answer_does_not_depend_on_earlier_solves():
    """Max-min fairness re-solves a cached compiled LP with new numbers; the answer must be
    the same as a first solve's (no solver state carried over from other data)."""
    from policies.fairness import COMPILED

    def problem(speed):
        jobs = [Job(str(i), {"v100": speed * (i + 1), "k80": 1.0 + i}, scale_factor=1 + i % 2)
                for i in range(6)]
        return Problem(cluster={"v100": 3, "k80": 4}, jobs=jobs)

    policy = get_policy("max_min_fairness_perf", backend="cvxpy")  # the compiled program
    COMPILED.clear()
    first = policy.solve(problem(2.0)).allocation
    policy.solve(problem(7.0))  # same shape, other numbers
    assert COMPILED.info().hits >= 1
    assert policy.solve(problem(2.0)).allocation == first


# ---- makespan: Gavel's bisection --------------------------------------------------------

@pytest.mark.parametrize("optimum", [30.0, 104.0, 5_000.0, 123_456.0, 999_999.0, 3.2e6, 4e7])
def test_gavel_bisection_ends_within_5_percent_above_the_optimum(optimum):
    from policies.makespan import gavel_bisection_end

    end = gavel_bisection_end(optimum)
    assert end >= optimum
    assert end <= 1.05 * max(optimum, 100.0)


def test_bisection_search_is_gavels_feasible_point_near_the_optimum():
    """search=bisection returns a feasible allocation whose makespan lies between the
    optimum and Gavel's bisection end point, from ECOS (Gavel's solver)."""
    from policies.makespan import gavel_bisection_end

    jobs = [Job(str(i), {"v100": 3.0 + i, "p100": 2.0, "k80": 1.0 + i / 3},
                remaining_steps=1e4 * (1 + i % 4), scale_factor=1 + i % 2) for i in range(8)]
    problem = Problem(cluster={"v100": 2, "p100": 3, "k80": 4}, jobs=jobs)
    exact = get_policy("min_total_duration_perf").solve(problem)
    gavel = get_policy("min_total_duration_perf", search="bisection").solve(problem)
    assert_valid(problem, gavel)
    assert gavel.solver == "ECOS"
    assert exact.objective <= gavel.objective * (1 + 1e-6)
    assert gavel.objective <= gavel_bisection_end(exact.objective) * (1 + 1e-6)
    assert gavel.allocation != exact.allocation


def test_exact_makespan_gives_short_jobs_all_the_time_the_optimum_leaves():
    """The makespan optimum leaves the short job anything from 1% of a GPU to all of one;
    the second solve gives it all of one, and keeps the makespan."""
    jobs = [Job("long", {"v100": 1.0}, remaining_steps=1000.0),
            Job("short", {"v100": 1.0}, remaining_steps=10.0)]
    problem = Problem(cluster={"v100": 2}, jobs=jobs)
    result = get_policy("min_total_duration_perf").solve(problem)
    assert_valid(problem, result)
    assert result.objective == pytest.approx(1000.0, rel=1e-5)
    assert result.allocation["long"]["v100"] == pytest.approx(1.0, abs=1e-5)
    assert result.allocation["short"]["v100"] == pytest.approx(1.0, abs=1e-5)


def test_exact_makespan_keeps_its_optimum_and_finishes_jobs_sooner(monkeypatch):
    """Where the longest job bounds the makespan on its own (it cannot use more than one
    GPU's time), the second solve keeps the first one's makespan (its objective, and what
    its allocation gives) and raises the sum of the other jobs' finishing rates."""
    from policies.makespan import _DirectRate, _pending

    jobs = [Job(str(i), {"v100": 3.0 + i, "p100": 2.0, "k80": 1.0 + i / 3},
                remaining_steps=1e5 if i == 0 else 1e3 * (1 + 7 * (i % 4)),
                scale_factor=1 + i % 2) for i in range(10)]
    problem = Problem(cluster={"v100": 2, "p100": 3, "k80": 4}, jobs=jobs)
    policy = get_policy("min_total_duration_perf")
    chosen = policy.solve(problem)
    assert_valid(problem, chosen)
    assert policy.evaluate(problem, chosen) == pytest.approx(chosen.objective, rel=1e-4)
    def fails(self, kept_rate):
        raise SolverFailed("the second solve, skipped")

    monkeypatch.setattr(_DirectRate, "short_jobs_first", fails)
    first = policy.solve(problem)  # the first solve's point alone
    assert chosen.objective == pytest.approx(first.objective, rel=1e-6)
    cols = policy.columns(problem)
    rows = _pending(cols)

    def finishing_rates(allocation):
        return cols.effective_throughput(cols.z_from(allocation))[rows] / cols.remaining[rows]

    assert finishing_rates(chosen).sum() > finishing_rates(first).sum() * 1.01


def test_bad_search_options():
    with pytest.raises(ProblemError, match="search"):
        get_policy("min_total_duration_perf", search="fast")
    with pytest.raises(ProblemError, match="budget"):
        get_policy("min_makespan_with_budget", budget=10.0, search="bisection")


def test_agnostic_policies_lose_time_planned_on_a_type_a_job_cannot_use():
    """An agnostic policy sees every type as equally fast, also one a job cannot run on
    (as Gavel's baselines do): it plans time there, which is dropped from the allocation."""
    jobs = [Job("a", {"v100": 4.0, "k80": 0.0}), Job("b", {"v100": 4.0, "k80": 2.0})]
    problem = Problem(cluster={"v100": 1, "k80": 2}, jobs=jobs)
    blind = get_policy("max_min_fairness").solve(problem)
    assert_valid(problem, blind)
    assert blind.share("a", "k80") == 0.0
    # Each job was planned full time (3 workers, 2 jobs), spread evenly over the types.
    assert blind.job_time("b") == pytest.approx(1.0, abs=1e-6)
    assert blind.job_time("a") == pytest.approx(blind.share("b", "v100"), abs=1e-6)
    assert blind.job_time("a") < 0.5


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("pairs", [False, True])
def test_order_objective_is_the_normalised_throughput_product_to_the_bit(seed, pairs):
    """FIFO's column weights are read from the column model's arrays: the very floats of
    the sparse product they stand for (normalised throughput, transposed, times M - rank)."""
    from policies.ordering import order_objective, shortest_rank
    from policies.throughput import normalized_throughput

    rng = np.random.default_rng(seed)
    types = ("v100", "p100", "k80")
    jobs = [Job(str(i), {t: float(rng.choice([0.0, rng.uniform(0.1, 1e3)])) for t in types},
                int(rng.choice([1, 2])), remaining_steps=float(rng.integers(1, 10**6)))
            for i in range(int(rng.integers(1, 12)))]
    pair_list = [Pair((a.id, b.id), {t: (rng.uniform(0.1, 1e3), rng.uniform(0.1, 1e3))
                                     for t in types})
                 for a, b in zip(jobs, jobs[1:])] if pairs else []
    cols = build_columns(Problem(cluster={"v100": 4, "p100": 4, "k80": 4}, jobs=jobs,
                                 pairs=pair_list), pairs=pairs)
    for rank in (np.arange(cols.num_jobs), shortest_rank(cols)):
        want = (normalized_throughput(cols).T @ (cols.num_jobs - rank)).T
        assert order_objective(cols, rank).tobytes() == np.asarray(want).tobytes()


def test_a_budget_that_cannot_finish_every_job_refuses_the_newest_new_one():
    """§6.4.2's budget on a live cluster: the jobs the last allocation planned keep it, and
    the newest jobs beyond it are refused by name (``Infeasible.refused``), so a scheduler
    drops them and plans the others; every refusal kept the allocation in force, and the
    jobs submitted after got no time."""
    price, rate, steps = 3.6, 2.0, 1000.0            # each job costs 0.5 $ at the least
    jobs = [Job(str(i), {"v100": rate}, remaining_steps=steps, elapsed_s=elapsed)
            for i, elapsed in enumerate((300.0, 200.0, 0.0, 100.0))]   # "2" came last
    problem = Problem(cluster={"v100": 2}, jobs=jobs, prices={"v100": price})
    policy = get_policy("min_makespan_with_budget", budget=1.9)      # 3.8 jobs' worth
    with pytest.raises(Infeasible, match="within budget; refusing the new jobs that do not "
                                         "fit, in order of arrival: 2$") as err:
        policy.solve(problem)
    assert err.value.refused() == ("2",)
    planned = {"0": {"v100": 0.5}, "1": {"v100": 0.5}}
    with pytest.raises(Infeasible) as err:          # of the new ones, "2" is still newest
        policy.solve(dataclasses.replace(problem, previous=planned))
    assert err.value.refused() == ("2",)
    everyone = {**planned, "2": {"v100": 0.5}, "3": {"v100": 0.5}}
    with pytest.raises(Infeasible) as err:          # none new: no job to refuse
        policy.solve(dataclasses.replace(problem, previous=everyone))
    assert err.value.refused() == () and str(err.value).endswith("within budget")
    with pytest.raises(Infeasible) as err:          # 1.2 $ finishes two: the two newest go
        get_policy("min_makespan_with_budget", budget=1.2).solve(problem)
    assert err.value.refused() == ("3", "2")
    three = problem.with_jobs([j for j in jobs if j.id != "2"])
    assert policy.solve(three).objective > 0                         # without it: planned
