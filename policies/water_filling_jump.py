"""The jump's search (``WaterFilling._jump``, thesis §5.4.3): the last of water filling's
cap events that the cluster can still hold, found with as few LPs as the LPs' own prices
allow.

Each LP of the search is solved at one event state (every job's floor). Its duals are
prices: ``p`` for each capacity row (a type's workers, an entity's GPU cap) and, for each
job, ``lam`` for its level row and ``mu`` for its time row (constraint (5.2)). Weak LP
duality turns them into a proof that other floors are infeasible, at the cost of one pass
over the jobs (``Refutation``): any allocation meeting floors ``L`` pays, at prices ``p``,
at most what the capacity rows are worth (``p @ b``), and at least what each job must pay
to reach its floor alone with its time at most 1, which is at least ``lam*L - mu`` whenever
``lam*U_c - mu <= cost_c`` on each of the job's columns ``c``. So if those job-by-job lower
bounds sum past ``p @ b``, no allocation meets ``L``. The event states only rise, so one
refutation covers every later state, and a bisection over the states finds the first it
covers without an LP.

The prices of an LP that the cluster bound refute the states from just past the true
boundary on (on the 20-team plan of benchmarks/policy_scale.py, the first state they
refute was the first infeasible one or two past it), so the search probes the state just
before the first refuted one next. An LP bound only by some job's own cap has no capacity
prices and refutes nothing; the search then gallops and bisects as it would without
prices. A refutation is only ever a proof of infeasibility, so the state the search
returns is one an LP found feasible, as before.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ._lazy import sp

# A refutation must clear this fraction of the prices' scale (solver and rounding noise).
REFUTE_TOL = 1e-9
# A column this close to its job's cap (relative) counts as at the cap (``at_cap``).
NEAR_CAP = 1e-6
# The gallop's factor: probes 1, 5, 21, ... until one fails or is refuted.
GALLOP = 4
# Guesses in a row that may fail (each refuting more than itself) before the search bisects.
GUESSES = 3


class Refutation:
    """From one LP's duals, a test that floors are infeasible (module docstring). The LP's
    rows are laid out as ``fairness.max_min_rows`` and ``water_filling_caps.with_caps``
    lay them out: ``k`` level rows, ``k`` time rows, then the capacity rows, whose
    matrix (rows x columns) is ``capacity`` and right-hand side ``limit``. Every column is
    one job's (``owner``), where it makes ``rate`` of that job's normalised throughput;
    ``cap``: each job's highest rate."""

    def __init__(self, dual: np.ndarray, capacity: sp.csc_matrix, limit: np.ndarray,
                 rate: np.ndarray, owner: np.ndarray, cap: np.ndarray) -> None:
        k = cap.size
        p = np.maximum(dual[2 * k:], 0.0)
        cost = capacity.T @ p                       # what each column pays at prices p
        lam = np.maximum(dual[:k], 0.0)
        mu = np.maximum(dual[k:2 * k], 0.0)
        np.maximum.at(mu, owner, lam[owner] * rate - cost)  # dual feasible on every column
        self.bounds = [(lam, mu), at_cap(rate, cost, owner, cap)]
        self.budget = float(p @ limit)

    def __call__(self, floor: np.ndarray) -> bool:
        """True when no allocation meets ``floor``."""
        need = np.zeros(floor.size)
        for lam, mu in self.bounds:
            np.maximum(need, lam * floor - mu, out=need)
        total = float(need.sum())
        return total - self.budget > REFUTE_TOL * (total + self.budget)


def at_cap(rate: np.ndarray, cost: np.ndarray, owner: np.ndarray,
           cap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-job prices (lam, mu) whose bound ``lam*L - mu`` is exact at the job's own cap:
    there it needs full time on a column at the cap, the cheapest of which costs ``top``;
    ``lam`` is the smallest slope that keeps ``lam*rate - mu <= cost`` on the slower
    columns, and at least ``top / cap`` (so ``mu >= 0``). Columns within ``NEAR_CAP`` of the
    cap count among the fastest (the bound stays valid, a little weaker): a slope over a
    near tie would be so steep that rounding ate the bound. Every job has a column."""
    fastest = rate >= cap[owner] * (1 - NEAR_CAP)
    top = np.full(cap.size, np.inf)
    np.minimum.at(top, owner[fastest], cost[fastest])
    slope = top / cap
    slower = ~fastest
    np.maximum.at(slope, owner[slower], (top[owner] - cost)[slower]
                  / (cap[owner] - rate)[slower])
    return slope, slope * cap - top


def last_feasible(probe: Callable[[int], tuple[bool, Refutation | None]],
                  refuted: Callable[[int, Refutation], bool]) -> int:
    """The last event state that ``probe`` (an LP) finds feasible; 0 when even event 1 is
    not (event 0 is the step's own end, feasible already).

    ``probe(j)`` says whether state j is feasible, with a ``Refutation`` from its LP's
    prices (None without them); ``refuted(j, r)`` applies ``r`` to state j (a state past
    the last event is refuted: there is nothing to jump to). Without refutations: a gallop
    (1, 5, 21, ...) then a bisection. After a refutation lowers the first infeasible state
    known, the state just before it is probed (a guess); after ``GUESSES`` failed guesses
    in a row the next probe bisects, so loose refutations cost a few LPs per halving at
    most."""
    good, bad, j, guessed, misses = 0, None, 1, False, 0
    while True:
        feasible, refutation = probe(j)
        if feasible:
            good = j
        elif bad is None or j < bad:
            bad = j
        lowered = False
        if refutation is not None:
            at = first_refuted(refutation, refuted, good + 1,
                               bad if bad is not None else GALLOP * j + 2)  # past the next probe
            if at is not None and (bad is None or at < bad):
                bad, lowered = at, True
        if bad is not None and bad - good <= 1:
            return good
        misses = misses + 1 if guessed and not feasible else 0
        if bad is None:
            j, guessed = GALLOP * j + 1, False
        elif lowered and misses < GUESSES:
            j, guessed = bad - 1, True
        else:
            j, guessed = (good + bad) // 2, False


def first_refuted(refutation: Refutation, refuted: Callable[[int, Refutation], bool],
                  lo: int, hi: int) -> int | None:
    """The first state in [lo, hi) that ``refutation`` proves infeasible, None if none
    (states only rise, so the ones it refutes are a suffix). A gallop up from ``lo``, then
    a bisection: the states, made one event at a time, are made only as far as needed."""
    step, below = 1, lo - 1             # every state up to ``below`` is not refuted
    while True:
        at = min(below + step, hi - 1)
        if at <= below:
            return None
        if refuted(at, refutation):
            break
        below, step = at, 2 * step
    while at - below > 1:               # refuted at ``at``: find the first
        mid = (below + at) // 2
        if refuted(mid, refutation):
            at = mid
        else:
            below = mid
    return at
