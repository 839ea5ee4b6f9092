"""Predicted start and finish of the scheduler's jobs (issue #18), as ``status --eta`` and
``predict`` print them. The replay itself is the simulator's (``simulator/twin.py``, over
``simulator/live.py``'s records); this module only formats its answers. The other names are
re-exported for the CLI's call sites."""

from __future__ import annotations

from collections.abc import Mapping

from simulator.live import NEW_ID, LiveJob, LiveState, hypothetical, state_of
from simulator.twin import Eta, predict, replay, replay_inputs, this_round

from .jobviews import clock, date

__all__ = ["NEW_ID", "Eta", "LiveJob", "LiveState", "eta_dict", "eta_lines", "hypothetical",
           "predict", "replay", "replay_inputs", "state_of", "this_round", "wall"]


def wall(state: LiveState, seconds: float | None) -> str:
    """Seconds from now as a local date and ``+HH:MM:SS``; ``-`` for none."""
    if seconds is None:
        return "-"
    return f"{date(state.epoch_unix, state.now_s + seconds)} (+{clock(seconds)})"


def eta_lines(state: LiveState, etas: Mapping[str, Eta]) -> list[str]:
    """The table ``status --eta`` prints below the status table."""
    w = max([2, *(len(j.id) for j in state.jobs)])
    lines = [f"predicted (replayed in the simulator, policy {state.policy}):",
             f"{'id':>{w}} {'start':<32} finish"]
    for job in state.jobs:
        eta = etas.get(job.id, Eta(None, None))
        start = "started" if job.started_s is not None else wall(state, eta.start_s)
        lines.append(f"{job.id:>{w}} {start:<32} {wall(state, eta.finish_s)}")
    return lines


def eta_dict(state: LiveState, etas: Mapping[str, Eta]) -> dict[str, dict]:
    """Per job: predicted start and finish on the scheduler's clock (null: none/started)."""
    return {job_id: e.on_clock(state.now_s) for job_id, e in etas.items()}
