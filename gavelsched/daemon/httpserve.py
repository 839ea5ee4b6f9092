"""The scheduler's HTTP endpoints (the dashboard, ``/metrics``) served so that no peer can
exhaust the scheduler's threads (docs/design.md, Safety rules: secure by default).

Python's threading HTTP server gives each connection a thread for as long as the peer
keeps it open, and its handler waits for a request without a time limit: a peer that
opens connections and sends nothing (slowloris) held a thread of the scheduler per
connection, for good, before any token was checked. Here a request must arrive whole
within ``REQUEST_TIMEOUT_S``, its answer be taken within ``RESPONSE_TIMEOUT_S`` (the
picture of 50,000 jobs is megabytes: a slow link must have time to take it), at most
``MAX_CONNECTIONS`` connections are served at once and at most ``MAX_PER_PEER`` from one
address; a connection past them is closed at once, and logged at most every 5 s with the
addresses refused most (``budgets.Overdrawn``). A flood then costs the endpoint its
answers for a while, never the scheduler its threads.
"""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .budgets import Overdrawn

MAX_CONNECTIONS = 64          # connections served at once
MAX_PER_PEER = 16             # ... of them from one address
REQUEST_TIMEOUT_S = 10.0      # a connection's request within this
RESPONSE_TIMEOUT_S = 300.0    # its answer taken within this


class BoundedHTTPServer(ThreadingHTTPServer):
    """A thread per connection, at most ``MAX_CONNECTIONS`` (``MAX_PER_PEER`` a peer)."""

    daemon_threads = True
    block_on_close = False      # (closing waits for no peer: a slow one may take minutes)

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 what: str):
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.refused = Overdrawn(f"connections to {what} past its limits ({MAX_CONNECTIONS} "
                                 f"at once, {MAX_PER_PEER} from one address)", "address")
        self._lock = threading.Lock()
        self._by_peer: dict[str, int] = {}      # address -> its connections served now
        super().__init__(address, handler)

    def process_request(self, request, client_address) -> None:
        peer = client_address[0]
        with self._lock:
            admitted = (sum(self._by_peer.values()) < MAX_CONNECTIONS
                        and self._by_peer.get(peer, 0) < MAX_PER_PEER)
            if admitted:
                self._by_peer[peer] = self._by_peer.get(peer, 0) + 1
        if not admitted:
            self.refused.note(peer)
            self.shutdown_request(request)          # full: closed at once, no thread
            return
        try:
            super().process_request(request, client_address)    # its thread
        except BaseException:
            self._release(peer)
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release(client_address[0])

    def _release(self, peer: str) -> None:
        with self._lock:
            left = self._by_peer[peer] - 1
            if left:
                self._by_peer[peer] = left
            else:
                del self._by_peer[peer]


def bounded_server(address: str, handler: type[BaseHTTPRequestHandler], what: str, *,
                   default_host: str) -> BoundedHTTPServer:
    """A ``BoundedHTTPServer`` of ``what`` (``the dashboard``: its log's name for it)
    bound to ``address`` (``host:port``, ``[v6]:port``; no host: ``default_host``; port
    0: a free one), its handler given ``REQUEST_TIMEOUT_S`` to read a request and
    ``RESPONSE_TIMEOUT_S`` to send its answer."""
    host, _, port = address.rpartition(":")
    class Timed(handler):
        timeout = REQUEST_TIMEOUT_S

        def send_response(self, *args, **kwargs) -> None:    # (every answer starts here)
            self.connection.settimeout(RESPONSE_TIMEOUT_S)
            super().send_response(*args, **kwargs)

    Timed.__name__ = Timed.__qualname__ = handler.__name__
    return BoundedHTTPServer((host.strip("[]") or default_host, int(port)), Timed, what)
