"""Order-based policies: FIFO and shortest job first (thesis §5.4.2).

- ``fifo`` / ``fifo_perf`` keep Gavel's semantics: jobs, in arrival order, get a whole type
  each until the head of the queue no longer fits; no job jumps the queue. ``fifo`` keeps
  running jobs where they are (read from ``Problem.previous``) and hands a finished job's
  type to the next in line; which type a new job gets is Gavel's code's choice by default
  (see ``GreedyOrdered._gavel_types``) or a random one with room. ``fifo_perf`` re-places
  every job on the fastest type with room, as Gavel's does.
- ``shortest_job_first_perf`` is the same greedy in order of remaining time on the fastest
  type, each job on the fastest type with room: the shortest job runs alone on its fastest
  type, which minimises its duration (§5.4.2), then the next shortest, and so on.
- ``fifo_packed`` is the LP of §5.4.2 over singles and pairs:
  maximise Σ_m throughput(m, X) / throughput(m, X^fastest) * (M - rank_m).
"""

from __future__ import annotations

import random
from collections.abc import Mapping

import numpy as np

from ._lazy import cp
from .base import BACKEND_OPTION, ColumnPolicy, Policy, Solution, no_columns, run
from .columns import ZERO, Columns, build_columns
from .errors import ProblemError
from .fairness import base_constraints
from .jobs import is_pair_key
from .problem import Allocation, Problem
from .state import generator_state, seeded_generator
from .throughput import solve_sum
from .traits import Traits


def arrival_rank(cols: Columns) -> np.ndarray:
    return np.arange(cols.num_jobs)


def shortest_rank(cols: Columns) -> np.ndarray:
    """Rank of each job by remaining time on its fastest type (ties: arrival order)."""
    with np.errstate(divide="ignore"):
        duration = np.where(cols.runnable, cols.remaining / cols.fastest_throughput, np.inf)
    order = np.lexsort((np.arange(cols.num_jobs), duration))
    rank = np.empty(cols.num_jobs, dtype=int)
    rank[order] = np.arange(cols.num_jobs)
    return rank


def order_objective(cols: Columns, rank: np.ndarray) -> np.ndarray:
    """(columns,) each column's weight: the sum over its jobs of their normalised
    throughput there (``throughput.normalized_throughput``) times (M - rank). From the
    column model's arrays, each column's terms summed in job order from 0, as scipy's
    product of that matrix's transpose sums them: the same floats (tests/policies/
    test_behaviour.py), without the two scipy products."""
    T = cols.throughput_arrays
    rows = np.repeat(np.arange(T.shape[0]), np.diff(T.indptr))
    terms = T.data * cols.fastest_scale[rows] * (cols.num_jobs - rank)[rows]
    return np.bincount(T.indices, weights=terms, minlength=T.shape[1])


class OrderedThroughput(ColumnPolicy):
    """``fifo_packed``: the FIFO LP of §5.4.2, with space sharing. No backfill: idle
    workers go to no job out of queue order (Gavel's rule for every FIFO policy)."""

    TRAITS = ColumnPolicy.TRAITS.but(backfill=False, rearrangeable=True,
                                     options={"backend": BACKEND_OPTION})

    rank = staticmethod(arrival_rank)

    def _solve(self, problem: Problem) -> Solution:
        cols = self.columns(problem)
        if cols.num_columns == 0:
            return no_columns(cols)
        weights = order_objective(cols, self.rank(cols))
        if self.direct_solver() == "CLARABEL":
            return solve_sum(cols, weights, self.name)
        z = cp.Variable(cols.num_columns, nonneg=True)
        program = cp.Problem(cp.Maximize(weights @ z), base_constraints(cols, z))
        value = run(program, self.solver, self.name)
        return Solution(cols.to_rows(z.value), value, self.solver)

    def evaluate(self, problem: Problem, allocation: Allocation) -> float | None:
        cols = self.columns(problem)
        return float(order_objective(cols, self.rank(cols)) @ cols.z_from(allocation))


class GreedyOrdered(Policy):
    """``fifo`` (agnostic, sticky), ``fifo_perf`` (``fastest=True``) and
    ``shortest_job_first_perf`` (``fastest=True, rank=shortest_rank``).

    ``type_choice`` says which type an agnostic ``fifo`` job gets when it starts:
    ``"random"`` draws one among the types with room (the thesis's description);
    ``"gavel"`` (the default) does what Gavel's ``FIFOPolicy`` code does, so that results
    replicate Gavel's (see ``_gavel_types``).

    None of them backfills: the mechanism giving idle workers to a job the greedy left
    waiting would let it overtake the head of the queue, against the order the policy
    exists for. For FIFO that is Gavel's rule; for shortest job first it is our choice,
    for the same reason (the shortest job must not be slowed by a longer one placed
    beside it out of order)."""

    TYPE_CHOICES = ("gavel", "random")
    TRAITS = Traits(backfill=False, options={
        "seed": "fifo: seeds the type draws (carried in policy_state between solves)",
        "type_choice": "fifo: the type a starting job gets, 'gavel' (Gavel's code) or "
                       "'random' (the thesis's description)"})

    @property
    def traits(self) -> Traits:
        """``fifo`` is agnostic, keeps running jobs where they are (``previous``) and, with
        Gavel's type choice, carries its generator; shortest job first reads the steps."""
        state = not self.fastest and self.type_choice == "gavel"
        reads = (({"previous"} if not self.fastest else set())
                 | ({"policy_state"} if state else set())
                 | ({"remaining_steps"} if self.rank is shortest_rank else set()))
        return self.TRAITS.but(agnostic=not self.fastest, carries_state=state, reads=reads)

    def __init__(self, name=None, *, fastest: bool = False, rank=arrival_rank, seed: int = 0,
                 type_choice: str = "gavel", **kwargs) -> None:
        super().__init__(name, **kwargs)
        if type_choice not in self.TYPE_CHOICES:
            raise ProblemError(f"type_choice must be one of {', '.join(self.TYPE_CHOICES)}, "
                            f"not {type_choice!r}")
        self.fastest, self.rank, self.seed, self.type_choice = fastest, rank, seed, type_choice

    def check_state(self, state: Mapping) -> None:
        if self.traits.carries_state:
            seeded_generator(self.seed, state)

    def _solve(self, problem: Problem) -> Solution:
        cols = build_columns(problem)
        state = None
        gavel = not self.fastest and self.type_choice == "gavel"
        if gavel:
            rng = seeded_generator(self.seed, problem.policy_state)
            placed = self._gavel_types(problem, cols, rng)
            state = {"rng": generator_state(rng)}
        else:
            placed = self._greedy(problem, cols)
        z = np.zeros(cols.num_columns)
        column_of = {at: c for c, at in enumerate(zip(cols.keys, cols.col_type.tolist()))}
        for i, j in placed.items():
            z[column_of[(cols.job_ids[i], j)]] = 1.0
        return Solution(cols.to_rows(z, fit_types=not gavel), self._score(cols, z), None, state)

    def _greedy(self, problem: Problem, cols: Columns) -> dict[int, int]:
        """Jobs in rank order each get a whole type with room (the fastest, or a random
        one); running jobs of ``fifo`` keep theirs; the first job that fits nowhere ends it."""
        T, sf = cols.T.tolist(), cols.scale_factor.tolist()   # read once, as Python floats
        available = dict(enumerate(cols.workers.tolist()))
        placed: dict[int, int] = {}

        def place(i: int, j: int) -> None:
            placed[i] = j
            available[j] -= sf[i]

        def fits(i: int, j: int) -> bool:
            return T[i][j] > 0 and available[j] >= sf[i]

        present = {job_id: i for i, job_id in enumerate(cols.job_ids)}
        held = [] if self.fastest else list(self._held(problem, cols))
        for key, j in held:
            if key in present and fits(present[key], j):
                place(present[key], j)
        order = np.argsort(self.rank(cols), kind="stable")
        runnable = cols.runnable.tolist()
        queue = [i for i in order.tolist() if i not in placed and runnable[i]]
        for key, j in held:  # a finished job's workers go to the head of the queue
            if key not in present and queue and fits(queue[0], j):
                place(queue.pop(0), j)
        by_name = sorted(available, key=lambda j: cols.types[j])
        for i in queue:
            options = [j for j in by_name if fits(i, j)]
            if not options:
                break  # FIFO: nobody overtakes the head of the queue
            if self.fastest:
                place(i, max(options, key=T[i].__getitem__))
            else:
                rng = random.Random(f"{self.seed}/{cols.job_ids[i]}")
                place(i, options[rng.randrange(len(options))])
        return placed

    def _gavel_types(self, problem: Problem, cols: Columns,
                     rng: random.Random) -> dict[int, int]:
        """Agnostic FIFO as Gavel's ``FIFOPolicy`` (mode ``base``) computes it.

        Its code keeps the sorted list of types with free workers and draws a random index
        among those with room for the job, but the job gets the type a loop variable leaked:
        the *last* type of that list, room or not. The draw only decides which type leaves
        the list when the job's type fills up exactly. So jobs pile onto the alphabetically
        last type (v100 for k80/p100/v100) beyond its workers, and Gavel's mechanism then
        shares it among them in turns. This returns exactly that allocation, whole types
        asked beyond their workers included: it is the one policy output that may
        oversubscribe a type, because Gavel's rounds depend on it (scaling the type's shares
        to fit changes the deficits that break the mechanism's ties, and with them the
        rounds). ``type_choice="random"`` never oversubscribes. Running jobs keep their
        type, and a finished job's type goes to the head of the queue if it fits,
        subtracting the workers of the jobs before it in arrival order, as there. The draws
        come from ``rng``, one generator over all calls as in Gavel, so a run with Gavel's
        seed makes Gavel's choices."""
        present = {job_id: i for i, job_id in enumerate(cols.job_ids)}
        sf = cols.scale_factor
        available = dict(zip(range(len(cols.types)), cols.workers.tolist()))
        previous = list(self._held(problem, cols))
        held = {present[key]: j for key, j in previous if key in present}
        queue = [i for i in range(cols.num_jobs) if i not in held and cols.runnable[i]]
        for key, j in previous:
            if key in present:
                available[j] -= sf[present[key]]
            elif queue and sf[queue[0]] <= available[j] and cols.T[queue[0], j] > 0:
                i = queue.pop(0)
                held[i] = j
                available[j] -= sf[i]
        listed = sorted((j for j in available if available[j] > 0), key=lambda j: cols.types[j])
        while queue and listed:
            i = queue.pop(0)
            room = [k for k, j in enumerate(listed) if available[j] >= sf[i]]
            if not room:
                break
            drawn = room[rng.randrange(len(room))]
            j = listed[-1]  # Gavel's leaked loop variable, not listed[drawn]
            if cols.T[i, j] > 0:
                held[i] = j
                available[j] -= sf[i]
                if available[j] == 0:
                    listed.pop(drawn)
        return held

    @staticmethod
    def _held(problem: Problem, cols: Columns):
        """(job id, type index) of every single job with time in the last allocation, on
        its largest share, in the order the allocation lists them (arrival order)."""
        for key, row in problem.previous.items():
            if is_pair_key(key):
                continue
            shares = [row.get(t, 0.0) for t in cols.types]
            best = int(np.argmax(shares)) if shares else 0
            if shares and shares[best] > ZERO:
                yield key, best

    def _score(self, cols: Columns, z: np.ndarray) -> float:
        return float(order_objective(cols, self.rank(cols)) @ z)

    def evaluate(self, problem: Problem, allocation: Allocation) -> float | None:
        cols = build_columns(problem)
        return self._score(cols, cols.z_from(allocation))

