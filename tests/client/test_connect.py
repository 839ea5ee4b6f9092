"""``gavelsched.client.connect`` against a real scheduler on loopback (issue #27): the token
goes with every call and TLS is verified with the CA, and every failure is one line: a
refused token, an unreachable scheduler, a refused call, a token file that cannot be read.
Jobs run on an in-test worker (``FakeWorker``); the API's records come back."""

from __future__ import annotations

import pytest

from gavelsched.client import ClientError, ClusterStatus, InputError, JobRequest, connect
from gavelsched.client.errors import NoRates
from gavelsched.client.records import Prediction
from gavelsched.daemon.local import free_port

from ..daemon.cluster import Cluster, running, wait_until
from ..daemon.fake_worker import FakeWorker
from ..daemon.test_tls import tls_cluster  # noqa: F401 - a fixture

TOKEN = "api-test-token"
JOB = JobRequest(job_type="A3C", total_steps=30, workload="steps")


def one_line(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert len(text.splitlines()) == 1, text
    return text


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, token=TOKEN, round_seconds=1.5)
    with running(c):
        c.fakes.append(FakeWorker(c.address, "v100", token=TOKEN))
        yield c


def test_the_token_goes_with_every_call(cluster, tmp_path):
    with connect(cluster.address, token_file=cluster.token_file) as client:
        job_id = client.submit(JOB)
        done = client.wait(job_id, timeout_s=120, poll_s=0.2)
        status = client.status()
        assert isinstance(status, ClusterStatus)
        assert (done.state, done.steps_done) == ("done", 30)
        assert [w.type for w in status.workers] == ["v100"]
        assert client.status(states=("queued",)).jobs == ()
    with connect(cluster.address, token=TOKEN) as client:
        assert client.status().job(job_id).state == "done"
    with connect(cluster.address) as client, pytest.raises(ClientError) as err:
        client.status()
    assert err.value.code == "UNAUTHENTICATED"
    assert one_line(err) == (f"the scheduler at {cluster.address} refused the call: "
                             f"UNAUTHENTICATED (missing or wrong --token-file)")
    with connect(cluster.address, token="wrong") as client, pytest.raises(ClientError):
        client.submit(JOB)
    with pytest.raises(InputError) as err:
        connect(cluster.address, token_file=tmp_path / "no-such-token")
    assert "no-such-token" in one_line(err)


def test_refused_calls_and_drains_are_one_line_or_typed(cluster):
    with connect(cluster.address, token=TOKEN) as client:
        with pytest.raises(ClientError) as err:
            client.submit(JobRequest(job_type="No such type", total_steps=5))
        assert err.value.code == "INVALID_ARGUMENT" and "No such type" in one_line(err)
        with pytest.raises(ClientError) as err:
            client.cancel("999")
        one_line(err)
        with pytest.raises(ClientError) as err:
            client.wait("999", timeout_s=1)
        one_line(err)
        server = int(client.status().workers[0].id)
        drained = client.drain(server)
        assert drained.drained and "drain" in drained.message
        assert client.status().workers[0].drained
        assert client.wait_drained(server, timeout_s=60, poll_s=0.2) == "drained"
        assert not client.drain(server, undo=True).drained
        assert client.wait_drained(server, timeout_s=60, poll_s=0.2) == "undrained"
        with pytest.raises(InputError, match="non-negative integer, got -1"):
            client.drain(-1)
        for rank in (-1, 2**31):   # (2^31 was a protobuf ValueError: a traceback in the CLI)
            with pytest.raises(InputError, match=f"rank: must be between 0 and 2147483647, "
                                                 f"got {rank}"):
                client.logs("0", ranks=[0, rank])   # at the call, not at the first chunk


def test_predict_replays_the_live_state_and_submits_nothing(cluster):
    with connect(cluster.address, token=TOKEN) as client:
        wait_until(lambda: client.status().workers, 30, "the worker")
        long = client.submit(JobRequest(job_type="A3C", total_steps=10**5, workload="steps"))
        got = client.predict(JobRequest(job_type="A3C", total_steps=100))
        assert isinstance(got, Prediction) and [j.id for j in got.state.jobs] == [long]
        assert got.job.finish_s is not None and got.job.finish_s > 0
        assert got.delay_s(long) is not None
        with pytest.raises(NoRates, match="job type 'Nope' has no throughput"):
            client.predict(JobRequest(job_type="Nope", total_steps=5))
        assert [j.id for j in client.status().jobs] == [long]


def test_logs_of_a_rank_out_of_range_exits_2_in_one_line_before_any_call(capsys):
    from gavelsched.cli import main
    assert main(["logs", "0", "--rank", "2147483648", "--scheduler",
                 f"127.0.0.1:{free_port()}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["gavelsched logs: error: rank: must be between 0 and 2147483647, got "
                   "2147483648"]


def test_an_unreachable_scheduler_is_one_line():
    address = f"127.0.0.1:{free_port()}"
    with connect(address, timeout_s=5) as client, pytest.raises(ClientError) as err:
        client.status()
    assert one_line(err).startswith(f"cannot reach the scheduler at {address} (")


def test_a_busy_scheduler_says_so_in_one_line():
    # reached, but every seat for calls that wait on it was taken (``ExecutorWaits``)
    import grpc

    from gavelsched.client.api import rpc_error_line

    class Busy(grpc.RpcError):
        def code(self):
            return grpc.StatusCode.UNAVAILABLE

        def details(self):
            return "the scheduler is busy: 64 client calls already wait on it; try again"

    assert rpc_error_line("127.0.0.1:50051", Busy()) == (
        "the scheduler is busy: 64 client calls already wait on it; try again "
        "(127.0.0.1:50051, UNAVAILABLE)")


def test_tls_is_verified_with_the_ca(tls_cluster, tmp_path):
    c = tls_cluster
    with connect(c.address, tls=c.ca) as client:
        assert client.status().workers == ()
        c.fakes.append(FakeWorker(c.address, "v100", ca=c.ca))
        wait_until(lambda: client.status().workers, 30, "the worker")
        job_id = client.submit(JOB)
        assert client.wait(job_id, timeout_s=120, poll_s=0.2).state == "done"
    with connect(c.address, timeout_s=5) as plain, pytest.raises(ClientError) as err:
        plain.status()          # plain text to a TLS port: not reached
    assert err.value.code == "UNAVAILABLE" and one_line(err)
    with pytest.raises(InputError, match="tls ca"):
        connect(c.address, tls=tmp_path / "no-such-ca.pem")
