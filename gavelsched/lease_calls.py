"""The job's calls to the scheduler (IteratorToScheduler: InitJob, RenewLease, ReportSteps),
with their timeouts and retries, for ``GavelIterator`` (thesis §5.6).

What each failure means to the run is decided here, in one place: an InitJob not reached is
tried again; a renewal refused as busy, or that did not reach the scheduler, comes back as a
reply of its own (``BUSY_REPLY``, ``NOT_REACHED``) for the iterator to ask again, and one
with no answer within its deadline (``RENEW_TIMEOUT_S``) as "not renewed"; a ReportSteps not
reached leaves the count to the worker's round report.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any

from gavelsched.jobenv import JobContext, JobFailed, SchedulerUnreachable

log = logging.getLogger(__name__)

RPC_TIMEOUT_S = 10.0
INIT_RETRY_S = 30.0
# An InitJob that did not reach the scheduler is tried again after a pause that doubles from
# the first to the last, each drawn at 50-150%: thousands of runs that start together, as
# a round's do, must not all come back at the same instant (issue #30, 4,096 GPUs).
INIT_PAUSES_S = (0.5, 4.0)

# A renewal's deadline. It is longer than the other calls': a run whose lease ends before
# the answer comes saves its checkpoint and then waits for it (``GavelIterator``), so a
# scheduler slow to answer (a process-wide stall of 10-18 s at 2,048 GPUs x 50,000 jobs)
# still keeps the run it planned to keep, in the same process; with 10 s, thousands of
# renewals a run were read as "not renewed" and ended such runs, each then launched again
# (issue #30). Waiting on the call already sent asks nothing more of a slow scheduler.
RENEW_TIMEOUT_S = 20.0
# What ``SchedulerCalls.renewed`` gives for a RenewLease the scheduler was too busy to
# take (the iterator asks it again, ``iterator.RENEW_PAUSES_S``), and for one that did not
# reach it (a scheduler down or restarting).
BUSY_REPLY = object()
NOT_REACHED = object()
# A renewal that did not reach the scheduler, or that it was too busy to take at the lease's
# end, is asked again after the lease's checkpoint, and again after pauses
# (``INIT_PAUSES_S``) for up to this long: a scheduler back from a restart within it still
# keeps the run. One gone for good ends the run this much later.
RENEW_AGAIN_S = 10.0
# ... but a scheduler that refuses it as busy is asked at most this many times after the
# checkpoint: it is up and overloaded, and each ask adds to its load, so a run's calls
# after its checkpoint stay bounded whatever the load (issue #30: at 2,048 GPUs x 50,000
# jobs, most refusals come while leases last; BENCHMARKS.md, "A busy scheduler is asked
# again at most twice after the checkpoint").
RENEW_BUSY_ASKS = 2


class SchedulerCalls:
    """The iterator's three calls (IteratorToScheduler), with timeouts."""

    def __init__(self, ctx: JobContext) -> None:
        from gavelsched.rpc import pb, pb_grpc
        from gavelsched.rpc.security import SecurityError, channel, read_token

        try:
            token = ctx.job_token or read_token(ctx.token_file)
            self._channel = channel(ctx.scheduler, token=token, ca=ctx.tls_ca)
        except SecurityError as err:
            raise JobFailed(str(err)) from None
        self._stub = pb_grpc.IteratorToSchedulerStub(self._channel)
        self._pb = pb
        self._ctx = ctx

    def init(self) -> Any:
        import grpc

        from gavelsched.rpc.codes import UNREACHED

        request = self._pb.InitJobRequest(job_id=self._ctx.job_id, round=self._ctx.round,
                                          rank=self._ctx.rank, server_id=self._ctx.server_id,
                                          generation=self._ctx.generation)
        deadline = time.monotonic() + INIT_RETRY_S
        pause, most = INIT_PAUSES_S
        while True:
            try:
                return self._stub.InitJob(request, timeout=RPC_TIMEOUT_S)
            except grpc.RpcError as err:
                code = err.code()
                retry = code in UNREACHED
                if not retry or time.monotonic() > deadline:
                    raise (SchedulerUnreachable if retry else JobFailed)(
                        f"InitJob to scheduler {self._ctx.scheduler} failed: "
                        f"{code.name}: {err.details()}") from None
                time.sleep(pause * random.uniform(0.5, 1.5))
                pause = min(2.0 * pause, most)

    def renew(self, round_: int, steps: int, seconds: float,
              timeout: float | None = None) -> Any:
        """Ask for the next round's lease without blocking: a future whose ``result()`` is
        the RenewLeaseResponse (the scheduler may hold the answer until it has planned),
        within ``timeout`` (default ``RENEW_TIMEOUT_S``)."""
        return self._stub.RenewLease.future(self._pb.RenewLeaseRequest(
            job_id=self._ctx.job_id, round=round_, rank=self._ctx.rank, steps=steps,
            seconds=seconds, generation=self._ctx.generation),
            timeout=RENEW_TIMEOUT_S if timeout is None else timeout)

    @staticmethod
    def renewed(future: Any) -> Any | None:
        """The lease a renewal future brought (waits for it); ``BUSY_REPLY`` when the
        scheduler was too busy to take it, or refused it over the job's budget of calls
        (RESOURCE_EXHAUSTED, ``daemon/budgets.py``): refused at once, it may be asked again;
        ``NOT_REACHED`` when it did not reach the scheduler (UNAVAILABLE, CANCELLED); None
        when no answer came in time (DEADLINE_EXCEEDED), or the scheduler refused it."""
        import grpc

        from gavelsched.rpc.codes import BUSY, UNREACHED, retry_after

        try:
            return future.result().lease
        except grpc.RpcError as err:
            code = err.code()
            busy = retry_after(err) is not None or (
                code == grpc.StatusCode.UNAVAILABLE and (err.details() or "").startswith(BUSY))
            unreached = (not busy and code in UNREACHED
                         and code != grpc.StatusCode.DEADLINE_EXCEEDED)
            log.warning("RenewLease failed (%s); %s", code.name,
                        f"the scheduler did not take it now ({err.details()})" if busy else
                        "the scheduler was not reached" if unreached
                        else "treating the lease as not renewed")
            return BUSY_REPLY if busy else NOT_REACHED if unreached else None

    def renew_waited(self, round_: int, steps: int, seconds: float) -> Any | None:
        """A renewal asked again at the lease's end, after one did not reach the scheduler
        or was refused as busy: waited for, and tried again after pauses while that goes on,
        for up to ``RENEW_AGAIN_S``, and at most ``RENEW_BUSY_ASKS`` times while the
        scheduler refuses it as busy. The lease, or None."""
        deadline = time.monotonic() + RENEW_AGAIN_S
        pause, most = INIT_PAUSES_S
        busy_asks = 0
        while True:
            left = deadline - time.monotonic()
            reply = self.renewed(self.renew(round_, steps, seconds,
                                            timeout=min(RPC_TIMEOUT_S, max(left, 0.1))))
            if reply is not NOT_REACHED and reply is not BUSY_REPLY:
                return reply
            busy_asks += reply is BUSY_REPLY
            if busy_asks >= RENEW_BUSY_ASKS:
                return None
            wait = pause * random.uniform(0.5, 1.5)
            if time.monotonic() + wait >= deadline:
                return None
            time.sleep(wait)
            pause = min(2.0 * pause, most)

    def report(self, round_: int, steps: int, seconds: float,
               lease_start_s: float) -> bool | None:
        """Report a commit of ``steps`` as durable (``lease_start_s``: the clock when the
        run's first step was done; 0: none yet): True when the scheduler took it, False
        when it refused it (this run is fenced out), None when it was not reached."""
        import grpc

        try:
            ack = self._stub.ReportSteps(self._pb.ReportStepsRequest(
                job_id=self._ctx.job_id, round=round_, rank=self._ctx.rank, steps=steps,
                seconds=seconds, checkpointed=True, generation=self._ctx.generation,
                lease_start_s=lease_start_s), timeout=RPC_TIMEOUT_S)
        except grpc.RpcError as err:  # the worker's round report still carries the count
            log.warning("ReportSteps failed (%s); the checkpoint holds %d steps",
                        err.code().name, steps)
            return None
        if not ack.ok:
            log.warning("ReportSteps refused: %s", ack.message)
        return bool(ack.ok)

    def close(self) -> None:
        self._channel.close()
