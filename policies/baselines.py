"""Heterogeneity-agnostic baselines from the related work (thesis §5.4.1, §5.7.3, §5.8).

- ``isolated``: every job gets 1/n of each type (X^isolated) [74].
- ``gandiva``: Gandiva's ad-hoc space sharing [172]: when the cluster is oversubscribed,
  jobs are paired at random (pairs that help are kept between recomputations), and every
  combination gets an equal share of time.
- ``allox``: AlloX [106]: single-GPU jobs matched to (GPU, position in its queue) by a
  min-cost bipartite matching that minimises the total completion time; the job at the head
  of each GPU's queue runs.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Mapping

import numpy as np

from .base import Policy, Solution
from .columns import Columns, build_columns, equal_split
from .errors import ProblemError
from .jobs import Pair
from .problem import Allocation, Problem
from .queue_levels import Levels, level_count, match_levels
from .state import generator_state, seeded_generator
from .traits import Traits


def _whole_rows(cols: Columns, choice: dict[str, np.ndarray]) -> dict:
    """Allocation rows from per-key type vectors."""
    rows = {job_id: dict.fromkeys(cols.types, 0.0) for job_id in cols.job_ids}
    for key, vector in choice.items():
        rows[key] = {t: float(v) for t, v in zip(cols.types, vector)}
    return rows


class Isolated(Policy):
    """X^isolated: 1/n of every type for each of n jobs; agnostic (Gavel serves its type
    queues in a shuffled order)."""

    TRAITS = Traits(agnostic=True)

    def _solve(self, problem: Problem) -> Solution:
        cols = build_columns(problem)
        usable = np.where(cols.T > 0, cols.isolated_share, 0.0)  # the rest is lost to it
        return Solution(_whole_rows(cols, dict(zip(cols.job_ids, usable))), None, None)

    def evaluate(self, problem: Problem, allocation: Allocation) -> float | None:
        return None


class Gandiva(Policy):
    """Gandiva's ad-hoc space sharing [172], as Gavel's ``GandivaPolicy`` runs it (§5.7.3).

    While the jobs fit in the cluster each one is a combination of its own. Otherwise the
    jobs not in a pair are paired at random: up to as many draws as there are such jobs,
    each draw two of them, kept when their scale factors agree (whether or not they can
    share a worker: a pair that cannot gets time it cannot use, as in Gavel). A pair stays
    until one of its jobs leaves or its normalised packed throughput, summed over the
    types, falls below 1 (0 if it cannot share on some type). Every combination gets
    workers / (number of combinations) of each type on its scale factor, scaled down to 1
    per combination; time on a type a combination cannot run on is dropped. The generator
    and the pairs carry over between solves in ``policy_state``, so a run with Gavel's seed
    makes Gavel's draws. Gandiva is heterogeneity-agnostic, but Gavel serves its type
    queues in the fixed order (its class, ``Gandiva_Packing``, counts as packing)."""

    TRAITS = Traits(agnostic=True, shuffle_type_order=False, needs_pairs=True,
                    carries_state=True, reads=frozenset({"pairs", "policy_state"}),
                    options={"seed": "seeds the random pairing (carried in policy_state)"})

    def __init__(self, name=None, *, seed: int = 0, **kwargs) -> None:
        super().__init__(name, **kwargs)
        self.seed = seed

    def check_state(self, state: Mapping) -> None:
        seeded_generator(self.seed, state)
        _saved_pairs(state)

    def renamed_state(self, state: Mapping, names: Mapping[str, str]) -> Mapping:
        return {**state, "pairs": [[names[a], names[b]] for a, b in _saved_pairs(state)
                                   if a in names and b in names]}

    def _solve(self, problem: Problem) -> Solution:
        cols = build_columns(problem)
        rng = seeded_generator(self.seed, problem.policy_state)
        by_jobs = {p.jobs: p for p in problem.pairs}
        present = set(cols.job_ids)
        pairs = [p for p in _saved_pairs(problem.policy_state)
                 if set(p) <= present and _packed_gain(problem, _pair_of(by_jobs, p)) >= 1]
        sf = dict(zip(cols.job_ids, cols.scale_factor.tolist()))
        if sum(sf.values()) <= cols.workers.sum():
            combos = [(job_id,) for job_id in cols.job_ids]
        else:
            paired = {job_id for pair in pairs for job_id in pair}
            pool = [job_id for job_id in cols.job_ids if job_id not in paired]
            for _ in range(len(pool)):  # Gandiva's bounded random exploration
                if len(pool) < 2:
                    break
                a, b = rng.sample(pool, 2)
                if sf[a] != sf[b]:
                    continue
                pool.remove(a)
                pool.remove(b)
                pairs.append((a, b))
            combos = pairs + [(job_id,) for job_id in pool]
        state = {"rng": generator_state(rng), "pairs": [list(pair) for pair in pairs]}
        return Solution(self._equal_time(cols, combos, by_jobs), None, None, state)

    @staticmethod
    def _equal_time(cols: Columns, combos: list[tuple], by_jobs: dict) -> dict:
        index = {job_id: i for i, job_id in enumerate(cols.job_ids)}
        shares = {}
        split = equal_split(cols.workers, [cols.scale_factor[index[c[0]]] for c in combos],
                            len(combos))
        for combo, x in zip(combos, split):
            if len(combo) == 1:
                shares[combo[0]] = np.where(cols.T[index[combo[0]]] > 0, x, 0.0)
            elif (pair := _pair_of(by_jobs, combo)) is not None:
                runs = [min(pair.throughputs.get(t, (0.0, 0.0))) > 0 for t in cols.types]
                shares[pair.key] = np.where(runs, x, 0.0)
        return _whole_rows(cols, shares)

    def evaluate(self, problem: Problem, allocation: Allocation) -> float | None:
        return None


def _pair_of(by_jobs: Mapping[tuple[str, str], Pair], jobs) -> Pair | None:
    """The problem's pair of the two ``jobs``, in either order (None: not listed)."""
    a, b = jobs
    return by_jobs.get((a, b)) or by_jobs.get((b, a))


def _saved_pairs(policy_state) -> list[tuple[str, str]]:
    saved = policy_state.get("pairs", ())
    if not isinstance(saved, (list, tuple)) or not all(
            isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(j, str) for j in p)
            for p in saved):
        raise ProblemError("policy_state.pairs: expected a list of [job id, job id] pairs")
    return [tuple(p) for p in saved]


def _packed_gain(problem: Problem, pair) -> float:
    """Gavel's test of a pair: its normalised packed throughputs summed over every type,
    0 if it cannot share on some type."""
    if pair is None:
        return 0.0
    jobs = [problem.job(job_id) for job_id in pair.jobs]
    total = 0.0
    for t in problem.worker_types:
        packed = pair.throughputs.get(t, (0.0, 0.0))
        for job, rate in zip(jobs, packed):
            alone = job.throughputs.get(t, 0.0)
            if rate <= 0 or alone <= 0:
                return 0.0
            total += rate / alone
    return total


# AlloX's matching keeps a move cost per pair of queue levels, and each job's path runs
# over them (``queue_levels.py``): 987 levels (7,000 jobs on 64 GPUs) match in 11 s, 222
# (50,000 jobs on 2,048 GPUs) in 29 s (BENCHMARKS.md, "Every policy at production size").
# More levels (many jobs per GPU) are refused before the matching is made.
MAX_LEVELS = 1_024


class AlloX(Policy):
    """AlloX [106] as Gavel runs it (its ``AlloXPolicy``, the baseline of thesis §5.7.3):
    a job given a whole GPU keeps it until it finishes; the other jobs, the ``alpha`` share
    of them that waited longest (and at least as many as GPUs are free), are matched to
    (free GPU, queue position) by the min-cost matching that minimises their total
    completion time, solved exactly over queue levels (``queue_levels.py``); the job at
    the head of each free GPU's queue starts."""

    TRAITS = Traits(single_gpu=True,
                    reads=frozenset({"remaining_steps", "elapsed_s", "previous"}),
                    options={"alpha": "the share of waiting jobs matched, those waiting "
                                      "longest (at least one per free GPU); 1: every one"})

    def __init__(self, name=None, *, alpha: float = 1.0, **kwargs) -> None:
        super().__init__(name, **kwargs)
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not (
                0.0 < alpha <= 1.0):
            raise ProblemError(f"{self.name}: alpha must be in (0, 1], got {alpha!r}")
        self.alpha = alpha

    def _solve(self, problem: Problem) -> Solution:
        cols = build_columns(problem)
        for job_id, sf in zip(cols.job_ids, cols.scale_factor):
            if sf != 1:
                raise ProblemError(f"job {job_id!r}: allox schedules single-GPU jobs only, "
                                   f"got scale_factor {int(sf)}", job_id=job_id)
        choice, free = _kept(problem, cols)
        waiting = [i for i in np.flatnonzero(cols.runnable).tolist()
                   if cols.job_ids[i] not in choice]
        waiting.sort(key=lambda i: -cols.elapsed[i])      # longest waiting first (stable)
        rows = np.array(waiting[:max(int(self.alpha * len(waiting)), int(free.sum()))],
                        dtype=int)
        levels = level_count(rows.size, free)
        if levels > MAX_LEVELS:
            fits = bisect_right(range(rows.size + 1), MAX_LEVELS,   # (the count grows with m)
                                key=lambda m: level_count(m, free)) - 1
            raise ProblemError(
                f"{self.name}: {rows.size:,} jobs on {int(free.sum()):,} free GPUs make "
                f"{levels:,} queue levels to match, above {MAX_LEVELS:,} (too many jobs per "
                f"GPU); match the {fits:,} waiting longest with the option "
                f"alpha={max(math.floor(1000 * fits / len(waiting)) / 1000, 0.001)}, or use "
                f"a policy without queue positions, such as shortest_job_first_perf")
        with np.errstate(divide="ignore"):
            times = np.where(cols.T[rows] > 0, np.maximum(cols.remaining[rows], 1.0)[:, None]
                             / cols.T[rows], np.inf)
        for i, t in _heads(match_levels(times, free), times):
            choice[cols.job_ids[rows[i]]] = np.eye(len(cols.types))[t]
        return Solution(_whole_rows(cols, choice), None, None)

    def evaluate(self, problem: Problem, allocation: Allocation) -> float | None:
        return None


def _kept(problem: Problem, cols: Columns) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The jobs the last allocation gave a whole GPU, each with its type vector, while
    their type has one (in the allocation's order), and the GPUs of each type left free."""
    index = {job_id: i for i, job_id in enumerate(cols.job_ids)}
    free = np.asarray(cols.workers, dtype=int).copy()
    kept = {}
    for key, row in problem.previous.items():
        if key not in index:
            continue                      # finished
        shares = np.array([row.get(t, 0.0) for t in cols.types])
        whole = np.flatnonzero(shares == 1.0)
        if shares.sum() == 1.0 and whole.size:
            t = int(whole[0])
            if free[t] > 0 and cols.T[index[key], t] > 0:
                free[t] -= 1
                kept[key] = np.eye(len(cols.types))[t]
    return kept, free


def _heads(matched: Levels, times: np.ndarray) -> list[tuple[int, int]]:
    """(job, type) of each queue's head: a type's k-th level fills its first m_k GPUs'
    queues, so m_k less the most any deeper level holds of its jobs are heads, and the
    shortest of them on that type are (those with the same depth cost alike)."""
    heads = []
    for t in np.unique(matched.type_of):
        deeper = 0
        for level in sorted(np.flatnonzero(matched.type_of == t),
                            key=lambda g: -matched.depth[g]):
            members = np.flatnonzero(matched.level_of == level)
            count = members.size - deeper
            if count > 0:
                shortest = members[np.argsort(times[members, t], kind="stable")[:count]]
                heads += [(int(i), int(t)) for i in shortest]
            deeper = max(deeper, members.size)
    return heads
