"""Priorities of thesis §5.5: the computed allocation X^opt divided by the time fraction each
job (or pair) has received on each type since the last re-solve.

f_mj = t_mj / sum_m' t_m'j is the fraction of type j's time that combination m received;
priority_mj = X_mj / f_mj. A combination that has received nothing on a type where X > 0
gets X * 1e9 (large, yet still ordered by X), as Gavel's mechanism does. Entries are zero
where X is zero, where the combination cannot run, and for combinations the allocation does
not cover yet (admitted after the last re-solve).
"""

from __future__ import annotations

import numpy as np

from .loops import compiled

# Priority of a combination with X > 0 that has received no time yet (Gavel: X * 1e9, so
# that 2 * p > p keeps holding, unlike infinity).
UNSERVED_SCALE = 1e9
# Priorities this close (relatively) are equal: X comes from a solver whose answers carry
# noise far above this (1e-10 between three identical jobs' 1/3), and a tie must fall to
# the deficit (selection.py), not to that noise. Without it, after each re-solve the same
# job "won" every tie and a third identical job waited until the others had finished.
RELATIVE_TIE = 1e-6


def priorities(allocation: np.ndarray, received: np.ndarray, runnable: np.ndarray,
               allocated: np.ndarray) -> np.ndarray:
    """(c, n) priorities from (c, n) X, received seconds and runnable flags, and (c,)
    ``allocated`` flags (combinations the current allocation covers)."""
    if compiled is not None:        # the same arithmetic in one compiled loop (``loops.py``),
        # which converts what is not of its types (flags: bool or uint8); one column: numpy's
        # own sum (pairwise)
        total = received.sum(axis=0) if received.shape[1] == 1 else None
        return snapped(compiled.unsnapped_priorities(allocation, received, total, runnable,
                                                     allocated, UNSERVED_SCALE))
    total = received.sum(axis=0)
    # X / f with f = received / total; f > 0 exactly when received > 0.
    with np.errstate(over="ignore", invalid="ignore"):   # a tiny received time: inf
        ratio = np.divide(total, received, out=np.full(received.shape, UNSERVED_SCALE),
                          where=received > 0)
        prio = allocation * ratio
    prio[~((allocation > 0) & runnable & allocated[:, None])] = 0.0
    return snapped(prio)


def snapped(prio: np.ndarray) -> np.ndarray:
    """Positive values (priorities, or allocations as a tie-break, ``selection.py``) moved
    onto a geometric grid of ratio 1 + RELATIVE_TIE, in place, so that values within the
    solver's noise of each other compare equal."""
    if compiled is not None:   # the gather, grid and scatter compiled; the same log and exp
        at, values = compiled.positive_values(prio)    # (a new array: computed in place)
        np.log(values, out=values)
        compiled.to_grid(values, RELATIVE_TIE)
        compiled.put_values(prio, at, np.exp(values, out=values))
        return prio
    positive = prio > 0
    grid = np.rint(np.log(prio[positive]) / RELATIVE_TIE)   # np.round's own, without its wrapper
    prio[positive] = np.exp(grid * RELATIVE_TIE)
    return prio
