"""Per-type prices that change over time (thesis chapter 6): ``PriceTrace`` lives in
``traces/prices.py``, where the scheduler daemon may read it too; this module re-exports
it for the simulator's callers."""

from __future__ import annotations

from traces.prices import PriceTrace, PriceTraceError

__all__ = ["PriceTrace", "PriceTraceError"]
