"""A ``Problem``'s jobs as columns: the arrays the column model reads (thesis §5.3.1: T and
each job's numbers), beside the ``Job`` records.

A scheduler re-solves thousands of times, each time over every job; making a ``Job`` per job
and reading its fields back costs more than the LP's solve (BENCHMARKS.md, The simulator).
A caller that holds its jobs as arrays (the core) hands a ``JobTable`` as ``Problem.jobs``
with the arrays filled in and the records made only if a policy reads them; any other
``Problem`` gets its table from its records (``JobTable.of``). Either way the table is a
read-only sequence of ``Job`` and the column model reads the same arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from itertools import chain
from operator import attrgetter, itemgetter

import numpy as np

from .jobs import Job
from .problem_json import JOB_NUMBERS

_JOB_NUMBERS = attrgetter(*JOB_NUMBERS)
_THROUGHPUTS = attrgetter("throughputs")


class JobTable(Sequence):
    """``ids`` and, over ``types``, ``T`` (m, n) steps/s (0: cannot run there) and
    ``numbers`` (m, ``JOB_NUMBERS``) as the column model reads them (no isolated time: the
    elapsed time; no SLO: 0). ``records`` are the ``Job``s, or a function that makes them
    when first read. ``configured``: whether any job has a ``Configuration`` (None: read
    from the records). The arrays are read-only."""

    def __init__(self, ids: tuple[str, ...], types: tuple[str, ...], T: np.ndarray,
                 numbers: np.ndarray, records: tuple[Job, ...] | Callable[[], tuple[Job, ...]],
                 configured: bool | None = None):
        self.ids, self.types, self.T, self.numbers = ids, types, T, numbers
        T.flags.writeable = numbers.flags.writeable = False
        if callable(records):
            self._make = records
        else:
            self.__dict__["records"] = records
        if configured is not None:
            self.__dict__["configured"] = configured

    @classmethod
    def of(cls, jobs: tuple[Job, ...], types: tuple[str, ...]) -> JobTable:
        """The table of ``jobs``' records."""
        m = len(jobs)
        numbers = np.array([    # (m, JOB_NUMBERS)
            (sf, w, left, elapsed, elapsed if isolated is None else isolated, slo or 0.0)
            for sf, w, left, elapsed, isolated, slo in map(_JOB_NUMBERS, jobs)],
            dtype=float).reshape(m, len(JOB_NUMBERS))
        return cls(tuple(job.id for job in jobs), types, _throughput_rows(jobs, types),
                   numbers, jobs)

    @cached_property
    def records(self) -> tuple[Job, ...]:
        return tuple(self._make())

    @cached_property
    def configured(self) -> bool:
        """Whether any job can run on several types at once (``Job.configurations``)."""
        return any(job.configurations for job in self.records)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i):
        return self.records[i]

    def __iter__(self):
        return iter(self.records)

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    __hash__ = None

    def __reduce__(self):
        """Pickled as the table of its records (a ``Problem`` sent to a worker process)."""
        return JobTable.of, (self.records, self.types)


def _throughput_rows(jobs, types: tuple[str, ...]) -> np.ndarray:
    """(m, n) each job's steps/s on each type, 0 where it names none."""
    return value_rows(list(map(_THROUGHPUTS, jobs)), types)


def value_rows(rows: Sequence[Mapping[str, float]], keys: tuple[str, ...]) -> np.ndarray:
    """(len(rows), len(keys)) each row's value at each key, 0 where it has none: one lookup
    of every key at once per row when it names them all (the usual case), else key by key."""
    m, n = len(rows), len(keys)
    if n:
        found = map(itemgetter(*keys), rows)   # (one key: a value per row, else a tuple)
        try:
            return np.fromiter(found if n == 1 else chain.from_iterable(found), dtype=float,
                               count=m * n).reshape(m, n)
        except KeyError:
            pass
    return np.fromiter((row.get(k, 0.0) for row in rows for k in keys), dtype=float,
                       count=m * n).reshape(m, n)
