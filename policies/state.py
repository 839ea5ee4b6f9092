"""Random generators that last across solves, carried as data (``Problem.policy_state``).

Gavel's FIFO and Gandiva policies each draw from one ``random.Random(seed)`` for a whole
run. Ours stay pure functions: a solve starts from the generator state handed back with the
previous allocation (``Allocation.policy_state["rng"]``, JSON data) and hands the new one
back, so a run with Gavel's seed makes Gavel's draws.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from .errors import ProblemError


def seeded_generator(seed: int, policy_state: Mapping[str, Any]) -> random.Random:
    """``random.Random(seed)``, or the generator saved in ``policy_state["rng"]``."""
    rng = random.Random(seed)
    saved = policy_state.get("rng")
    if saved is not None:
        try:
            version, internal, gauss_next = saved
            rng.setstate((version, tuple(internal), gauss_next))
        except (TypeError, ValueError, OverflowError) as err:
            raise ProblemError(f"policy_state.rng: not a random generator state ({err})") \
                from None
    return rng


def generator_state(rng: random.Random) -> list:
    """``rng``'s state as JSON data: [version, [625 ints], gauss_next]."""
    version, internal, gauss_next = rng.getstate()
    return [version, list(internal), gauss_next]
