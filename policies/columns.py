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

With ``merge=True`` identical jobs (same throughputs, scale factor and weight) share one
row: the row's columns are each job's own time fractions, and ``usage`` counts every job of
the class. Max-min fairness and water filling treat identical jobs alike, so some optimal
allocation gives them equal shares (average any optimum over their permutations), and the
merged LP finds it with n/k fewer variables.

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

    job_ids: tuple[str, ...]   # (m,) one id per row: the job, or the first of its class
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
    classes: tuple[tuple[str, ...], ...] | None = None  # (m,) the jobs of each merged row
    unusable: np.ndarray | None = None  # (m, n) planned by an agnostic policy, lost to the job

    @property
    def num_jobs(self) -> int:
        """Rows of the model: jobs, or classes of identical jobs when merged."""
        return len(self.job_ids)

    @property
    def total_jobs(self) -> int:
        """Jobs in the problem, whether or not rows are merged."""
        return self.num_jobs if self.classes is None else sum(map(len, self.classes))

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
        return self.workers / max(self.total_jobs, total, 1e-12)

    @cached_property
    def equal_throughput(self) -> np.ndarray:
        """throughput(m, X^equal): the normaliser of max-min fairness (§5.4.1)."""
        return self.T @ self.equal_share

    @cached_property
    def isolated_share(self) -> np.ndarray:
        """X^isolated (§5.4.1, §5.4.2): 1/n of every type's workers for each of the n jobs,
        as a time fraction on the job's ``scale_factor`` workers, also on types it cannot
        use (its throughput there is zero). A job asked more than full time has its row
        scaled down to 1. Both as Gavel's ``IsolatedPolicy``."""
        return equal_split(self.workers, self.scale_factor, self.total_jobs)

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

    def repaired(self, z: np.ndarray, *, fit_types: bool = True) -> np.ndarray:
        """``z`` scaled down where solver tolerance left a job above 1 or (``fit_types``) a
        type above its workers, so that (5.1)-(5.3) hold exactly."""
        z = np.where(z > ZERO, np.minimum(z, 1.0), 0.0)
        job_shrink = 1.0 / np.maximum(np.asarray(self.member @ z).ravel(), 1.0)
        column_shrink = np.ones_like(z)  # the largest overload among the column's jobs
        entries = self.member.tocoo()
        np.minimum.at(column_shrink, entries.col, job_shrink[entries.row])
        z = z * column_shrink
        if not fit_types:
            return z
        type_load = np.asarray(self.usage @ z).ravel()
        type_shrink = np.where(type_load > self.workers,
                               self.workers / np.maximum(type_load, 1e-300), 1.0)
        return z * type_shrink[self.col_type]

    def to_rows(self, z: np.ndarray, *, fit_types: bool = True) -> dict[str, dict[str, float]]:
        """Allocation rows: every job with every type, plus the pairs that got time.
        ``fit_types=False`` keeps a type asked beyond its workers as it is (only Gavel's
        FIFO does that on purpose, see ``policies.ordering``)."""
        z = self.repaired(z, fit_types=fit_types)
        rows = {job_id: dict.fromkeys(self.types, 0.0) for job_id in self.job_ids}
        for key, j, value in zip(self.keys, self.col_type.tolist(), z.tolist()):
            if key not in rows:
                if value == 0.0:
                    continue
                rows[key] = dict.fromkeys(self.types, 0.0)
            rows[key][self.types[j]] = value
        if self.unusable is not None:
            for i, j in zip(*np.nonzero(self.unusable)):
                rows[self.job_ids[i]][self.types[j]] = 0.0
        if self.classes is not None:
            rows = {job_id: dict(rows[first]) for first, members in zip(self.job_ids, self.classes)
                    for job_id in members}
        return rows


def equal_split(workers: np.ndarray, scale_factor: np.ndarray, n: int) -> np.ndarray:
    """(len(scale_factor), types) time fractions giving each of ``n`` shares 1/n of every
    type's workers, on its scale factor's workers, each row scaled down to at most 1: the
    X^isolated of §5.4.2, and Gandiva's equal time per combination (as Gavel computes them)."""
    x = np.outer(1.0 / np.asarray(scale_factor, dtype=float), workers) / max(n, 1)
    return x / np.maximum(x.sum(axis=1), 1.0)[:, None]


def build_columns(problem: Problem, *, agnostic: bool = False, pairs: bool = False,
                  max_partners: int | None = None, merge: bool = False) -> Columns:
    """Build the column model of ``problem``.

    ``agnostic`` makes every type look equally fast to the policy, as Gavel's baselines do
    (§5.4.4): each job's throughput row becomes its mean over the types it can run on, on
    every type big enough for it, so on a one-type cluster nothing changes. An agnostic
    policy does not know that a job cannot use some type (no throughput there): it plans
    time there as on any other type, and that time is lost to the job (``to_rows`` drops
    it; Gavel's mechanism cannot run it either). ``pairs`` adds a column for each co-located pair
    and type where the pair beats time slicing (its normalised throughputs sum above 1,
    §5.3.1); ``max_partners`` keeps only each job's best partners by that gain. ``merge``
    gives identical jobs one row (see the module docstring; not with ``pairs``).
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
    unusable = np.zeros((m, n), dtype=bool)
    if agnostic:
        counts = (T > 0).sum(axis=1)
        means = T.sum(axis=1) / np.maximum(counts, 1)
        fits = sf[:, None] <= largest[None, :]
        unusable = fits & (T <= 0) & (counts > 0)[:, None]
        T = np.where(fits & (counts > 0)[:, None], means[:, None], 0.0)
    jobs = problem.jobs
    weight = np.array([j.weight for j in jobs], dtype=float)
    classes, multiplicity = None, np.ones(m)
    if merge and not pairs and m:
        signature = np.column_stack([T, sf, weight, unusable])
        _, first, inverse, multiplicity = np.unique(
            signature, axis=0, return_index=True, return_inverse=True, return_counts=True)
        order = np.argsort(first)  # rows in order of each class's first job
        inverse = np.argsort(order)[inverse.ravel()]
        first, multiplicity = first[order], multiplicity[order].astype(float)
        members: list[list[str]] = [[] for _ in first]
        for job, c in zip(jobs, inverse):
            members[c].append(job.id)
        classes = tuple(map(tuple, members))
        jobs = tuple(jobs[i] for i in first)
        T, sf, weight, m = T[first], sf[first], weight[first], len(first)
        unusable = unusable[first]
    rows, cols = np.nonzero(T > 0)
    keys = [jobs[i].id for i in rows]
    member_rows, member_cols = list(rows), list(range(len(rows)))
    thr_rows, thr_cols, thr_vals = list(rows), list(range(len(rows))), list(T[rows, cols])
    use_rows, use_vals = list(cols), list(sf[rows] * multiplicity[rows])
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
    return Columns(
        job_ids=tuple(j.id for j in jobs), types=types, T=T, scale_factor=sf, weight=weight,
        remaining=np.array([j.remaining_steps for j in jobs], dtype=float),
        elapsed=np.array([j.elapsed_s for j in jobs], dtype=float),
        isolated_elapsed=np.array([j.elapsed_s if j.isolated_elapsed_s is None
                                   else j.isolated_elapsed_s for j in jobs], dtype=float),
        workers=workers,
        prices=np.array([problem.prices.get(t, 0.0) for t in types], dtype=float),
        keys=tuple(keys), col_type=np.array(col_type, dtype=int),
        member=member, throughput=throughput, usage=usage, classes=classes,
        unusable=unusable if unusable.any() else None,
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
