"""The simulator: a virtual-clock executor over the scheduler core, with metrics, plots
and sweeps (docs/design.md, The flow)."""

from .config import SimConfig
from .engine import SimulationError, make_policy, simulate
from .prices import PriceTrace, PriceTraceError
from .result import JobRecord, SimulationResult, Timeline

__all__ = [
    "JobRecord", "PriceTrace", "PriceTraceError", "SimConfig", "SimulationError",
    "SimulationResult", "Timeline", "make_policy", "simulate",
]
