"""The gRPC status codes that say a peer was not reached, or did not answer in time.

A call that ends with one of them may have had no effect at all, so whoever made it retries
or leaves the verdict to someone who knows more (the daemon's heartbeat check), rather than
reading it as the peer's refusal. The daemon's dispatch, the iterator's calls to the
scheduler and the command-line client all decide by this one set.

CANCELLED is among them: none of these callers cancels its own calls, so a call ends so
only when the connection or an overloaded peer dropped it on the way. At 4,096 GPUs the
first round's 4,096 InitJobs at once came back CANCELLED by the thousand, and the iterator
failed those jobs for good (issue #30).
"""

from __future__ import annotations

import grpc

UNREACHED = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                       grpc.StatusCode.CANCELLED})

# How the scheduler says UNAVAILABLE when it was reached but every seat for calls that wait
# on it is taken (``daemon/service.py``, ``ExecutorWaits``): retried like any UNREACHED.
BUSY = "the scheduler is busy"

# The trailing metadata of a call refused over its caller's budget (RESOURCE_EXHAUSTED,
# ``daemon/budgets.py``): the seconds until the caller may call again. The client waits
# that long and asks again (``retry_after``); a refusal without it (a user's ``max_jobs``)
# is final.
RETRY_AFTER = "gavelsched-retry-after-s"


def retry_after(err: grpc.RpcError) -> float | None:
    """The seconds a refused call asks its caller to wait before it calls again, or None
    when the refusal is not over a budget."""
    if err.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return None
    for key, value in err.trailing_metadata() or ():
        if key == RETRY_AFTER:
            try:
                seconds = float(value)
            except ValueError:
                return None
            return seconds if 0.0 <= seconds < 1e6 else None
    return None
