"""When a stale allocation may be re-solved (thesis §5.3: reset events; §5.7.4: solve times).

A reset event (arrival, completion, worker join or loss, price change, new measured
throughputs) marks the allocation stale; it is re-solved at a round boundary once that is
allowed. New throughputs are one only past noise (``within_noise``: ``MIN_CHANGE``, 10%).
``CoreConfig.resolve`` names the rule:

- ``"gavel"``: at most once every ``min_resolve_interval_s`` (Gavel's
  ``minimum_time_between_allocation_resets``, 1,920 s), because Gavel's solves took
  minutes at scale (§5.7.4, Figure 5.14). Replays that must match Gavel use it.
- ``"responsive"``: at the next boundary after any event while the last solve was
  *cheap*: its ``Allocation.solve_s`` was under ``cheap_solve_fraction`` of a round
  (default 10%: a third of the daemon's default plan lead, in which the next round is
  planned). An expensive last solve falls back to Gavel's interval until a cheap one; a
  solve the policy refused counts with the time it took (``solving.Failed``), so a
  failure as long as an expensive solve is not retried at every round.

A re-solve at time 0 never starts the interval (Gavel's ``last_reset_time == 0``), and a
forced one (``SchedulerCore.force_resolve``) ignores it. The core never reads a clock: the
solve time is the policy's own measurement, carried on its ``Allocation``.

An interval has passed ``JITTER_SHARE`` of a round early (``interval_passed``): the daemon
plans each round within milliseconds of its schedule, and with an interval of a whole
number of rounds (``local-cluster``'s is one round) those milliseconds decided whether a
period ended at a plan, where the simulator's exact clock always said the same. The two
then dealt the round differently (issue #29).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

RESOLVE_MODES = ("gavel", "responsive")
# A relative change of a job's steps/s on a type worth a re-solve (thesis §5.3.3: online
# throughputs are a reset event); a smaller one is noise.
MIN_CHANGE = 0.10
# An interval counts as passed this share of a round before its exact end (module docstring).
JITTER_SHARE = 0.05


def interval_passed(config, now: float, since: float) -> bool:
    """``min_resolve_interval_s`` has passed from ``since`` to ``now``, up to a clock's
    jitter (``JITTER_SHARE`` of a round)."""
    return now - since >= _interval(config)


def _interval(config) -> float:
    return config.min_resolve_interval_s - JITTER_SHARE * config.round_seconds


def cheap(config, last_solve_s: float | None) -> bool:
    """The last solve (None: none yet) took under ``cheap_solve_fraction`` of a round."""
    return (last_solve_s is None
            or last_solve_s < config.cheap_solve_fraction * config.round_seconds)


def waives_interval(config, last_resolve_s: float, last_solve_s: float | None,
                    forced: bool) -> bool:
    """A stale allocation may be re-solved now, whatever the interval."""
    return (forced or last_resolve_s == 0.0
            or (config.resolve == "responsive" and cheap(config, last_solve_s)))


def allowed(config, now: float, last_resolve_s: float, last_solve_s: float | None,
            forced: bool) -> bool:
    """A stale allocation may be re-solved at the boundary at ``now``."""
    return (waives_interval(config, last_resolve_s, last_solve_s, forced)
            or interval_passed(config, now, last_resolve_s))


def due(config, now: float, stale: bool, has_jobs: bool, last_resolve_s: float,
        last_solve_s: float | None, forced: bool) -> bool:
    """A re-solve is due at the boundary at ``now``: the allocation is stale (or, with jobs,
    ``resolve_period_s`` has passed since the last) and the rule allows one."""
    periodic = (config.resolve_period_s is not None and has_jobs
                and now - last_resolve_s >= config.resolve_period_s)
    return (stale or periodic) and allowed(config, now, last_resolve_s, last_solve_s, forced)


def next_allowed_s(config, last_resolve_s: float, last_solve_s: float | None,
                   forced: bool) -> float:
    """The earliest time a re-solve is allowed (-inf: at the next boundary)."""
    if waives_interval(config, last_resolve_s, last_solve_s, forced):
        return -math.inf
    return last_resolve_s + _interval(config)


def within_noise(new: Sequence[float], old: Sequence[float]) -> bool:
    """Every value of ``new`` within ``MIN_CHANGE`` (relative) of its ``old`` one: not worth
    a re-solve."""
    return all(abs(v - o) <= MIN_CHANGE * max(o, 1e-9) for v, o in zip(new, old))
