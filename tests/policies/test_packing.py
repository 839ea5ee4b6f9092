"""Choosing the pairs a space-sharing problem lists (policies.packing)."""

from __future__ import annotations

import numpy as np

from policies import Job, Problem, get_policy
from policies.packing import pair_gain, select_pairs


def kinds_problem(n: int, seed: int = 0):
    """n jobs of 6 kinds; pairs of kinds gain differently (some not at all)."""
    rng = np.random.default_rng(seed)
    solo = {k: {"v100": 10.0 + k, "k80": 2.0 + k / 2} for k in range(6)}
    gain = rng.uniform(0.6, 0.9, size=(6, 6))
    kinds = [int(k) for k in rng.integers(6, size=n)]
    jobs = [Job(str(i), solo[k], scale_factor=1 if k < 5 else 2) for i, k in enumerate(kinds)]

    def together(a, b):
        if a == 5 or b == 5:
            return None if a != b else {t: (v * 0.6, v * 0.6) for t, v in solo[a].items()}
        return {t: (solo[a][t] * gain[a, b], solo[b][t] * gain[b, a]) for t in solo[a]}
    return jobs, kinds, together


def test_pairs_beat_time_slicing_share_a_scale_factor_and_stay_few():
    jobs, kinds, together = kinds_problem(120)
    pairs = select_pairs(jobs, kinds, together, max_partners=4)
    by_id = {j.id: (j, k) for j, k in zip(jobs, kinds)}
    assert 0 < len(pairs) <= 4 * len(jobs)
    for pair in pairs:
        (a, _ka), (b, _kb) = by_id[pair.jobs[0]], by_id[pair.jobs[1]]
        assert a.scale_factor == b.scale_factor and a.id != b.id
        assert pair_gain(a.throughputs, b.throughputs, pair.throughputs) > 1.0
    assert pairs == select_pairs(jobs, kinds, together, max_partners=4)  # deterministic


def test_partners_span_kinds():
    jobs, kinds, together = kinds_problem(120)
    pairs = select_pairs(jobs, kinds, together, max_partners=4)
    kind = dict(zip((j.id for j in jobs), kinds))
    partner_kinds = {}
    for a, b in (p.jobs for p in pairs):
        partner_kinds.setdefault(a, set()).add(kind[b])
        partner_kinds.setdefault(b, set()).add(kind[a])
    assert np.mean([len(v) for v in partner_kinds.values()]) >= 3


def test_few_partners_come_close_to_all_pairs():
    jobs, kinds, together = kinds_problem(60, seed=1)
    cluster = {"v100": 10, "k80": 10}
    few = Problem(cluster, jobs, pairs=select_pairs(jobs, kinds, together, max_partners=8))
    every = Problem(cluster, jobs, pairs=select_pairs(jobs, kinds, together, max_partners=60))
    assert len(every.pairs) > 2 * len(few.pairs)
    policy = get_policy("max_min_fairness_packed")
    assert policy.solve(few).objective >= 0.98 * policy.solve(every).objective
