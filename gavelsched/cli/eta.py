"""Predicted start and finish of the scheduler's jobs, as ``status --eta`` and ``predict``
print them. ``status --eta`` shows what the scheduler computed itself (issue #29:
``gavelsched/daemon/forecast.py``; ``jobviews.eta_lines``); ``predict`` replays the live
state with a job added, here (``simulator/twin.py``, over ``simulator/live.py``'s
records). This module only formats the replay's answers. The other names are re-exported for the CLI's call sites."""

from __future__ import annotations

from collections.abc import Mapping

from simulator.live import NEW_ID, LiveJob, LiveState, hypothetical, state_of
from simulator.twin import Eta, replay, replay_inputs, this_round
from simulator.whatif import predict

from .jobviews import clock, date

__all__ = ["NEW_ID", "Eta", "LiveJob", "LiveState", "eta_dict", "hypothetical",
           "predict", "replay", "replay_inputs", "state_of", "this_round", "wall"]


def wall(state: LiveState, seconds: float | None) -> str:
    """Seconds from now as a local date and ``+HH:MM:SS``; ``-`` for none."""
    if seconds is None:
        return "-"
    return f"{date(state.epoch_unix, state.now_s + seconds)} (+{clock(seconds)})"


def eta_dict(state: LiveState, etas: Mapping[str, Eta]) -> dict[str, dict]:
    """Per job: predicted start and finish on the scheduler's clock (null: none/started)."""
    return {job_id: e.on_clock(state.now_s) for job_id, e in etas.items()}
