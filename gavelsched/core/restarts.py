"""Restart-aware rounds: a run keeps its GPUs until its restart has paid (issue #32).

Gavel's mechanism (thesis §5.5) re-deals every round by priority and ignores what a move
costs: a job preempted or moved checkpoints and starts up again (§5.6), which the thesis
prices at a few seconds against 6-minute rounds (§5.7: "preemption overhead"). At short
rounds with start-ups of minutes, that thrash eats the cluster: a run whose restart takes
longer than a round is preempted before it makes a step, round after round.

The rule, *tenure*, shared by both executors through the core:

- each job has a restart cost ``c`` (``JobSpec.restart_s``: start-up plus checkpoint, as
  the daemon measures them or a trace declares them; a pair pays the larger of its two);
- a fresh run (a task that did not extend last round's lease) keeps its workers, at the
  top of its type's queue, until it has held them ``c / restart_share`` seconds, so that
  its restart is at most ``restart_share`` of the time it holds them. Then the round's
  priorities decide again, as in Gavel. It ends earlier only when its job ends or a worker
  it holds goes down;
- a run makes progress whenever it gets GPUs: its tenure covers its restart and at least
  as long again (``restart_share`` <= 1/2), and a start-up longer than a round goes on
  into the next one, where its lease is extended (the simulator carries what is left of it;
  the daemon runs it past the round's end).

Fairness: the rule changes *when* a job gets its time, never how much is owed. The time a
tenured run holds counts as received time, so its priority X / f falls while it holds, and
the jobs that wait gain priority (and deficit) by the same accounting; max-min's time
sharing goes on, at the grain of tenures instead of rounds. No job starves: a tenure is
finite, and once it ends the waiting job of highest priority is first in its queue.

The policy sees restarts as well: a job's throughputs in the ``Problem`` are scaled by its
*restart efficiency* at the round length, the share of a run's time left for training when
the run is preempted at its first chance (a run of a round, or its tenure); Sia (SOSP'23
§3.3) prices a restart into a configuration's goodput the same way. The factor is one per
job, so max-min fairness (normalised per job) is unchanged by it; throughput, makespan and
cost policies prefer the jobs that restart cheaply.

``CoreConfig.restart_rule = "gavel"`` turns all of this off (Gavel's semantics).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

RESTART_RULES = ("tenure", "gavel")


def tenure_s(restart_s: float, restart_share: float) -> float:
    """How long a fresh run holds its workers before its priority counts again: the
    restart over the share of the run it may take (0 for a free restart)."""
    return restart_s / restart_share if restart_s > 0 else 0.0


def efficiency(restart_s: float, round_seconds: float, restart_share: float) -> float:
    """The share of a run's time left for training when it is preempted as early as the
    rule lets it be: after a round, or after its tenure when that is longer."""
    if restart_s <= 0:
        return 1.0
    held = max(round_seconds, tenure_s(restart_s, restart_share))
    return max(0.0, 1.0 - restart_s / held)


class Runs:
    """The runs going on, for the tenure rule: each combination key that ran last round
    -> (the column it ran on, by name; the seconds its run has held its workers). A task
    that extended its lease goes on with its run; any other task starts a fresh one; a
    key that did not run has none."""

    def __init__(self) -> None:
        self._runs: dict[str, tuple[str, float]] = {}

    def __bool__(self) -> bool:
        return bool(self._runs)

    def ended_round(self, batch, seconds: np.ndarray) -> None:
        """Round ``batch`` ended, each task having held its workers ``seconds[i]``."""
        runs, old = {}, self._runs
        columns = batch.types
        for key, j, extended, held in zip(batch.keys, batch.type_index.tolist(),
                                          batch.extended.tolist(), seconds.tolist()):
            column = columns[j]
            before = old.get(key)
            go_on = extended and before is not None and before[0] == column
            runs[key] = (column, (before[1] if go_on else 0.0) + float(held))
        self._runs = runs

    def drop(self, key: str) -> None:
        self._runs.pop(key, None)

    def pinned(self, keys: Sequence[str], members: Sequence[Sequence[str]],
               columns: Sequence[str], jobs: Mapping, restart_share: float) -> np.ndarray:
        """(c,) the column each combination of ``keys`` must keep this round (-1: none):
        the one it ran on last round, while its run has held its workers for more than
        nothing but less than its tenure. A pair's restart is the larger of its jobs'
        (``jobs``: job id -> state with a ``spec``)."""
        out = np.full(len(keys), -1, dtype=np.int64)
        column_index = {c: j for j, c in enumerate(columns)}
        for i, (key, ids) in enumerate(zip(keys, members)):
            run = self._runs.get(key)
            if run is None or run[0] not in column_index:
                continue
            restart = max(jobs[m].spec.restart_s for m in ids)
            if 0.0 < run[1] < tenure_s(restart, restart_share):
                out[i] = column_index[run[0]]
        return out
