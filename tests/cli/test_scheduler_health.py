"""``health_listen`` (issue #18, Kubernetes probes): the real ``gavelsched scheduler``
serves the standard gRPC health service there with neither token nor TLS, while its main
port still refuses a call without the token."""

from __future__ import annotations

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gavelsched.daemon.config import ConfigError, parse_config
from gavelsched.daemon.local import LocalCluster, free_port


def check(address: str) -> int:
    with grpc.insecure_channel(address) as chan:
        return health_pb2_grpc.HealthStub(chan).Check(health_pb2.HealthCheckRequest(),
                                                      timeout=10).status


def test_health_port_answers_without_a_token(tmp_path):
    health = f"127.0.0.1:{free_port()}"
    cluster = LocalCluster(tmp_path, token="s3cret", config={"health_listen": health})
    try:
        cluster.start_scheduler()
        assert check(health) == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as refused:
            check(cluster.address)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        cluster.stop()


def test_health_beyond_loopback_needs_insecure():
    base = {"listen": "127.0.0.1:0", "policy": "fifo", "round_seconds": 6, "state_dir": "/s",
            "health_listen": "0.0.0.0:50062"}
    with pytest.raises(ConfigError, match="health_listen 0.0.0.0:50062 is beyond loopback"):
        parse_config(base)
    assert parse_config({**base, "insecure": True}).health_exposed
