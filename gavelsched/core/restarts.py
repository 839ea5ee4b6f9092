"""Restart-aware rounds: a run is held on its GPUs until its restart has paid (issue #32).

Gavel's mechanism (thesis §5.5) re-deals every round by priority and ignores what a move
costs: a job preempted or moved checkpoints and starts up again (§5.6), which the thesis
prices at a few seconds against 6-minute rounds (§5.7: "preemption overhead"). At short
rounds with start-ups of minutes, that thrash eats the cluster: a run whose restart takes
longer than a round is preempted before it makes a step, round after round.

The rule, *tenure*, shared by both executors through the core:

- each job has a restart cost ``c`` (``JobSpec.restart_s``: start-up plus checkpoint, as
  the daemon measures them or a trace declares them; a pair pays the larger of its two);
- a fresh run (a task that did not extend last round's lease) keeps its workers, at the
  top of its type's queue, until it has held them ``2c``: its restart is done and it has
  stepped at least as long. A start-up longer than a round goes on into the next one,
  where its lease is extended (the simulator carries what is left of it; the daemon runs
  it past the round's end). So a run that gets GPUs always makes progress;
- after that, until it has held them ``c / restart_share`` (its *tenure*: its restart is
  then at most ``restart_share`` of the run), it is *preferred* in its column: its
  priority there counts twice (``mechanism.planner.PREFERENCE``). Rotation among jobs at
  their due shares waits for the tenure's end, but a job owed more than twice as much, or
  one that never ran (priority X / 0), still gets in: a burst of short arrivals is not
  stuck behind long runs;
- a run whose job would end within ``finish_restarts`` restarts (its steps left at the
  run's rate take at most ``finish_restarts x c``) keeps its workers to the end:
  preempting it would cost its job another restart, a large share of what it has left,
  and delay the job that is closest to done, which raises the mean JCT most (the
  shortest-remaining-time argument). The hold is bounded by the same ``finish_restarts x
  c``.

Then the round's priorities decide again, as in Gavel. A run ends earlier only when its
job ends or a worker it holds goes down.

Two more parts keep re-solves from undoing the holds:

- received times go back to the seed at the first re-solve after Gavel's interval
  (``min_resolve_interval_s``, 1,920 s), not at every re-solve: Gavel resets them at
  each of its re-solves, which it makes at most that often (§5.3); re-solves that follow
  every arrival and completion (``resolving``) would reset them every round or two, so
  that a job that just ran and one that waited look alike and the runs are dealt afresh.
  Over a period as long as Gavel's, ``X / f`` remembers who had the time, and no longer:
  a job that arrives waits for one that ran before it at most what that one received in
  the period, as under Gavel, where an arrival waits for the next re-solve;
- the policy's allocation is re-arranged so that runs keep their columns and few jobs are
  spread over several types, every job keeping at least its effective throughput
  (``policies/moves.py``; for the policies whose objective reads nothing else,
  ``Traits.rearrangeable``).

On the Sia-like mix (BENCHMARKS.md) these take restarts at 60 s rounds from 1.42x to
1.25x the free run's mean JCT (rigid jobs, the daemon's re-solves).

Fairness: the rule changes *when* a job gets its time, never how much is owed. The time a
held run gets counts as received time, so its priority X / f falls while it holds, and
the jobs that wait gain priority (and deficit) by the same accounting; max-min's time
sharing goes on, at the grain of tenures instead of rounds. No job starves: every hold is
finite (``2c``, a tenure, or ``finish_restarts x c``), and once it ends the
waiting job of highest priority is first in its queue.

The policy sees restarts as well: a job's throughputs in the ``Problem`` are scaled by its
*restart efficiency* at the round length, the share of a run's time left for training when
the run is preempted at its first chance (a run of a round, or its tenure); Sia (SOSP'23
§3.3) prices a restart into a configuration's goodput the same way. The factor is one per
job, so max-min fairness (normalised per job) is unchanged by it; throughput, makespan and
cost policies prefer the jobs that restart cheaply.

``CoreConfig.restart_rule = "gavel"`` turns all of this off (Gavel's semantics), and so
does a cluster whose restarts are all free: its jobs are scheduled as under Gavel's rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

RESTART_RULES = ("tenure", "gavel")


def tenure_s(restart_s: float, restart_share: float) -> float:
    """How long a fresh run is kept or preferred before its priority counts as any
    other's: the restart over the share of the run it may take (0 for a free restart)."""
    return restart_s / restart_share if restart_s > 0 else 0.0


def efficiency(restart_s: float, round_seconds: float, restart_share: float) -> float:
    """The share of a run's time left for training when it is preempted as its rotation
    goes: at its tenure's end, or after a round when that is longer."""
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
        self._resumed: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self._runs)

    def state(self) -> dict[str, tuple[str, float]]:
        """The runs going on: key -> (column, seconds held), for another core to resume."""
        return dict(self._runs)

    def resume(self, runs: Mapping[str, tuple[str, float]]) -> None:
        """Go on with another core's runs (``PeriodState.runs``). This core never placed
        them, so its next round cannot tell an extended lease: a resumed run kept on its
        column goes on."""
        self._runs = {key: (str(column), float(held)) for key, (column, held) in runs.items()}
        self._resumed = frozenset(self._runs)

    def ended_round(self, batch, seconds: np.ndarray) -> None:
        """Round ``batch`` ended, each task having held its workers ``seconds[i]``."""
        runs, old, resumed = {}, self._runs, self._resumed
        columns = batch.types
        for key, j, extended, held in zip(batch.keys, batch.type_index.tolist(),
                                          batch.extended.tolist(), seconds.tolist()):
            column = columns[j]
            before = old.get(key)
            go_on = (extended or key in resumed) and before is not None and before[0] == column
            runs[key] = (column, (before[1] if go_on else 0.0) + float(held))
        self._runs, self._resumed = runs, frozenset()

    def columns(self) -> dict[str, str]:
        """The column each run going on holds, by combination key."""
        return {key: column for key, (column, _) in self._runs.items()}

    def drop(self, key: str) -> None:
        self._runs.pop(key, None)

    def holds(self, rows, columns: Sequence[str], jobs: Mapping, config,
              uncredited: Mapping[str, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(pinned, preferred), each (c,) over the combinations of ``rows`` (the core's
        ``Rows``): the column each must keep this round, and the one where it is preferred
        (-1: none), by the rule of the module docstring. A run is pinned while it has held
        its workers less than twice its restart, or while its job would end within
        ``finish_restarts`` restarts at the run's rate (a pair: when the later of its two
        would); preferred while it has held them less than its tenure. A pair's restart
        is the larger of its jobs' (``jobs``: job id -> state with a ``spec``).
        ``config``: the ``CoreConfig``. ``uncredited``: steps per job made but not credited
        yet (a daemon plans before its runs' checkpoints report them; the simulator has
        credited them): a job's steps left are net of them, so both judge alike."""
        pinned = np.full(len(rows), -1, dtype=np.int64)
        preferred = pinned.copy()
        column_index = {c: j for j, c in enumerate(columns)}
        found = [(r, j, held) for r, j, held in
                 ((rows.index.get(key), column_index.get(name), held)
                  for key, (name, held) in self._runs.items())
                 if r is not None and j is not None and held > 0.0]
        if not found:
            return pinned, preferred
        r, j, held = (np.array(x) for x in zip(*found))
        restart = np.array([max(jobs[m].spec.restart_s for m in rows.members[i])
                            for i in r.tolist()])
        costly = restart > 0.0
        left = rows.left
        if uncredited:
            left = left.copy()
            for job_id, steps in uncredited.items():
                at = rows.index.get(job_id)
                if at is not None:
                    left[at] = max(0.0, left[at] - steps)
        pin = costly & ((held < 2.0 * restart)
                        | (_left_s(rows, r, j, left) <= config.finish_restarts * restart))
        prefer = costly & ~pin & (held < restart / config.restart_share)
        pinned[r[pin]] = j[pin]
        preferred[r[prefer]] = j[prefer]
        return pinned, preferred


def _left_s(rows, r: np.ndarray, j: np.ndarray, left: np.ndarray) -> np.ndarray:
    """Seconds until each combination ``r`` of ``rows`` ends on its column ``j`` at its
    rates there: its job's steps ``left`` (by job row) over its steps/s (a pair: the later
    of its two; inf where a member makes no progress)."""
    members = rows.member_rows[r]                               # (k, 2), -1: none
    has = members >= 0
    left = np.where(has, left[np.maximum(members, 0)], 0.0)
    rate = rows.rate[r, j]                                      # (k, 2)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):   # (inf: endless)
        seconds = np.where(rate > 0, left / rate, np.inf)
    return np.where(has, seconds, 0.0).max(axis=1)


def reprice(restart_s: Mapping[str, float], arrivals, jobs: Mapping, rows) -> None:
    """What a restart costs each job of these job types now (``SchedulerCore.
    set_restart_costs``): the waiting jobs' specs and the admitted ones' (and their rows'
    planned numbers) take it; only the specs that change are replaced."""
    def priced(spec):
        cost = restart_s.get(spec.job_type)
        return None if cost in (None, spec.restart_s) else replace(spec, restart_s=float(cost))

    arrivals.update_each(priced)
    for job_id, job in jobs.items():   # (every plan of a daemon: only the changed)
        if (spec := priced(job.spec)) is not None:
            job.spec = spec
            rows.set_planned(job_id, spec.planned)
