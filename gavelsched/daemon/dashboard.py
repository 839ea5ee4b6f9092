"""The read-only web dashboard on ``dashboard_listen`` (issue #18): one page
(``static/dashboard.html``, inline script and style, no external assets) and
``/api/status``: the ``status --json`` encoding (``statusjson``) of the latest snapshot
(each job with its user and entity), each job's predicted times when the Status carries
them, the entities of a hierarchical policy (``entities``: name, weight, policy, cap, GPUs
their jobs hold now, jobs not ended; none: one implicit entity, and the page hides its
entity views), and the cluster's utilisation per round (GPUs held over GPUs alive, and the
GPUs each entity's jobs hold: its share over time; sampled from the snapshots:
``utilisation``, kept across restarts in the state directory).

With a token, every request needs it: ``Authorization: Bearer <token>``, or the cookie
that ``/?token=<token>`` sets (HttpOnly, SameSite=Strict; its value is the token's hash and
a MAC of it under the cluster's token, never the token) before redirecting to ``/``; else
401. The cluster's token opens it, and so does the token of every user and admin of the
users file (``identities``; issue #28); a cookie stops working when its user is removed.
Compared in constant time; requests are not logged. Without a token it answers only
requests addressed to a loopback host name (``config`` keeps it on loopback).

A user's ``/api/status`` is counted against the same budget as their gRPC calls
(``budgets``; an admin and the cluster's token have none): past it, 429 Too Many Requests
with ``Retry-After``, paused and counted as a refused gRPC call is (``CallBudget.refuse``;
``gavelsched_calls_limited_total{method="dashboard"}``). The page asks every 2 s, well
within it; a script that loops on the whole picture of 50,000 jobs (seconds of the
scheduler's time each) is slowed, even one that ignores ``Retry-After``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import math
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from importlib.resources import files
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from ..rpc.identity import ADMIN, USER, Identities, token_hash
from ..rpc.security import is_loopback
from .budgets import CallBudget
from .holding import counted_for_entity, counted_once
from .httpserve import BoundedHTTPServer, bounded_server
from .jobs import PREEMPTED, QUEUED, RUNNING
from .snapshot import Snapshot
from .statusjson import seconds, status_dict
from .utilisation import Utilisation

log = logging.getLogger(__name__)

SAMPLE_S = 0.5         # how often the sampler looks at the snapshot
COOKIE = "gavel_dashboard"
PAGE = files(__package__).joinpath("static", "dashboard.html").read_bytes()


def _csp(page: bytes) -> str:
    """A Content-Security-Policy that allows only the page's own inline script and style."""
    def hashes(tag: str) -> str:
        return " ".join(
            "'sha256-%s'" % base64.b64encode(hashlib.sha256(body).digest()).decode()
            for body in re.findall(rb"<%s>(.*?)</%s>" % (tag.encode(), tag.encode()), page,
                                   re.S))
    return (f"default-src 'none'; script-src {hashes('script')}; style-src "
            f"{hashes('style')}; connect-src 'self'; img-src 'self'; base-uri 'none'; "
            f"form-action 'none'; frame-ancestors 'none'")


CSP = _csp(PAGE)

# Jobs encoded per call of json's C encoder, which holds the GIL for the whole call: the
# answer for 50,000 jobs in one call stopped every other thread of the scheduler (its
# heartbeats and renewals among them) for half a second, longer on a busy machine (issue
# #30; ``benchmarks/gil_holds.py``).
JSON_CHUNK = 500


def encoded(answer: dict) -> bytes:
    """``json.dumps(answer)`` as UTF-8, its ``jobs`` encoded ``JSON_CHUNK`` at a time (and
    last among its keys), so that other threads run between the chunks."""
    jobs = answer["jobs"]
    head = json.dumps({k: v for k, v in answer.items() if k != "jobs"})
    parts = [json.dumps(jobs[i:i + JSON_CHUNK])[1:-1] for i in range(0, len(jobs), JSON_CHUNK)]
    return "".join((head[:-1], ", " if len(head) > 2 else "", '"jobs": [', ", ".join(parts),
                    "]}")).encode()


def predicted(job) -> dict[str, float | None]:
    """The scheduler's ETA of the job (``forecast``): its start (of a job not started) and
    finish on the scheduler's clock; None: none."""
    return {"start": seconds(job.eta_start_s), "finish": seconds(job.eta_finish_s)}


def shown(reply, rows: int):
    """A copy of the Status ``reply`` with its first ``rows`` jobs in the order the page
    draws them: the ones that hold or wait for GPUs first (running, preempted, queued),
    each kind in submission order. A page of 10,000 rows took seconds to fetch and draw
    (BENCHMARKS.md, "Status, history and logs at 10,000 jobs")."""
    rank = {RUNNING: 0, PREEMPTED: 1, QUEUED: 2}
    first = sorted(reply.jobs, key=lambda j: rank.get(j.state, 3))[:rows]   # stable
    out = type(reply)()
    out.CopyFrom(reply)
    out.ClearField("jobs")
    out.jobs.extend(first)
    return out


def entity_gpus(reply) -> dict[str, int]:
    """GPUs held by each entity's jobs in a Status (jobs of no entity are left out)."""
    held: dict[str, int] = {}
    entity_of = {job.id: job.entity for job in reply.jobs}
    for job in reply.jobs:
        gpus = counted_for_entity(job.id, job.gpus, job.shared_with, job.entity,
                                  entity_of.get(job.shared_with, ""))
        if job.entity and gpus > 0:
            held[job.entity] = held.get(job.entity, 0) + gpus
    return held


def entities(reply) -> list[dict]:
    """The Status's entities as the page's table reads them (``max_gpus`` 0: no cap)."""
    return [{"name": e.name, "weight": e.weight, "policy": e.policy, "max_gpus": e.max_gpus,
             "gpus": e.gpus, "jobs": e.jobs} for e in reply.entities]


class Dashboard:
    """Serve with ``serve(address)`` (port 0: a free one; returns the port), ``close()``
    to stop. ``snapshot`` returns the executor's latest ``Snapshot``; ``history``: the file
    that keeps the utilisation across restarts (None: memory only)."""

    def __init__(self, snapshot: Callable[[], Snapshot], token: str | None,
                 history: Path | None = None,
                 identities: Callable[[], Identities] | None = None,
                 budget: CallBudget | None = None,
                 on_limited: Callable[[str], None] | None = None) -> None:
        """``identities()``: who may call the scheduler now (its users' tokens open the
        page too); None: the cluster's token only. ``budget``: each user's calls
        (``budgets``; None: no limit); ``on_limited("dashboard")`` is told of each picture
        refused over it (the metrics)."""
        self._snapshot = snapshot
        self._token = token.encode() if token else None
        self._identities = identities
        self.budget = budget
        self._on_limited = on_limited
        self._history = Utilisation(history)
        self._stop = threading.Event()
        self._server: BoundedHTTPServer | None = None
        self._threads: list[threading.Thread] = []
        self._sampled = None       # the snapshot ``sample`` looked at last

    # ---- utilisation ---------------------------------------------------------------------
    def sample(self) -> None:
        """Record the snapshot's GPUs held / in service, and held by each entity, one entry
        per round (the latest). In service: alive, and not drained, or draining while its
        runs go on (their GPUs are held: the page showed 3/2 GPUs, 150%, while one drained)."""
        snap = self._snapshot()
        if snap is self._sampled:     # (nothing new: each look walks every job)
            return
        self._sampled = snap
        r = snap.response
        self._history.record(snap.round, snap.now_s,
                             sum(counted_once(j.id, j.gpus, j.shared_with) for j in r.jobs),
                             sum(w.gpus for w in r.workers
                                 if w.alive and (not w.drained or w.runs)),
                             entity_gpus(r))

    def _sampler(self) -> None:
        """``sample`` every ``SAMPLE_S`` until closed; a sample that fails is logged (once
        for each distinct error) and the next one is taken: the graph has a gap, not an end."""
        last_error = ""
        while not self._stop.wait(SAMPLE_S):
            try:
                self.sample()
            except Exception as err:
                if repr(err) != last_error:
                    log.exception("dashboard: the utilisation sample failed")
                last_error = repr(err)
            else:
                last_error = ""

    def api(self, rows: int | None = None) -> dict:
        """What ``/api/status`` answers; with ``rows``, at most that many jobs (``shown``),
        and ``jobs_total`` says how many there are."""
        snap = self._snapshot()
        reply = snap.response
        total = len(reply.jobs)
        if rows is not None and total > rows:
            reply = shown(reply, rows)
        out = status_dict(reply)
        out["jobs_total"] = total
        for job, wire in zip(out["jobs"], reply.jobs):
            job["predicted"] = predicted(wire)
        return {**out, "policy": reply.policy, "round_seconds": reply.round_seconds,
                "now_s": reply.now_s, "entities": entities(snap.response),
                "utilisation": self._history.points()}

    # ---- auth ----------------------------------------------------------------------------
    def allowed(self, headers, query: dict) -> tuple[str | None, str | None]:
        """(who, the cookie to set or None): who the bearer token, the cookie or
        ``?token=`` admits (``_admits``; None: no one)."""
        if self._token is None:
            host = urlsplit("//" + (headers.get("Host") or "")).hostname or ""
            return ("" if is_loopback(host) else None), None
        auth = headers.get("Authorization") or ""
        if auth.startswith("Bearer ") and (who := self._admits(auth[7:].strip())) is not None:
            return who, None
        for part in (headers.get("Cookie") or "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE and (who := self._cookie_admits(value)) is not None:
                return who, None
        given = query.get("token", [""])[0].strip()
        if given and (who := self._admits(given)) is not None:
            return who, self._cookie(token_hash(given))
        return None, None

    def _admits(self, token: str) -> str | None:
        """Who ``token`` admits: a user's name, ``""`` for the cluster's token or an admin
        (no budget), None for no one."""
        if hmac.compare_digest(token.encode(), self._token):
            return ""
        caller = None if self._identities is None else self._identities().identify(token)
        if caller is None or caller.role not in (ADMIN, USER):
            return None
        return caller.name if caller.role == USER else ""

    def _cookie(self, hashed: str) -> str:
        """The cookie of a token whose hash is ``hashed``: the hash and its MAC."""
        mac = hmac.new(self._token, b"gavelsched dashboard\0" + hashed.encode(),
                       hashlib.sha256).hexdigest()
        return f"{hashed.partition(':')[2]}.{mac}"

    def _cookie_admits(self, value: str) -> str | None:
        """Who a cookie this dashboard set admits, its token still opening it (as
        ``_admits``)."""
        digest, _, _ = value.partition(".")
        hashed = f"sha256:{digest}"
        if not hmac.compare_digest(value.encode(), self._cookie(hashed).encode()):
            return None
        if hmac.compare_digest(hashed, token_hash(self._token.decode())):
            return ""
        users = () if self._identities is None else (self._identities().users or ())
        for u in users:
            if u.token_hash == hashed and u.role in (ADMIN, USER):
                return u.name if u.role == USER else ""
        return None

    def refusal(self, who: str) -> tuple[str, float] | None:
        """None when ``who`` (a user's name; ``""``: no budget) may have the picture now,
        else, after the refusal's pause, its one line and the seconds still to wait (logged
        and counted with the gRPC calls' refusals: ``CallBudget.refuse``)."""
        wait = None if not who or self.budget is None else self.budget.take(who)
        if wait is None:
            return None
        if self._on_limited is not None:
            self._on_limited("dashboard")
        return self.budget.refuse(who, wait, None)

    @staticmethod
    def set_cookie(value: str) -> str:
        """The ``Set-Cookie`` header that admits this browser from now on."""
        return f"{COOKIE}={value}; HttpOnly; SameSite=Strict; Path=/"

    # ---- server --------------------------------------------------------------------------
    def serve(self, address: str) -> int:
        self._server = bounded_server(address, _handler(self), "the dashboard",
                                      default_host="127.0.0.1")
        self.sample()
        self._threads = [threading.Thread(target=self._server.serve_forever,
                                          name="gavelsched-dashboard", daemon=True),
                         threading.Thread(target=self._sampler,
                                          name="gavelsched-dashboard-sampler", daemon=True)]
        for t in self._threads:
            t.start()
        return int(self._server.server_address[1])

    def close(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        for t in self._threads:
            t.join(timeout=5)
        self._history.flush()


def _handler(board: Dashboard) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "gavelsched"
        sys_version = ""

        def log_message(self, format, *args) -> None:   # noqa: A002: never log a ?token=
            pass

        def _send(self, code: int, body: bytes, kind: str, extra=()) -> None:
            self.send_response(code)
            for name, value in (("Content-Type", kind), ("Content-Length", str(len(body))),
                                ("Cache-Control", "no-store"),
                                ("X-Content-Type-Options", "nosniff"),
                                ("Referrer-Policy", "no-referrer"),
                                ("Content-Security-Policy", CSP), *extra):
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True     # the page went away: nothing to say

        def do_GET(self) -> None:   # noqa: N802
            url = urlsplit(self.path)
            who, cookie = board.allowed(self.headers, parse_qs(url.query))
            if who is None:
                self._send(401, b"401 Unauthorized: the dashboard needs a token (the "
                           b"cluster's, or a user's): open /?token=TOKEN, or send "
                           b"Authorization: Bearer TOKEN\n",
                           "text/plain; charset=utf-8",
                           [("WWW-Authenticate", 'Bearer realm="gavelsched"')])
            elif cookie:    # drop the token from the address bar and history
                self._send(303, b"", "text/plain", [
                    ("Location", url.path or "/"),
                    ("Set-Cookie", board.set_cookie(cookie))])
            elif url.path == "/":
                self._send(200, PAGE, "text/html; charset=utf-8")
            elif url.path == "/api/status" and (refused := board.refusal(who)) is not None:
                line, left = refused
                self._send(429, f"429: {line}\n".encode(), "text/plain; charset=utf-8",
                           [("Retry-After", str(math.ceil(left)))])
            elif url.path == "/api/status":
                rows = parse_qs(url.query).get("rows", [""])[0]
                if rows and not (rows.isdigit() and len(rows) < 7):
                    self._send(400, b"400: rows must be a number of rows\n",
                               "text/plain; charset=utf-8")
                    return
                self._send(200, encoded(board.api(int(rows) if rows else None)),
                           "application/json")
            else:
                self._send(404, b"404 Not Found\n", "text/plain; charset=utf-8")

        do_HEAD = do_GET

        def _read_only(self) -> None:
            """A method that would change something: the dashboard only reads (RFC 9110,
            405 with the methods it takes), its body unread and the connection closed."""
            self.close_connection = True
            self._send(405, b"405: the dashboard is read-only (GET and HEAD)\n",
                       "text/plain; charset=utf-8", [("Allow", "GET, HEAD")])

        do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _read_only

    return Handler
