"""The scheduler's forecast process (issue #29): ``python -m simulator.forecast``.

The scheduler daemon (``gavelsched/daemon/forecast.py``) runs this as a child process and
writes it Status pictures (``StatusResponse`` frames, ``gavelsched/rpc/frames.py``) on its
stdin. Each picture is replayed in the daemon's twin (``live.state_of``, ``twin.replay``:
the placed round kept, then the simulator under the daemon's own ``DaemonRules``, thesis
§5.7) and answered on stdout with a ``StatusResponse`` that holds, per unfinished job, its
predicted start and finish on the scheduler's clock (``eta_computed_s``: the picture's
``now_s``; ``eta_error``: why there are none). A process of its own, niced below the
scheduler, so that the replay's CPU and interpreter lock never hold the core's thread,
and below the jobs (``yield_cpu``). One picture that cannot be replayed is answered with
its error; the process goes on.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gavelsched.rpc import pb
from gavelsched.rpc.frames import read_frame, write_frame

from .live import state_of
from .twin import replay

NONE = -1.0     # on the wire: no time


def forecast(reply) -> pb.StatusResponse:
    """Every unfinished job's predicted start (queued jobs) and finish, on the scheduler's
    clock, for one Status picture."""
    out = pb.StatusResponse(now_s=reply.now_s, eta_computed_s=reply.now_s)
    try:
        state = state_of(reply)
        etas = replay(state)
    except Exception as err:   # noqa: BLE001 - one picture's error is its answer
        out.eta_error = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        return out
    for job_id, eta in sorted(etas.items()):
        at = eta.on_clock(state.now_s)
        out.jobs.add(id=job_id,
                     eta_start_s=NONE if at["start_s"] is None else at["start_s"],
                     eta_finish_s=NONE if at["finish_s"] is None else at["finish_s"])
    return out


def yield_cpu(nice: int) -> str | None:
    """Lower this process's priority by ``nice`` against every process, the jobs' too.
    ``os.nice`` alone ranks it only within its autogroup: Linux groups a session's
    processes and shares the CPU fairly between groups, and the workers start each job in
    a session of its own: a replay at a round's start took a starting job half a core
    on two (issue #29). So it leaves for a session of its own and nices that group too
    (``/proc/self/autogroup``; without one, ``os.nice`` is all it takes). Returns why the
    group could not be niced (None: it was, or there is none)."""
    if nice <= 0:
        return None
    os.nice(nice)
    try:
        os.setsid()
    except OSError:         # (a session leader already)
        pass
    group = Path("/proc/self/autogroup")
    if not group.exists():  # not Linux, or autogroups turned off
        return None
    try:
        group.write_text(str(min(nice, 19)))
    except OSError as err:
        return err.strerror or str(err)
    return None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m simulator.forecast",
                                description="Replay the scheduler's Status pictures read "
                                            "from stdin; write each job's ETA to stdout "
                                            "(length-prefixed StatusResponse frames).")
    p.add_argument("--nice", type=int, default=10, help="lower this process's priority by N")
    args = p.parse_args(argv)
    refused = yield_cpu(args.nice)
    if refused:     # (the scheduler's log: its jobs may share the CPU with the replays)
        print(f"simulator.forecast: its autogroup kept its priority ({refused}): jobs "
              f"share the CPU with the replays", file=sys.stderr, flush=True)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while (data := read_frame(stdin)) is not None:
        reply = pb.StatusResponse()
        reply.ParseFromString(data)
        write_frame(stdout, forecast(reply))
    return 0


if __name__ == "__main__":
    sys.exit(main())
