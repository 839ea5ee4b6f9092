"""Shared builders for policy tests: hypothesis strategies and an allocation checker."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from policies import Allocation, Job, Pair, Problem

TYPES = ("v100", "p100", "k80")

# Table 6.1 of the thesis: throughput speedups over a K80 (P100, V100).
TABLE_6_1 = {
    "Transformer": (3.3, 3.3), "A3C": (1.2, 2.2), "CycleGAN": (4.5, 9.3),
    "ResNet-18": (4.0, 6.8), "ResNet-50": (3.7, 9.6),
}


def table_6_1_throughputs(model: str) -> dict[str, float]:
    p100, v100 = TABLE_6_1[model]
    return {"v100": v100, "p100": p100, "k80": 1.0}


@st.composite
def problems(draw, *, types=TYPES, max_jobs=8, multi_gpu=True, weights=True, pairs=False,
             allow_zero=True, remaining=True):
    """Random small problems: throughputs, scale factors, weights, optional pairs.

    Throughputs lie on a grid of 0.25 steps/s: two types within 1e-5 of each other make an
    allocation ill-conditioned (a job gives up time on one type for a 1e-5 loss), which
    turns solver tolerances into visible differences without testing anything real."""
    n_types = len(types)
    cluster = {t: draw(st.integers(1, 6)) for t in types}
    m = draw(st.integers(1, max_jobs))
    jobs = []
    for i in range(m):
        thr = {}
        for t in types:
            zero = allow_zero and draw(st.integers(0, 9)) == 0
            thr[t] = 0.0 if zero else draw(st.integers(2, 400)) / 4
        if all(v == 0 for v in thr.values()):
            thr[types[0]] = 1.0
        sf = draw(st.sampled_from([1, 1, 1, 2, 4])) if multi_gpu else 1
        jobs.append(Job(
            id=str(i), throughputs=thr, scale_factor=sf,
            weight=draw(st.sampled_from([1.0, 1.0, 2.0, 5.0])) if weights else 1.0,
            remaining_steps=draw(st.floats(10.0, 1e5)) if remaining else 1000.0,
            elapsed_s=draw(st.floats(0.0, 1e4)),
        ))
    pair_list = []
    if pairs and m >= 2:
        for a in range(m):
            for b in range(a + 1, m):
                if jobs[a].scale_factor != jobs[b].scale_factor or draw(st.booleans()):
                    continue
                pt = {}
                for t in types:
                    fa, fb = draw(st.floats(0.2, 0.95)), draw(st.floats(0.2, 0.95))
                    pt[t] = (jobs[a].throughputs[t] * fa, jobs[b].throughputs[t] * fb)
                pair_list.append(Pair((str(a), str(b)), pt))
    del n_types
    return Problem(cluster=cluster, jobs=tuple(jobs), pairs=tuple(pair_list),
                   prices={"v100": 2.48, "p100": 1.46, "k80": 0.45} if set(types) == set(TYPES) else {})


def assert_valid(problem: Problem, allocation: Allocation, tol: float = 1e-6) -> None:
    """Constraints (5.1)-(5.3): entries in [0, 1], no job over 1, no type oversubscribed,
    nothing on a type a job cannot run on."""
    sf = {job.id: job.scale_factor for job in problem.jobs}
    used = dict.fromkeys(problem.cluster, 0.0)
    for key, row in allocation.allocation.items():
        members = key.split("+")
        for t, x in row.items():
            assert -tol <= x <= 1 + tol, (key, t, x)
            used[t] += x * sf[members[0]]
            if x > tol and len(members) == 1:
                assert problem.job(key).runs_on(t), f"job {key} got time on {t}"
    for t, u in used.items():
        assert u <= problem.cluster[t] * (1 + tol) + tol, f"type {t} oversubscribed: {u}"
    for job in problem.jobs:
        assert allocation.job_time(job.id) <= 1 + tol, (job.id, allocation.job_time(job.id))


def effective_throughput(problem: Problem, allocation: Allocation) -> dict[str, float]:
    """throughput(m, X) of §5.3.1, from singles and pairs."""
    out = dict.fromkeys(problem.job_ids, 0.0)
    pairs = {p.key: p for p in problem.pairs}
    for key, row in allocation.allocation.items():
        if key in pairs:
            a, b = pairs[key].jobs
            for t, x in row.items():
                ta, tb = pairs[key].throughputs.get(t, (0.0, 0.0))
                out[a] += x * ta
                out[b] += x * tb
        else:
            job = problem.job(key)
            out[key] += sum(x * job.throughputs.get(t, 0.0) for t, x in row.items())
    return out


def as_matrix(problem: Problem, allocation: Allocation) -> np.ndarray:
    return np.array([[allocation.share(j.id, t) for t in problem.worker_types]
                     for j in problem.jobs])
