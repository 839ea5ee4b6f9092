"""``predict``'s replays (issue #29): a live scheduler's state replayed in the simulator
(``simulator/twin.py``) without and with a hypothetical job (``live.hypothetical``), and
why a job finishes sooner with it (``why_sooner``)."""

from __future__ import annotations

from collections.abc import Sequence

from .live import LiveJob, LiveState
from .twin import Eta, core_of, replay, replay_inputs, this_round

__all__ = ["predict", "why_sooner"]


def predict(state: LiveState, job: LiveJob) -> tuple[dict[str, Eta], dict[str, Eta]]:
    """``predict``: (every job's ETA without ``job``, every job's ETA with it)."""
    return replay(state), replay(state, [job])


def why_sooner(state: LiveState, job: LiveJob, job_id: str) -> str:
    """Why live job ``job_id`` finishes sooner in the replay with ``job`` than without
    (``predict``): the policy's first allocation gives it more effective throughput
    (thesis §5.2: its steps/s weighted by its time fraction on each type), or, with no
    more throughput then, the later re-solves and the round-by-round priorities (§5.5)
    give it its turns sooner."""
    before, after = (_effective(state, extra).get(job_id, 0.0) for extra in ((), (job,)))
    if after > before * 1.001:
        return (f"the policy gives it more throughput with the new job ({before:.3g} -> "
                f"{after:.3g} steps/s at the first re-solve)")
    return (f"the replay's later re-solves and round-by-round priorities give it its turns "
            f"sooner with the new job, though its first allocation is no larger ({before:.3g}"
            f" -> {after:.3g} steps/s)")


def _effective(state: LiveState, extra: Sequence[LiveJob]) -> dict[str, float]:
    """Each job's effective throughput under the policy's allocation for the replay's
    first round (the placed round kept, as ``replay`` starts)."""
    later, _, _, _ = this_round(state)
    inputs = replay_inputs(later, extra)
    if not inputs.trace:
        return {}
    core = core_of(state, inputs)
    state.rules.driver(core).plan(0.0)
    allocation = core.allocation.allocation if core.allocation is not None else {}
    return {inputs.ids[int(key)]: sum(x * inputs.trace[int(key)].throughputs.get(t, 0.0)
                                      for t, x in row.items())
            for key, row in allocation.items() if key.isdigit()}
