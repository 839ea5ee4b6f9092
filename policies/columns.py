"""The allocation as a vector of *columns*, and the sparse matrices every policy shares.

A column is one (combination, worker type) entry of Gavel's allocation matrix X (thesis
§5.3.1): a single job, or a co-located pair (Space Sharing), on one type. Only entries that
can be non-zero get a column: a job never gets a column on a type it cannot run on, and a
pair only where it beats time slicing. Every policy is then a vectorised cvxpy program over
``z`` (one variable per column) with these constant matrices:

- ``member`` (jobs x columns): 1 where the job belongs to the column's combination.
  ``member @ z <= 1`` is constraint (5.2): a job's time fractions sum to at most one.
- ``usage`` (types x columns): workers a column occupies. ``usage @ z <= workers`` is (5.3).
- ``throughput`` (jobs x columns): steps/s the job makes in the column, so
  ``throughput @ z`` is throughput(m, X), the effective throughput of §5.3.1.
- ``price`` (columns): dollars per hour the column costs (chapter 6, cost(m, X)).

This replaces Gavel's ``flatten()`` side channel (STYLE.md, Hidden state) with plain data.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from .errors import ProblemError
from .problem import Problem, pair_key

# An allocation entry below this is reported as zero: solver noise, not a decision.
ZERO = 1e-7


@dataclass(frozen=True)
class Columns:
    """The column model of one problem (see the module docstring)."""

    job_ids: tuple[str, ...]
    types: tuple[str, ...]
    T: np.ndarray              # (m, n) single-job steps/s, 0 where the job cannot run
    scale_factor: np.ndarray   # (m,)
    weight: np.ndarray         # (m,)
    remaining: np.ndarray      # (m,) steps left
    elapsed: np.ndarray        # (m,) seconds since the job arrived
    isolated_elapsed: np.ndarray  # (m,) Themis t^isolated
    workers: np.ndarray        # (n,)
    prices: np.ndarray         # (n,) $/hour per worker, 0 when unpriced
    keys: tuple[str, ...]      # (c,) combination key of each column: job id or "a+b"
    col_type: np.ndarray       # (c,) worker-type index of each column
    member: sp.csr_matrix      # (m, c)
    throughput: sp.csr_matrix  # (m, c)
    usage: sp.csr_matrix       # (n, c)

    @property
    def num_jobs(self) -> int:
        return len(self.job_ids)

    @property
    def num_columns(self) -> int:
        return len(self.keys)

    @cached_property
    def price(self) -> np.ndarray:
        """$/hour each column costs: the price of its type times the workers it holds."""
        return np.asarray(self.usage.T @ self.prices).ravel()

    @cached_property
    def runnable(self) -> np.ndarray:
        """(m,) True for jobs that can run on at least one type."""
        return self.T.max(axis=1) > 0

    @cached_property
    def equal_share(self) -> np.ndarray:
        """X^equal (thesis §5.4.1): every job the same share of each type, no row above 1."""
        total = self.workers.sum()
        return self.workers / max(self.num_jobs, total, 1e-12)

    @cached_property
    def equal_throughput(self) -> np.ndarray:
        """throughput(m, X^equal): the normaliser of max-min fairness (§5.4.1)."""
        return self.T @ self.equal_share

    @cached_property
    def isolated_share(self) -> np.ndarray:
        """X^isolated (§5.4.1, §5.4.2): 1/n of every type's workers for each of the n jobs,
        as a time fraction on the job's ``scale_factor`` workers. When that asks more than
        full time of some job, every share shrinks by the same factor, as in Gavel."""
        x = np.outer(1.0 / self.scale_factor, self.workers) / max(self.num_jobs, 1)
        x = np.where(self.T > 0, x, 0.0)
        return x / max(x.sum(axis=1).max(initial=0.0), 1.0)

    @cached_property
    def isolated_throughput(self) -> np.ndarray:
        return (self.T * self.isolated_share).sum(axis=1)

    @cached_property
    def fastest_throughput(self) -> np.ndarray:
        """throughput(m, X^fastest): the job alone on its fastest type (FIFO, §5.4.2)."""
        return self.T.max(axis=1)

    def effective_throughput(self, z: np.ndarray) -> np.ndarray:
        return np.asarray(self.throughput @ z).ravel()

    def z_from(self, allocation) -> np.ndarray:
        """The column vector of an ``Allocation`` (entries without a column are dropped)."""
        return np.array([allocation.share(key, self.types[j])
                         for key, j in zip(self.keys, self.col_type)])

    def to_rows(self, z: np.ndarray) -> dict[str, dict[str, float]]:
        """Allocation rows: every job with every type, plus the pairs that got time."""
        z = np.where(z > ZERO, np.minimum(z, 1.0), 0.0)
        rows = {job_id: dict.fromkeys(self.types, 0.0) for job_id in self.job_ids}
        for key, j, value in zip(self.keys, self.col_type.tolist(), z.tolist()):
            if value == 0.0 and key not in rows:
                continue
            rows.setdefault(key, dict.fromkeys(self.types, 0.0))[self.types[j]] = value
        return rows


def build_columns(problem: Problem, *, agnostic: bool = False, pairs: bool = False,
                  max_partners: int | None = None) -> Columns:
    """Build the column model of ``problem``.

    ``agnostic`` makes every type look equally fast to the policy, as Gavel's baselines do
    (§5.4.4): each job's throughput row becomes its mean over the types it can run on, so
    on a one-type cluster nothing changes. ``pairs`` adds a column for each co-located pair
    and type where the pair beats time slicing (its normalised throughputs sum above 1,
    §5.3.1); ``max_partners`` keeps only each job's best partners by that gain.
    """
    types = problem.worker_types
    n, m = len(types), len(problem.jobs)
    T = np.zeros((m, n))
    for i, job in enumerate(problem.jobs):
        for j, t in enumerate(types):
            T[i, j] = job.throughputs.get(t, 0.0)
    sf = np.array([job.scale_factor for job in problem.jobs], dtype=float)
    workers = np.array([problem.cluster[t] for t in types], dtype=float)
    largest = np.array([problem.largest_job(t) for t in types], dtype=float)
    T[np.nonzero(sf[:, None] > largest[None, :])] = 0.0  # too big for that type
    if agnostic:
        counts = (T > 0).sum(axis=1)
        means = T.sum(axis=1) / np.maximum(counts, 1)
        T = np.where(T > 0, means[:, None], 0.0)
    rows, cols = np.nonzero(T > 0)
    keys = [problem.jobs[i].id for i in rows]
    member_rows, member_cols = list(rows), list(range(len(rows)))
    thr_rows, thr_cols, thr_vals = list(rows), list(range(len(rows))), list(T[rows, cols])
    use_rows, use_vals = list(cols), list(sf[rows])
    col_type = list(cols)
    if pairs:
        if agnostic:
            raise ProblemError("pairs: space sharing needs the heterogeneity-aware throughputs")
        for (a, b), j, (ta, tb) in _useful_pairs(problem, T, types, max_partners):
            c = len(keys)
            keys.append(pair_key(problem.jobs[a].id, problem.jobs[b].id))
            member_rows += [a, b]
            member_cols += [c, c]
            thr_rows += [a, b]
            thr_cols += [c, c]
            thr_vals += [ta, tb]
            use_rows.append(j)
            use_vals.append(sf[a])
            col_type.append(j)
    c = len(keys)
    member = sp.csr_matrix((np.ones(len(member_rows)), (member_rows, member_cols)), shape=(m, c))
    throughput = sp.csr_matrix((thr_vals, (thr_rows, thr_cols)), shape=(m, c))
    usage = sp.csr_matrix((use_vals, (use_rows, range(c))), shape=(n, c))
    job = problem.jobs
    return Columns(
        job_ids=tuple(j.id for j in job), types=types, T=T, scale_factor=sf,
        weight=np.array([j.weight for j in job], dtype=float),
        remaining=np.array([j.remaining_steps for j in job], dtype=float),
        elapsed=np.array([j.elapsed_s for j in job], dtype=float),
        isolated_elapsed=np.array([j.elapsed_s if j.isolated_elapsed_s is None
                                   else j.isolated_elapsed_s for j in job], dtype=float),
        workers=workers,
        prices=np.array([problem.prices.get(t, 0.0) for t in types], dtype=float),
        keys=tuple(keys), col_type=np.array(col_type, dtype=int),
        member=member, throughput=throughput, usage=usage,
    )


def _useful_pairs(problem: Problem, T: np.ndarray, types, max_partners):
    """Yield ((a, b), type index, (thr a, thr b)) for pairs that beat time slicing."""
    index = {job.id: i for i, job in enumerate(problem.jobs)}
    candidates = []
    for pair in problem.pairs:
        a, b = index[pair.jobs[0]], index[pair.jobs[1]]
        for j, t in enumerate(types):
            ta, tb = pair.throughputs.get(t, (0.0, 0.0))
            if ta <= 0 or tb <= 0 or T[a, j] <= 0 or T[b, j] <= 0:
                continue
            gain = ta / T[a, j] + tb / T[b, j]
            if gain > 1.0:
                candidates.append((gain, a, b, j, ta, tb))
    if max_partners is not None:
        candidates.sort(key=lambda c: (-c[0], c[1], c[2], c[3]))
        partners: dict[int, set[int]] = {}
        kept = []
        for cand in candidates:
            _, a, b, *_ = cand
            pa, pb = partners.setdefault(a, set()), partners.setdefault(b, set())
            if (b in pa) or (len(pa) < max_partners and len(pb) < max_partners):
                pa.add(b)
                pb.add(a)
                kept.append(cand)
        candidates = sorted(kept, key=lambda c: (c[1], c[2], c[3]))
    for _, a, b, j, ta, tb in candidates:
        yield (a, b), j, (ta, tb)
