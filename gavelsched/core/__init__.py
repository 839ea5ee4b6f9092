"""The scheduler core: an event-driven state machine that never reads a clock.

``SchedulerCore(policy, view, throughputs, config)`` takes events with the time as an
argument and hands back ``Round`` plans; executors (the simulator, the daemon) run them and
report progress with ``end_round``.
"""

from .config import CoreConfig
from .core import CoreError, SchedulerCore
from .records import (
                      JobSpec,
                      MicroTask,
                      Period,
                      PeriodState,
                      Report,
                      Round,
                      RoundOutcome,
                      RoundReport,
                      TaskBatch,
                      ThroughputSource,
)
from .solving import Solve

__all__ = [
    "CoreConfig", "CoreError", "JobSpec", "MicroTask", "Period", "PeriodState", "Report", "Round",
    "RoundOutcome", "RoundReport", "SchedulerCore", "Solve", "TaskBatch", "ThroughputSource",
]
