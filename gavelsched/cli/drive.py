"""How ``gavelsched local-cluster`` and ``gavelsched replay`` show a schedule run against a
live scheduler (``gavelsched.client.schedule.run_schedule``): live progress on stderr, a
refused job in one line, and the simulator's summary at the end, so that a physical run
and a simulated one compare field by field (thesis §5.7: physical against simulated).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ..daemon.jobs import DONE, FAILED, FINAL as FINAL_STATES

# Submissions this far behind the schedule get a note: a second or two is the loop's own
# (it submits between polls of the status, ``schedule.POLL_S``).
LATE_NOTE_S = 5.0


def say_refused(index: int, reason: str) -> None:
    """A refused job of the schedule, one line on stderr; the run goes on."""
    sys.stderr.write(f"job {index} of the schedule refused: {reason}\n")


def report(outcome, json_out: str | None) -> int:
    """Print the summary and each job that did not finish (failed, or cancelled on
    purpose), and a note when the submissions fell more than ``LATE_NOTE_S`` behind the
    schedule; write ``--json``; exit code 1 when a job failed or was refused (a cancelled
    one is no failure of the run)."""
    print(outcome.result.summary())
    if outcome.late_s > LATE_NOTE_S:
        print(f"note: submissions fell up to {outcome.late_s:.1f} s behind the trace (your "
              f"budget of calls, user_calls_per_second, or a busy scheduler); each job's "
              f"times count from its actual arrival", file=sys.stderr)
    ended = [j for j in outcome.status.jobs
             if j.id in {r.id for r in outcome.result.jobs} and j.state != DONE]
    for job in ended:
        print(f"job {job.id} ({job.job_type}) {job.state}: {job.reason}")
    if json_out:
        Path(json_out).write_text(json.dumps(outcome.result.to_dict(), indent=1) + "\n")
    return 1 if any(j.state == FAILED for j in ended) or outcome.refused else 0


def show_progress(status: Any, submitted: int, refused: int, total: int,
                  _last: list = [""]) -> None:  # noqa: B006
    """Live progress on stderr: round, jobs submitted (and refused) of the schedule, the
    jobs others submitted meanwhile, jobs done of all the scheduler has, each job's progress
    and worker type (one line redrawn on a terminal, a new line per change otherwise)."""
    done = sum(1 for j in status.jobs if j.state == DONE)
    parts = [f"{j.id}:{j.steps_done * 100 // max(j.total_steps, 1):3d}%"
             f"{'@' + j.worker_type if j.worker_type else ''}" for j in status.jobs
             if j.state not in FINAL_STATES][:40]
    others = len(status.jobs) - submitted      # submitted from elsewhere (another shell)
    line = (f"round {status.round:3d}  submitted {submitted + refused}/{total}"
            + (f" ({refused} refused)" if refused else "")
            + (f" (+{others} from elsewhere)" if others > 0 else "")
            + f"  done {done}/{len(status.jobs)}  " + " ".join(parts))
    if sys.stderr.isatty():
        sys.stderr.write("\r" + line[:200].ljust(120))
    elif line != _last[0]:
        sys.stderr.write(line + "\n")
    _last[0] = line
    sys.stderr.flush()
