"""The client waits out a refusal over the user's budget of calls and asks again
(``GrpcTransport.call``; ``rpc.codes.retry_after``; ``daemon/budgets.py``), against a
real gRPC server on loopback that refuses as the scheduler does: a loop of calls slows to
the budget's pace rather than fail. A refusal without the seconds to wait (a user's
``max_jobs``), or one that asks for longer than the call's timeout, is final at once."""

from __future__ import annotations

from concurrent import futures

import grpc
import pytest

from gavelsched.client import ClientError, JobRequest, connect
from gavelsched.rpc import pb, pb_grpc
from gavelsched.rpc.codes import RETRY_AFTER


class Refusing(pb_grpc.ClientToSchedulerServicer):
    """Status: refused over the budget ``refusals`` times (``wait`` seconds to wait each),
    then answered. Submit: refused as a user's ``max_jobs`` does, without a wait."""

    def __init__(self, refusals: int, wait: str) -> None:
        self.refusals, self.wait, self.calls = refusals, wait, {"Status": 0, "Submit": 0}

    def Status(self, request, context):
        self.calls["Status"] += 1
        if self.calls["Status"] <= self.refusals:
            context.set_trailing_metadata(((RETRY_AFTER, self.wait),))
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                          f"user 'u' made more than 100 calls in 20 s; try again in {self.wait} s")
        return pb.StatusResponse(round=7)

    def Submit(self, request, context):
        self.calls["Submit"] += 1
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "u has 3 unfinished jobs and may "
                                                          "have at most 3 (max_jobs ...)")


@pytest.fixture
def serve():
    servers = []

    def start(servicer) -> str:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb_grpc.add_ClientToSchedulerServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        return f"127.0.0.1:{port}"

    yield start
    for server in servers:
        server.stop(0)


def test_a_refusal_over_the_budget_is_waited_out_and_asked_again(serve):
    fake = Refusing(refusals=2, wait="0.05")
    with connect(serve(fake)) as client:
        assert client.status().round == 7
    assert fake.calls["Status"] == 3


def test_a_long_wait_is_logged_once_a_short_one_not(serve, caplog):
    """A wait of a second or more is logged (the caller learns why its calls slowed), at
    most once every ``NOTE_EVERY_S`` per connection; a short one is not."""
    fake = Refusing(refusals=1, wait="0.05")
    with caplog.at_level("WARNING", "gavelsched.client.api"), connect(serve(fake)) as client:
        assert client.status().round == 7
    assert not caplog.records
    fake = Refusing(refusals=2, wait="1.0")
    address = serve(fake)
    with caplog.at_level("WARNING", "gavelsched.client.api"), connect(address) as client:
        assert client.status().round == 7
    assert fake.calls["Status"] == 3
    assert [r.getMessage() for r in caplog.records] == [
        (f"the scheduler at {address}: user 'u' made more than 100 calls in 20 s; try "
         f"again in 1.0 s (waiting, then asking again)")]


def test_a_refusal_without_a_wait_is_final_at_once(serve):
    fake = Refusing(refusals=0, wait="0")
    with connect(serve(fake)) as client, pytest.raises(ClientError) as err:
        client.submit(JobRequest(job_type="A3C", total_steps=10))
    assert err.value.code == "RESOURCE_EXHAUSTED" and "max_jobs" in str(err.value)
    assert fake.calls["Submit"] == 1


@pytest.mark.parametrize("wait", ["60", "nan", "-1", "soon"])
def test_a_wait_past_the_timeout_or_not_a_time_is_final_at_once(serve, wait):
    fake = Refusing(refusals=5, wait=wait)
    with connect(serve(fake), timeout_s=5) as client, pytest.raises(ClientError) as err:
        client.status()
    assert err.value.code == "RESOURCE_EXHAUSTED" and "\n" not in str(err.value)
    assert fake.calls["Status"] == 1
