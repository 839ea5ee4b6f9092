"""The allocation as a vector of *columns*, and the sparse matrices every policy shares.
(Over 400 lines: one column model, built in one pass that every LP's speed depends on.)

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

With ``configurations=True`` a job's ``Configuration``s (several worker types at once,
VirtualFlow §5) become columns too: one per job and configuration, in ``member`` like any
of the job's columns, using ``count`` workers of *each* type it names in ``usage`` and
making its steps/s in ``throughput``. ``col_type`` then indexes ``labels`` (the types,
then the configuration names), and an allocation row keys such a column by its name.

This replaces Gavel's ``flatten()`` side channel (docs/style.md §6.5) with plain data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import cached_property
from types import MappingProxyType

import numpy as np

from ._lazy import sp
from .compiled import compiled_columns
from .errors import ProblemError
from .frozen import record
from .matrix_rows import MatrixRows
from .packing import useful_pairs
from .problem import Problem
from .problem_json import non_finite
from .sparse import Compressed, as_scipy, compressed_alike_arrays, coo_arrays, matvec

# An allocation entry below this is reported as zero: solver noise, not a decision.
ZERO = 1e-7


@record
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
    col_type: np.ndarray       # (c,) index of each column's type (or configuration) in labels
    member_arrays: Compressed      # (m, c) ``member``'s CSR arrays
    throughput_arrays: Compressed  # (m, c) ``throughput``'s
    usage_arrays: Compressed       # (n, c) ``usage``'s
    merged: tuple[tuple[str, ...], np.ndarray] | None = None  # merged rows: every job id,
    # and the row of each (``classes`` lists them by row)
    unusable: np.ndarray | None = None  # (m, n) planned by an agnostic policy, lost to the job
    config_names: tuple[str, ...] = ()  # configurations with a column, after the types

    @property
    def labels(self) -> tuple[str, ...]:
        """What ``col_type`` indexes: the worker types, then the configuration names."""
        return self.types + self.config_names if self.config_names else self.types

    @property
    def num_jobs(self) -> int:
        """Rows of the model: jobs, or classes of identical jobs when merged."""
        return len(self.job_ids)

    @property
    def total_jobs(self) -> int:
        """Jobs in the problem, whether or not rows are merged."""
        return self.num_jobs if self.merged is None else len(self.merged[0])

    @cached_property
    def classes(self) -> tuple[tuple[str, ...], ...] | None:
        """(m,) the jobs of each merged row, in problem order (None: rows not merged)."""
        if self.merged is None:
            return None
        members: list[list[str]] = [[] for _ in self.job_ids]
        for job_id, row in zip(self.merged[0], self.merged[1].tolist()):
            members[row].append(job_id)
        return tuple(map(tuple, members))

    @property
    def num_columns(self) -> int:
        return len(self.keys)

    # The matrices as scipy objects, made when first read: the direct LP path reads the
    # arrays only (making one costs ~11 us, a simulation's re-solve makes none; issue #30).
    @cached_property
    def member(self) -> sp.csr_matrix:
        return as_scipy(self.member_arrays)

    @cached_property
    def throughput(self) -> sp.csr_matrix:
        return as_scipy(self.throughput_arrays)

    @cached_property
    def usage(self) -> sp.csr_matrix:
        return as_scipy(self.usage_arrays)

    @cached_property
    def price(self) -> np.ndarray:
        """$/hour each column costs: the price of its type times the workers it holds."""
        return np.asarray(self.usage.T @ self.prices).ravel()

    @cached_property
    def single(self) -> np.ndarray:
        """(c,) True for the columns of one job (not a co-located pair)."""
        return np.bincount(self.member_arrays.indices, minlength=self.num_columns) == 1

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

    @cached_property
    def fastest_scale(self) -> np.ndarray:
        """1 / throughput(m, X^fastest), 0 for jobs that cannot run: what normalises a
        job's throughput to its fraction of its best rate (FIFO's objective, §5.4.2)."""
        return np.where(self.runnable, 1.0 / np.maximum(self.fastest_throughput, 1e-300), 0.0)

    def effective_throughput(self, z: np.ndarray) -> np.ndarray:
        return np.asarray(self.throughput @ z).ravel()

    def z_from(self, allocation) -> np.ndarray:
        """The column vector of an ``Allocation`` (entries without a column are dropped)."""
        labels = self.labels
        return np.array([allocation.share(key, labels[j])
                         for key, j in zip(self.keys, self.col_type)])

    def repaired(self, z: np.ndarray, *, fit_types: bool = True,
                 kept: np.ndarray | None = None) -> np.ndarray:
        """``z`` scaled down where solver tolerance left a job above 1 or (``fit_types``) a
        type above its workers, so that (5.1)-(5.3) hold exactly. Entries below ``ZERO``
        are rounded to zero, except those ``kept`` (a mask) names as decisions."""
        if kept is None and (dense := self._repaired_single(z, fit_types)) is not None:
            return dense[0]
        small = z <= ZERO if kept is None else (z <= ZERO) & ~kept
        z = np.where(small, 0.0, np.clip(z, 0.0, 1.0))
        job_shrink = 1.0 / np.maximum(matvec(self.member_arrays, z), 1.0)
        if not (job_shrink == 1.0).all():  # (no job above 1: nothing to scale)
            column_shrink = np.ones_like(z)  # the largest overload among the column's jobs
            rows, cols, _ = coo_arrays(self.member_arrays)
            np.minimum.at(column_shrink, cols, job_shrink[rows])
            z = z * column_shrink
        if not fit_types:
            return z
        type_load = matvec(self.usage_arrays, z)
        over = type_load > self.workers
        if not over.any():
            return z
        type_shrink = np.where(over, self.workers / np.maximum(type_load, 1e-300), 1.0)
        if not self.config_names:
            return z * type_shrink[self.col_type]
        shrink = np.ones_like(z)  # a configuration column: the largest overload of its types
        rows, cols, _ = coo_arrays(self.usage_arrays)
        np.minimum.at(shrink, cols, type_shrink[rows])
        return z * shrink

    def to_rows(self, z: np.ndarray, *, fit_types: bool = True,
                kept: np.ndarray | None = None) -> Mapping[str, Mapping[str, float]]:
        """Allocation rows: every job with every type, plus the pairs that got time, each
        read-only as the ``Allocation`` keeps it (merged rows: a class's jobs share one;
        every column one job's: the rows as one matrix, ``MatrixRows``).
        ``fit_types=False`` keeps a type asked beyond its workers as it is (only Gavel's
        FIFO does that on purpose, see ``policies.ordering``); ``kept`` as ``repaired``."""
        dense = self._repaired_single(z, fit_types) if kept is None else None
        if dense is not None:   # every column one job's: the rows from one matrix
            return self._dense_rows(dense[1])
        return self._rows(self.repaired(z, fit_types=fit_types, kept=kept))

    def _rows(self, z: np.ndarray) -> dict[str, Mapping[str, float]]:
        """``to_rows`` of repaired time fractions, column by column."""
        rows = {job_id: dict.fromkeys(self.types, 0.0) for job_id in self.job_ids}
        labels, n = self.labels, len(self.types)
        for key, j, value in zip(self.keys, self.col_type.tolist(), z.tolist()):
            if key not in rows:
                if value == 0.0:
                    continue
                rows[key] = dict.fromkeys(self.types, 0.0)
            if j < n or value != 0.0:  # configurations appear only when they get time
                rows[key][labels[j]] = value
        if self.unusable is not None:
            for i, j in zip(*np.nonzero(self.unusable)):
                rows[self.job_ids[i]][self.types[j]] = 0.0
        if self.merged is not None:  # a class's jobs share one read-only row
            shared = [MappingProxyType(rows[first]) for first in self.job_ids]
            all_ids, row_of = self.merged
            return dict(zip(all_ids, map(shared.__getitem__, row_of.tolist())))
        return {key: MappingProxyType(row) for key, row in rows.items()}

    def _repaired_single(self, z: np.ndarray, fit_types: bool):
        """(``repaired``'s z, the (m, n) time of each job row on each type) by the compiled
        loop, for a model of single-job columns; None for others, or without it."""
        member, usage = self.member_arrays, self.usage_arrays
        if compiled_columns is None or self.config_names or member.nnz != self.num_columns:
            return None
        i64 = np.int64
        return compiled_columns.repaired_single(
            np.asarray(z, dtype=float), member.indices.astype(i64, copy=False),
            member.indptr.astype(i64, copy=False), member.data,
            usage.indices.astype(i64, copy=False), usage.indptr.astype(i64, copy=False),
            usage.data, self.col_type.astype(i64, copy=False), self.workers, ZERO, fit_types)

    def _dense_rows(self, dense: np.ndarray) -> MatrixRows:
        """``to_rows`` of single-job columns from their (m, n) matrix of time."""
        if self.unusable is not None:
            dense[self.unusable] = 0.0
        if self.merged is None:
            return MatrixRows(self.job_ids, self.types, dense)
        all_ids, row_of = self.merged
        return MatrixRows(all_ids, self.types, dense, row_of)


def equal_split(workers: np.ndarray, scale_factor: np.ndarray, n: int) -> np.ndarray:
    """(len(scale_factor), types) time fractions giving each of ``n`` shares 1/n of every
    type's workers, on its scale factor's workers, each row scaled down to at most 1: the
    X^isolated of §5.4.2, and Gandiva's equal time per combination (as Gavel computes them)."""
    x = np.outer(1.0 / np.asarray(scale_factor, dtype=float), workers) / max(n, 1)
    return x / np.maximum(x.sum(axis=1), 1.0)[:, None]


def build_columns(problem: Problem, *, agnostic: bool = False, pairs: bool = False,
                  max_partners: int | None = None, merge: bool = False,
                  configurations: bool = False) -> Columns:
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
    ``configurations`` adds a column per job and ``Configuration`` that fits the cluster
    (every count at most what its type can host), after the pair columns.
    """
    types = problem.worker_types
    table = problem.table
    workers = np.array([problem.cluster[t] for t in types], dtype=float)
    prices = np.array([problem.prices.get(t, 0.0) for t in types], dtype=float)
    finite = all(map(math.isfinite, workers.tolist() + prices.tolist()))
    if finite and not (agnostic or pairs or configurations):
        built = _compiled_single(problem, workers, prices, merge)
        if built is not None:
            return built
    n, m, ids = len(types), len(table), table.ids
    T, numbers = table.T.copy(), table.numbers
    # every number finite (docs/design.md, Safety rules)
    if not (finite and np.isfinite(T).all() and np.isfinite(numbers).all()):
        raise non_finite(problem, np.hstack([T, numbers]), np.column_stack([workers, prices]))
    sf, weight, times = numbers[:, 0].copy(), numbers[:, 1].copy(), numbers[:, 2:]
    largest = np.array([problem.largest_job(t) for t in types], dtype=float)
    T[np.nonzero(sf[:, None] > largest[None, :])] = 0.0  # too big for that type
    unusable = np.zeros((m, n), dtype=bool)
    if agnostic:
        counts = (T > 0).sum(axis=1)
        means = T.sum(axis=1) / np.maximum(counts, 1)
        fits = sf[:, None] <= largest[None, :]
        unusable = fits & (T <= 0) & (counts > 0)[:, None]
        T = np.where(fits & (counts > 0)[:, None], means[:, None], 0.0)
    configs = _fitting_configurations(problem, T) if configurations else None
    if configs is not None and agnostic:
        raise ProblemError("configurations: mixed configurations need the "
                           "heterogeneity-aware throughputs")
    merged, multiplicity = None, np.ones(m)
    if merge and not pairs and m:
        signature = [T, sf, weight, unusable]
        if configs is not None:
            kinds: dict[tuple, int] = {}
            signature.append([kinds.setdefault(c, len(kinds)) for c in configs])
        first, inverse = row_classes(np.column_stack(signature) + 0.0)
        multiplicity = np.bincount(inverse).astype(float)
        merged = (tuple(ids), inverse)
        ids = tuple(ids[i] for i in first.tolist())
        T, sf, weight, m = T[first], sf[first], weight[first], len(first)
        unusable, times = unusable[first], times[first]
        if configs is not None:
            configs = [configs[i] for i in first.tolist()]
    rows, cols = np.nonzero(T > 0)
    singles = rows.size
    keys = [ids[i] for i in rows.tolist()]
    pair_a, pair_b, pair_type, thr_a, thr_b = (np.zeros(0, dtype=int),) * 3 + (np.zeros(0),) * 2
    if pairs:
        if agnostic:
            raise ProblemError("pairs: space sharing needs the heterogeneity-aware throughputs")
        which, pair_a, pair_b, pair_type, thr_a, thr_b = useful_pairs(problem, T, types,
                                                                      max_partners)
        pair_keys = [pair.key for pair in problem.pairs]
        keys += [pair_keys[k] for k in which.tolist()]
    at = [rows, pair_a, pair_b]         # coordinates shared by member and throughput
    cols_at = [np.arange(singles), np.arange(singles, len(keys))]
    cols_at.insert(2, cols_at[1])
    rates = [T[rows, cols], thr_a, thr_b]
    col_type = [cols, pair_type]
    used = [sf[rows] * multiplicity[rows], sf[pair_a]]
    mixed = (_MixedColumns.of(configs, ids, types, multiplicity, len(keys))
             if configs and any(configs) else None)
    if mixed is not None:  # configuration columns: several types each (usage entries)
        if not np.isfinite(mixed.rates).all():
            k = int(np.argmax(~np.isfinite(mixed.rates)))
            raise ProblemError(f"job {mixed.keys[k]!r}: a configuration's throughput must be "
                               "finite", job_id=mixed.keys[k])
        keys += mixed.keys
        at.append(mixed.rows)
        cols_at.append(mixed.cols)
        rates.append(mixed.rates)
        col_type.append(mixed.label)
    c = len(keys)
    if c == singles:   # one job on one type each: the arrays as a sort would order them
        member, throughput, usage = _single_arrays(rows, cols, rates[0], used[0], (m, n))
        return _columns(ids, types, T, sf, weight, times, workers, prices, keys,
                        cols.astype(int), member, throughput, usage, merged, unusable, None)
    at, cols_at = np.concatenate(at), np.concatenate(cols_at)
    member, throughput = compressed_alike_arrays(at, cols_at,
                                                 [np.ones(at.size), np.concatenate(rates)], (m, c))
    col_type = np.concatenate(col_type).astype(int)
    used_type, used_col = col_type, np.arange(c)
    if mixed is not None:
        plain = np.arange(c - len(mixed.keys))
        used.append(mixed.use_count)
        used_type = np.concatenate([col_type[plain], mixed.use_type])
        used_col = np.concatenate([plain, mixed.use_col])
    usage, = compressed_alike_arrays(used_type, used_col, [np.concatenate(used)], (n, c))
    return _columns(ids, types, T, sf, weight, times, workers, prices, keys, col_type,
                    member, throughput, usage, merged, unusable, mixed)


def _columns(ids, types, T, sf, weight, times, workers, prices, keys, col_type,
             member, throughput, usage, merged, unusable, mixed) -> Columns:
    return Columns(
        job_ids=ids, types=types, T=T, scale_factor=sf, weight=weight,
        remaining=times[:, 0].copy(), elapsed=times[:, 1].copy(),
        isolated_elapsed=times[:, 2].copy(), workers=workers, prices=prices,
        keys=tuple(keys), col_type=col_type,
        member_arrays=member, throughput_arrays=throughput, usage_arrays=usage, merged=merged,
        unusable=unusable if unusable is not None and unusable.any() else None,
        config_names=mixed.names if mixed is not None else (),
    )


def _compiled_single(problem: Problem, workers: np.ndarray, prices: np.ndarray,
                     merge: bool) -> Columns | None:
    """``build_columns`` of a model of single-job columns by the compiled loop
    (``_columns.single_columns``); None without it, or when a number is not finite (the
    numpy path says which)."""
    table, types = problem.table, problem.worker_types
    if compiled_columns is None or table.T.dtype != float or table.numbers.dtype != float:
        return None
    largest = np.array([problem.largest_job(t) for t in types], dtype=float)
    built = compiled_columns.single_columns(table.T, table.numbers, largest, tuple(table.ids),
                                            merge)
    if built is None:
        return None
    (ids, keys, inverse, T, numbers, col_type, rates, at, job_ptr, at_copy, job_ptr_copy,
     used, order, type_ptr) = built
    m, c = len(ids), len(keys)
    return _columns(ids, types, T, numbers[:, 0].copy(), numbers[:, 1].copy(), numbers[:, 2:],
                    workers, prices, keys, col_type,
                    Compressed(np.ones(c), at, job_ptr, (m, c), "csr"),
                    Compressed(rates, at_copy, job_ptr_copy, (m, c), "csr"),
                    Compressed(used, order, type_ptr, (len(types), c), "csr"),
                    None if inverse is None else (tuple(table.ids), inverse), None, None)


def _single_arrays(rows: np.ndarray, cols: np.ndarray, rates: np.ndarray, used: np.ndarray,
                   shape: tuple[int, int]) -> tuple[Compressed, Compressed, Compressed]:
    """``member``, ``throughput`` and ``usage`` of columns that are one job on one type
    each, column k at (``rows[k]``, type ``cols[k]``) in row order (``np.nonzero``'s):
    ``compressed_alike_arrays``' arrays without its sort, which would keep the columns
    in order in each job's row and order each type's by a stable sort of their types
    (tests/policies/test_columns.py)."""
    (m, n), c = shape, rows.size
    index = np.int32 if max(m, c) < 2 ** 31 - 1 else np.int64   # (as ``_canonical``'s)
    job_ptr = np.zeros(m + 1, dtype=index)
    np.cumsum(np.bincount(rows, minlength=m), out=job_ptr[1:])
    at = np.arange(c, dtype=index)
    index = np.int32 if max(n, c) < 2 ** 31 - 1 else np.int64
    order = np.argsort(cols, kind="stable")
    type_ptr = np.zeros(n + 1, dtype=index)
    np.cumsum(np.bincount(cols, minlength=n), out=type_ptr[1:])
    return (Compressed(np.ones(c), at, job_ptr, (m, c), "csr"),
            Compressed(rates, at.copy(), job_ptr.copy(), (m, c), "csr"),
            Compressed(used[order], order.astype(index), type_ptr, (n, c), "csr"))


def _fitting_configurations(problem: Problem, T: np.ndarray) -> list[tuple]:
    """Per job, its configurations that fit the cluster, as (name, ((type, count), ...),
    steps/s) tuples (hashable, so identical jobs can share a row). A job that runs on no
    single type gets none: its fairness normaliser, throughput(m, X^equal), would be 0."""
    largest = {t: problem.largest_job(t) for t in problem.worker_types}
    runs = T.max(axis=1) > 0 if T.size else np.zeros(len(problem.jobs), dtype=bool)
    return [tuple((c.name, tuple(c.gpus.items()), c.throughput) for c in job.configurations
                  if all(0 < count <= largest[t] for t, count in c.gpus.items()))
            if ok else () for job, ok in zip(problem.jobs, runs.tolist())]


@record
class _MixedColumns:
    """The configuration columns of ``build_columns`` as coordinate arrays."""

    keys: list
    names: tuple[str, ...]
    rows: np.ndarray       # job row of each configuration column
    cols: np.ndarray       # its column index
    rates: np.ndarray      # its steps/s
    label: np.ndarray      # its index in Columns.labels
    use_type: np.ndarray   # usage entries: type, column, workers
    use_col: np.ndarray
    use_count: np.ndarray

    @classmethod
    def of(cls, configs, ids, types, multiplicity, start: int) -> _MixedColumns:
        type_index = {t: j for j, t in enumerate(types)}
        names: dict[str, int] = {}
        keys, rows, rates, label, use_type, use_col, use_count = [], [], [], [], [], [], []
        for i, job_configs in enumerate(configs):
            for name, gpus, rate in job_configs:
                col = start + len(keys)
                keys.append(ids[i])
                rows.append(i)
                rates.append(rate)
                label.append(len(types) + names.setdefault(name, len(names)))
                for t, count in gpus:
                    use_type.append(type_index[t])
                    use_col.append(col)
                    use_count.append(count * multiplicity[i])
        cols = np.arange(start, start + len(keys))
        return cls(keys, tuple(names), np.array(rows, dtype=int), cols,
                   np.array(rates, dtype=float), np.array(label, dtype=int),
                   np.array(use_type, dtype=int), np.array(use_col, dtype=int),
                   np.array(use_count, dtype=float))


def row_classes(signature: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first row of each class, class of each row) for the rows of ``signature`` that are
    equal, classes numbered in order of their first row (dicts over row bytes, filled by C
    loops: faster than ``np.unique(axis=0)`` for the small problems a simulation solves
    thousands of times)."""
    m = len(signature)
    if signature.size == 0:      # no rows, or rows of nothing: all alike
        return np.zeros(min(m, 1), dtype=np.int64), np.zeros(m, dtype=np.int64)
    if compiled_columns is not None and signature.dtype == np.float64:   # (the same, one pass)
        return compiled_columns.row_classes(np.ascontiguousarray(signature))
    width = signature.shape[1] * signature.itemsize
    rows = np.ascontiguousarray(signature).view(np.dtype((np.void, width))).ravel().tolist()
    earliest = dict(zip(reversed(rows), range(m - 1, -1, -1)))  # a row's bytes: first place
    first = sorted(earliest.values())
    number = {rows[at]: k for k, at in enumerate(first)}
    inverse = np.fromiter(map(number.__getitem__, rows), dtype=np.int64, count=m)
    return np.array(first, dtype=np.int64), inverse
