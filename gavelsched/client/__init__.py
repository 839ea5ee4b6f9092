"""gavelsched's Python API (docs/api.md): a scheduler reached over gRPC with its token and
TLS, as calls that take and return typed, frozen records.

    from gavelsched.client import JobRequest, connect

    with connect("127.0.0.1:50051", token_file="token") as client:
        job_id = client.submit(JobRequest(job_type="A3C", total_steps=1000))
        print(client.status().job(job_id).state)

``submit``, ``status``, ``cancel``, ``hold``, ``release``, ``update``, ``history``,
``usage``, ``reload``, ``logs``, ``drain`` and ``predict`` are the ``gavelsched`` commands
of the same names, whose CLI doors call them. Every refusal is one line:
``InputError`` (bad input here) or ``ClientError`` (the scheduler said no, or was not
reached). Importing this package loads neither gRPC nor the simulator.
"""

from .api import Client, connect
from .errors import ClientError, InputError
from .records import Drained, HistoryEvent, LogChunk, Submitted
from .request import JobRequest
from .status import ClusterStatus, JobStatus, WorkerStatus

__all__ = ["Client", "ClientError", "ClusterStatus", "Drained", "HistoryEvent", "InputError",
           "JobRequest", "JobStatus", "LogChunk", "Submitted", "WorkerStatus", "connect"]
