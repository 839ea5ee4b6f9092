"""Which co-located pairs the core lists for a space-sharing policy (thesis §5.3.1): every
pair by default (Gavel's, n²/2), or with ``CoreConfig.pair_partners`` K each job's K best
partners ("in practice we only need to consider combinations that actually perform well")
and every pair an allocation gave time: what keeps a ``_packed`` policy usable at
production size (200 jobs waiting took 23 s of simulation with every pair, 4 s with 8)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from gavelsched.core import CoreConfig, SchedulerCore
from gavelsched.core import problem as core_problem
from gavelsched.core.driver import spec_of
from gavelsched.core.jobs import JobState, by_type
from gavelsched.core.lookups import Lookups
from gavelsched.core.problem import chosen_partners, problem_pairs
from gavelsched.core.records import JobSpec
from gavelsched.core.rows import Rows
from gavelsched.mechanism import ClusterView
from policies import get_policy
from traces import default_table
from traces.generator import generate_trace

TYPES = ("v100", "p100", "k80")


def catalog_jobs(n: int, seed: int = 0) -> list[JobSpec]:
    """``n`` jobs of the catalog's (job type, scale factor) kinds on one or two GPUs."""
    rng = np.random.default_rng(seed)
    kinds = sorted(key for key in default_table().solo["v100"] if key[1] <= 2)
    return [JobSpec(id=str(i), job_type=kinds[k][0], scale_factor=kinds[k][1],
                    total_steps=10**6)
            for i, k in enumerate(rng.integers(len(kinds), size=n).tolist())]


def first_problem(specs: list[JobSpec], partners: int, policy: str = "max_min_fairness_packed",
                  gpus: int = 4):
    """The problem a core running ``policy`` with ``pair_partners`` solves first (its
    solve must not fail), with these jobs waiting on ``gpus`` of each type."""
    return first_round(specs, partners, policy, gpus)[0]


def first_round(specs: list[JobSpec], partners: int, policy: str, gpus: int):
    """``first_problem``, and the round the core planned from its solve."""
    policy = get_policy(policy)
    seen = []
    solve = policy.solve
    policy.solve = lambda problem: (seen.append(problem), solve(problem))[1]
    config = CoreConfig.for_policy(policy, pair_partners=partners, on_solve_error="raise")
    core = SchedulerCore(policy, ClusterView.build({t: gpus for t in TYPES}), default_table(),
                         config)
    for spec in specs:
        core.submit(spec, 0.0)
    rnd = core.start_round(0.0)
    return seen[0], rnd


def gain(problem, pair) -> float:
    """The pair's best normalised throughput over the types (above 1: beats time slicing)."""
    a, b = (problem.job(job_id) for job_id in pair.jobs)
    return max(ta / a.throughputs[t] + tb / b.throughputs[t]
               for t, (ta, tb) in pair.throughputs.items())


def test_every_pair_by_default_as_gavel():
    specs = catalog_jobs(40)
    problem = first_problem(specs, partners=0)
    lookups = Lookups(default_table(), None, TYPES)
    can_share = [(a.id, b.id) for i, a in enumerate(specs) for b in specs[i + 1:]
                 if a.scale_factor == b.scale_factor
                 and lookups.pair(a.key, b.key) is not None]
    assert [p.jobs for p in problem.pairs] == can_share     # all, in admission order


def test_partners_list_each_jobs_best_few_in_admission_order():
    specs = catalog_jobs(120)
    every = first_problem(specs, partners=0)
    few = first_problem(specs, partners=4)
    listed = [p.jobs for p in few.pairs]
    assert len(listed) == len(set(listed)) <= 4 * len(specs) < len(every.pairs) / 2
    assert listed == sorted(listed, key=lambda ab: (int(ab[0]), int(ab[1])))
    scale = {s.id: s.scale_factor for s in specs}
    for pair in few.pairs:
        assert scale[pair.jobs[0]] == scale[pair.jobs[1]]
        assert gain(few, pair) > 1.0                 # only pairs that beat time slicing
    # the rates each listed pair is planned on are those of the same pair among all pairs
    rates = {p.jobs: p.throughputs for p in every.pairs}
    assert all(p.throughputs == rates[p.jobs] for p in few.pairs)
    # every job that gains with someone has partners, and most have their four
    helpful = {j for p in every.pairs if gain(every, p) > 1.0 for j in p.jobs}
    degree = Counter(j for p in few.pairs for j in p.jobs)
    assert set(degree) == helpful
    assert np.median([degree[j] for j in helpful]) >= 4


def test_partners_give_nearly_the_objective_of_every_pair():
    specs = catalog_jobs(60, seed=1)
    policy = get_policy("max_min_fairness_packed")
    every = policy.solve(first_problem(specs, partners=0)).objective
    few = policy.solve(first_problem(specs, partners=8)).objective
    assert few >= 0.98 * every


def test_a_pair_with_a_row_stays_listed_whoever_its_best_partners_are():
    """A pair an allocation gave time has a row, whose received time goes on counting: it is
    listed even when neither member would choose the other now."""
    table = default_table()
    lookups = Lookups(table, None, TYPES)
    specs = catalog_jobs(30, seed=2)
    states = {s.id: JobState(s, 0.0, i, lookups.solo(s.key).copy(),
                             by_type(TYPES, lookups.solo(s.key)))
              for i, s in enumerate(specs)}
    keyed = [(job_id, job, job.spec.key) for job_id, job in states.items()]

    def listed(rows: Rows) -> list[tuple[str, str]]:
        later = chosen_partners(keyed, rows, lookups, 1)
        return [(a, b[0]) for (a, _, _), after in zip(keyed, later) for b in after]
    chosen = set(listed(Rows(len(TYPES))))
    outside = next((a.id, b.id) for i, a in enumerate(specs) for b in specs[i + 1:]
                   if a.scale_factor == b.scale_factor and (a.id, b.id) not in chosen
                   and lookups.pair(a.key, b.key) is not None)     # (a pair that can share)
    rows = Rows(len(TYPES))
    rows.add_many([(s.id, (s.id,), s.scale_factor, lookups.solo(s.key)) for s in specs], 0.0)
    rows.add_many([("+".join(outside), outside, 1, np.zeros((3, 2)))], 0.0)
    kept = listed(rows)
    assert set(kept) == chosen | {outside}
    assert kept == sorted(kept, key=lambda ab: (int(ab[0]), int(ab[1])))
    pairs = problem_pairs(states, rows, TYPES, lookups, partners=1)
    assert outside in {p.jobs for p in pairs}          # and the policy is offered it


def test_finish_time_fairness_with_16_partners_plans_2000_waiting_jobs():
    """Production size for the cone program: 2,000 jobs with 16 partners each on 2,040
    GPUs. Each job's throughput written into its cone tied partners' cones together, and
    Clarabel ended in a numerical error after 42 s (so the cluster stayed idle); with each
    job's rate a variable of its own (policies/finish_time.py, ``own_rates``) it solves."""
    jobs = [spec_of(str(i), job) for i, job in enumerate(
        generate_trace(2000, 1e6, table=default_table(), seed=0, multi_gpu=True))]
    problem, rnd = first_round(jobs, 16, "finish_time_fairness_packed", gpus=680)
    assert len(problem.jobs) == 2000 and len(problem.pairs) > 10_000
    assert rnd.resolved is not None and rnd.resolved.objective is not None
    assert len(rnd.batch.keys) > 500          # the round runs jobs on the cluster's GPUs


def test_a_partner_count_below_zero_is_refused():
    with pytest.raises(ValueError, match="pair_partners must be an int >= 0, got -1"):
        CoreConfig(pair_partners=-1)


def test_each_job_chooses_fewer_partners_when_all_would_make_too_many(monkeypatch):
    """Beyond ``PARTNER_CHOICES`` choices in all, each job chooses fewer partners (one at
    least): 20,000 jobs with 16 each took a plan of over ten minutes."""
    specs = catalog_jobs(120)
    four = {p.jobs for p in first_problem(specs, partners=4).pairs}
    monkeypatch.setattr(core_problem, "PARTNER_CHOICES", 2 * len(specs))      # two each
    two = {p.jobs for p in first_problem(specs, partners=4).pairs}
    monkeypatch.setattr(core_problem, "PARTNER_CHOICES", 0)                   # one each, at least
    one = {p.jobs for p in first_problem(specs, partners=4).pairs}
    assert 0 < len(one) < len(two) < len(four)
    assert len(one) <= len(specs) and len(two) <= 2 * len(specs)
