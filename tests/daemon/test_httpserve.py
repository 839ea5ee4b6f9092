"""The scheduler's HTTP endpoints hold no thread for a peer that opens connections and sends
nothing (``gavelsched/daemon/httpserve.py``): past ``MAX_PER_PEER`` connections of one
address, or ``MAX_CONNECTIONS`` in all, a new one is closed at once, and a connection
whose request does not come within ``REQUEST_TIMEOUT_S`` is closed. Real sockets on
loopback (each 127.0.0.x a peer of its own)."""

from __future__ import annotations

import logging
import socket
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler

import pytest

from gavelsched.daemon import httpserve
from gavelsched.daemon.local import wait_until


class Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format, *args) -> None:
        pass


BIG = 32 << 20          # an answer larger than loopback's socket buffers


class Big(Hello):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(BIG))
        self.end_headers()
        self.wfile.write(b"x" * BIG)


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setattr(httpserve, "MAX_CONNECTIONS", 4)
    monkeypatch.setattr(httpserve, "MAX_PER_PEER", 2)
    monkeypatch.setattr(httpserve, "REQUEST_TIMEOUT_S", 0.5)
    server = httpserve.bounded_server("127.0.0.1:0", Hello, "the test",
                                      default_host="127.0.0.1")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def silent(port: int, peer: str) -> socket.socket:
    """A connection from ``peer`` that sends nothing; reads wait at most 10 s."""
    return socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(peer, 0))


def closed_by_server(sock: socket.socket) -> bool:
    """The server closed ``sock`` (end of stream, or a reset) rather than keep it open
    past the read's 10 s."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def get(port: int) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as answer:
        return answer.read()


def test_a_silent_connection_is_closed_after_the_request_timeout(server):
    port = server.server_address[1]
    sock = silent(port, "127.0.0.2")
    assert closed_by_server(sock)
    sock.close()
    assert get(port) == b"ok"


def test_a_large_answer_to_a_slow_reader_is_not_cut_at_the_request_timeout(monkeypatch):
    """The answer has ``RESPONSE_TIMEOUT_S`` to be taken: a reader that waits longer than
    the request's timeout before it reads megabytes still gets them whole."""
    monkeypatch.setattr(httpserve, "REQUEST_TIMEOUT_S", 0.2)
    server = httpserve.bounded_server("127.0.0.1:0", Big, "the test",
                                      default_host="127.0.0.1")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        sock = silent(server.server_address[1], "127.0.0.2")
        sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
        threading.Event().wait(1.0)             # the server's send fills the buffers, waits
        got = bytearray()
        while chunk := sock.recv(1 << 20):
            got += chunk
        sock.close()
        assert got.endswith(b"x" * 1024) and len(got) > BIG
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_connections_past_a_peers_share_or_the_whole_cap_are_closed_at_once(server,
                                                                            caplog):
    port = server.server_address[1]
    server.RequestHandlerClass.timeout = 30.0        # (the held ones stay)
    caplog.set_level(logging.WARNING, logger="gavelsched.daemon.budgets")
    held = [silent(port, "127.0.0.2") for _ in range(2)]
    past_peer = silent(port, "127.0.0.2")            # a third from one peer
    assert closed_by_server(past_peer)               # (after the refusal's log line)
    assert ("refused 1 connections to the test past its limits (4 at once, 2 from one "
            "address) ('127.0.0.2' 1)") in caplog.text        # (then at most every 5 s)
    held += [silent(port, "127.0.0.3") for _ in range(2)]
    past_all = silent(port, "127.0.0.4")             # a fifth in all
    assert closed_by_server(past_all)
    for sock in held:
        sock.close()
    wait_until(lambda: answers(port), 30, "the closed connections' slots back")


def answers(port: int) -> bool:
    try:
        return get(port) == b"ok"
    except OSError:         # (still full: closed at once)
        return False


def test_the_dashboard_and_metrics_close_a_silent_connection(monkeypatch):
    """Both endpoints are served this way (before, each silent connection held one of the
    scheduler's threads until its peer left)."""
    from gavelsched.daemon.dashboard import Dashboard
    from gavelsched.daemon.metrics import DaemonMetrics
    from gavelsched.daemon.snapshot import Snapshot
    from gavelsched.rpc import pb

    monkeypatch.setattr(httpserve, "REQUEST_TIMEOUT_S", 0.5)
    picture = Snapshot(0, "fifo", 2.0, 0.0, pb.StatusResponse(policy="fifo"))
    board, metrics = Dashboard(lambda: picture, "s3cret"), DaemonMetrics()
    try:
        for port in (board.serve("127.0.0.1:0"), metrics.serve("127.0.0.1:0")):
            sock = silent(port, "127.0.0.2")
            assert closed_by_server(sock)
            sock.close()
    finally:
        board.close()
        metrics.close()
