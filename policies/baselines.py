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
import random

import numpy as np
from scipy.optimize import linear_sum_assignment

from .base import Policy, Solution
from .columns import Columns, build_columns
from .errors import ProblemError
from .problem import PAIR_SEPARATOR, Allocation, Problem, pair_key


def _whole_rows(cols: Columns, choice: dict[str, np.ndarray]) -> dict:
    """Allocation rows from per-key type vectors."""
    rows = {job_id: dict.fromkeys(cols.types, 0.0) for job_id in cols.job_ids}
    for key, vector in choice.items():
        rows[key] = {t: float(v) for t, v in zip(cols.types, vector)}
    return rows


class Isolated(Policy):
    def _solve(self, problem: Problem) -> Solution:
        cols = build_columns(problem)
        usable = np.where(cols.T > 0, cols.isolated_share, 0.0)  # the rest is lost to it
        return Solution(_whole_rows(cols, dict(zip(cols.job_ids, usable))), None, None)

    def evaluate(self, problem: Problem, allocation: Allocation) -> float | None:
        return None


class Gandiva(Policy):
    """Random pairing with equal time per combination (see the module docstring)."""

    def __init__(self, name=None, *, seed: int = 0, **kwargs) -> None:
        super().__init__(name, **kwargs)
        self.seed = seed

    def _solve(self, problem: Problem) -> Solution:
        cols = build_columns(problem, pairs=True)
        demand = cols.scale_factor[cols.runnable].sum()
        singles = [job_id for job_id, ok in zip(cols.job_ids, cols.runnable) if ok]
        if demand <= cols.workers.sum():
            combos = [(job_id,) for job_id in singles]
        else:
            combos = self._pair_up(problem, cols, singles)
        return Solution(self._equal_time(cols, combos), None, None)

    def _pair_up(self, problem: Problem, cols: Columns, singles: list[str]) -> list[tuple]:
        helpful = {cols.keys[c] for c in range(cols.num_columns) if PAIR_SEPARATOR in cols.keys[c]}
        kept = [tuple(k.split(PAIR_SEPARATOR)) for k, row in problem.previous.items()
                if k in helpful and sum(row.values()) > 0]
        paired = {job for pair in kept for job in pair}
        pool = [job for job in singles if job not in paired]
        rng = random.Random(f"{self.seed}/{','.join(pool)}")
        sf = dict(zip(cols.job_ids, cols.scale_factor))
        combos: list[tuple] = list(kept)
        for _ in range(len(pool)):  # Gandiva's bounded random exploration
            if len(pool) < 2:
                break
            a, b = rng.sample(pool, 2)
            key = pair_key(a, b) if pair_key(a, b) in helpful else pair_key(b, a)
            if sf[a] != sf[b] or key not in helpful:
                continue
            pool.remove(a)
            pool.remove(b)
            combos.append(tuple(key.split(PAIR_SEPARATOR)))
        return combos + [(job,) for job in pool]

    @staticmethod
    def _equal_time(cols: Columns, combos: list[tuple]) -> dict:
        """Every combination gets workers/len(combos) of each type (on its scale factor)."""
        sf = dict(zip(cols.job_ids, cols.scale_factor))
        runs = {(k, t) for k, t in zip(cols.keys, cols.col_type)}
        shares = {}
        for combo in combos:
            key = pair_key(*combo) if len(combo) == 2 else combo[0]
            mask = np.array([(key, j) in runs for j in range(len(cols.types))])
            shares[key] = np.where(mask, cols.workers / len(combos) / sf[combo[0]], 0.0)
        if shares:
            biggest = max(v.sum() for v in shares.values())
            shares = {k: v / max(biggest, 1.0) for k, v in shares.items()}
        return _whole_rows(cols, shares)

    def evaluate(self, problem: Problem, allocation: Allocation) -> float | None:
        return None


class AlloX(Policy):
    """Min-cost matching of single-GPU jobs to (GPU, queue position), AlloX [106]."""

    def _solve(self, problem: Problem) -> Solution:
        cols = build_columns(problem)
        for job_id, sf in zip(cols.job_ids, cols.scale_factor):
            if sf != 1:
                raise ProblemError(f"job {job_id!r}: allox schedules single-GPU jobs only, "
                                   f"got scale_factor {int(sf)}")
        rows = np.nonzero(cols.runnable)[0]
        gpus = [j for j, count in enumerate(cols.workers) for _ in range(int(count))]
        if rows.size == 0 or not gpus:
            return Solution(_whole_rows(cols, {}), None, None)
        positions = min(rows.size, 2 * math.ceil(rows.size / len(gpus)) + 1)
        with np.errstate(divide="ignore"):
            time = np.where(cols.T[rows] > 0, np.maximum(cols.remaining[rows], 1.0)[:, None]
                            / cols.T[rows], np.inf)
        # cost[job, (gpu, k)] = k * processing time: the job delays itself and k-1 others.
        per_gpu = time[:, gpus]
        cost = np.concatenate([k * per_gpu for k in range(1, positions + 1)], axis=1)
        cost = np.where(np.isfinite(cost), cost, 1e18)
        job_idx, slot = linear_sum_assignment(cost)
        gpu_of, position = slot % len(gpus), slot // len(gpus) + 1
        head: dict[int, tuple[int, int]] = {}  # gpu -> (position, job row); largest runs first
        for r, g, k in zip(job_idx, gpu_of, position):
            if cost[r, (k - 1) * len(gpus) + g] < 1e18 and k > head.get(g, (0, -1))[0]:
                head[g] = (k, rows[r])
        choice = {}
        for g, (_, i) in head.items():
            vector = np.zeros(len(cols.types))
            vector[gpus[g]] = 1.0
            choice[cols.job_ids[i]] = vector
        return Solution(_whole_rows(cols, choice), None, None)

    def evaluate(self, problem: Problem, allocation: Allocation) -> float | None:
        return None
