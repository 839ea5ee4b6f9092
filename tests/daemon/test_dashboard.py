"""The web dashboard (issue #18; ``gavelsched/daemon/dashboard.py``), in a real headless
Chromium against a real loopback cluster with a token: the page shows each job's state
(and predicted times, when the Status has them) as ``status --json`` does, and refuses a
request without the token with 401. Skips when chromium, chromedriver or selenium are
missing (``.ci/run`` installs them). ``GAVEL_DASHBOARD_PNG=PATH`` also copies the
screenshot there (how ``docs/dashboard.png`` was made)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from gavelsched.daemon.config import ConfigError, parse_config
from gavelsched.rpc.security import new_token
from tests import browser

from .cluster import ENV, LOOPBACK_ANY, Cluster, running, wait_until

def _browser(profile: Path):
    why = browser.missing()
    if why:
        pytest.skip(why)
    return browser.chromium(profile)


def _get(url: str, token: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _status_json(cluster: Cluster) -> dict:
    out = subprocess.run([sys.executable, "-m", "gavelsched", "status", "--all", "--json",
                          "--scheduler", cluster.address, "--token-file",
                          str(cluster.token_file)], env=ENV, capture_output=True, text=True,
                         timeout=60, check=True)
    return json.loads(out.stdout)


def _page_jobs(driver) -> dict[str, dict]:
    """Each job row of the page: its state and predicted times."""
    return driver.execute_script("""
        const out = {};
        for (const tr of document.querySelectorAll('#jobs tbody tr'))
            out[tr.dataset.job] = {state: tr.querySelector('.state').textContent,
                                   eta: tr.querySelector('.eta').textContent,
                                   late: tr.querySelector('.eta').classList.contains('late'),
                                   predicted: JSON.parse(tr.dataset.predicted)};
        return out;""")


def test_dashboard_shows_the_status_behind_the_token(tmp_path: Path) -> None:
    driver = _browser(tmp_path / "chromium-profile")
    token = new_token()
    try:
        with running(Cluster(tmp_path / "cluster", token=token, round_seconds=1.0,
                             extra={"dashboard_listen": LOOPBACK_ANY,
                                    "eta": True})) as cluster:
            base = f"http://{cluster.dashboard_address}"
            cluster.start_worker("v100", 1)
            wait_until(lambda: cluster.alive_workers() == 1, 60, "the worker")
            short = cluster.submit(20)
            long = cluster.submit(10**8, entity="team-a", slo_s=1.0)   # soon missed
            cluster.wait_done([short], timeout=120)
            wait_until(lambda: cluster.jobs()[long].state == "running", 60, "the long job")

            # Without the token (or with a wrong one): 401, for the page and the API.
            for path in ("/", "/api/status", "/?token=wrong"):
                assert _get(base + path)[0] == 401, path
            assert _get(base + "/api/status", "wrong")[0] == 401
            code, body = _get(base + "/api/status", token)
            assert code == 200 and {j["id"] for j in json.loads(body)["jobs"]} == {short, long}
            driver.get(base + "/")
            assert "401" in driver.find_element("tag name", "body").text

            # ?token= sets the cookie and drops the token from the address.
            driver.get(f"{base}/?token={token}")
            assert driver.current_url == base + "/"
            wait_until(lambda: driver.execute_script("return document.body.dataset.loaded"),
                       30, "the page to load the status")

            def same() -> dict | None:
                want = {j["id"]: j for j in _status_json(cluster)["jobs"]}
                page = _page_jobs(driver)
                if set(page) != set(want) or any(page[i]["state"] != j["state"]
                                                 for i, j in want.items()):
                    return None
                for i, j in want.items():       # the scheduler's ETA (issue #29)
                    if page[i]["predicted"] != {"start": j["eta_start_s"],
                                                "finish": j["eta_finish_s"]}:
                        return None
                if want[long]["eta_finish_s"] is None:
                    return None                 # (its first forecast is still on the way)
                return page
            page = wait_until(same, 60, "the page to show what status --json shows")
            assert page[short]["state"] == "done" and page[long]["state"] == "running"
            assert page[short]["eta"] == "-"                     # done: nothing to predict
            assert page[long]["eta"].startswith("finish in ")    # the ETA column is filled
            # with the long job's deadline, missed, in red (runtime.md, "SLOs in status")
            assert page[long]["eta"].endswith(" ago (SLO missed)") and page[long]["late"]
            assert not page[short]["late"]
            assert "ago" in driver.find_element("id", "eta-head").text
            # the header says what the allocation in force took to solve (runtime.md,
            # "Solves off the executor")
            assert "allocation solved in " in driver.find_element("id", "meta").text
            text = driver.find_element("tag name", "body").text
            assert "team-a" in text and "v100" in text and "alive" in text
            # Utilisation per round: the one GPU held by the long job.
            wait_until(lambda: driver.execute_script(
                "return document.querySelectorAll('#chart rect.busy').length") >= 2, 30,
                "utilisation history")
            assert "1/1 GPUs" in driver.find_element("id", "util-now").text
            shot = tmp_path / "dashboard.png"
            time.sleep(0.5)
            assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 0
            if os.environ.get("GAVEL_DASHBOARD_PNG"):
                shutil.copyfile(shot, os.environ["GAVEL_DASHBOARD_PNG"])
    finally:
        driver.quit()


def test_dashboard_listen_stays_on_loopback_unless_insecure_with_a_token() -> None:
    base = {"listen": "127.0.0.1:1", "policy": "fifo", "round_seconds": 1,
            "state_dir": "/tmp/s"}
    assert parse_config({**base, "dashboard_listen": "127.0.0.1:0"}).dashboard_listen
    with pytest.raises(ConfigError, match="dashboard_listen 0.0.0.0:8080 is beyond loopback"):
        parse_config({**base, "dashboard_listen": "0.0.0.0:8080"})
    with pytest.raises(ConfigError, match="auth_token_file"):
        parse_config({**base, "dashboard_listen": "0.0.0.0:8080", "insecure": True})
    assert parse_config({**base, "dashboard_listen": "0.0.0.0:8080", "insecure": True,
                         "auth_token_file": "/tmp/t"}).dashboard_listen == "0.0.0.0:8080"


def _snapshot(round_: int = 3):
    from gavelsched.daemon.snapshot import Snapshot
    from gavelsched.rpc import pb
    reply = pb.StatusResponse(
        round=round_, policy="fifo", round_seconds=2.0, now_s=10.0, epoch_unix=0.0,
        jobs=[pb.JobStatus(id="1", state="running", steps_done=5, total_steps=10,
                           job_type="A3C", scale_factor=2, worker_type="v100", gpus=2,
                           started_s=1.0, ended_s=-1.0, completion_s=-1.0,
                           reason="<img src=x onerror=alert(1)>")],
        workers=[pb.WorkerStatus(id="0", type="v100", gpus=4, alive=True)])
    return Snapshot(round_, "fifo", 2.0, 10.0, reply)


def test_dashboard_http_without_a_browser() -> None:
    """The HTTP layer alone: token by header, ``?token=`` and its cookie; no token: only
    requests addressed to loopback; the JSON is ``status --json``'s plus utilisation."""
    from gavelsched.daemon.statusjson import status_dict
    from gavelsched.daemon.dashboard import COOKIE, Dashboard

    snap = [_snapshot()]
    board = Dashboard(lambda: snap[0], "s3cret")
    port = board.serve("127.0.0.1:0")
    base = f"http://127.0.0.1:{port}"
    try:
        assert _get(base + "/")[0] == 401
        assert _get(base + "/api/status", "nope")[0] == 401
        code, page = _get(base + "/", "s3cret")
        head = page.split(b"<script>")[0].replace(b"http://www.w3.org", b"")
        assert code == 200 and b"<script>" in page and b"http" not in head
        snap[0] = _snapshot(4)
        board.sample()
        data = json.loads(_get(base + "/api/status", "s3cret")[1])
        want = status_dict(snap[0].response)
        assert data["jobs"][0]["state"] == want["jobs"][0]["state"] == "running"
        assert {k: v for k, v in data["jobs"][0].items() if k != "predicted"} == want["jobs"][0]
        assert [(p["round"], p["busy"], p["total"])
                for p in data["utilisation"]] == [(3, 2, 4), (4, 2, 4)]

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *a, **k):
                return None
        opener = urllib.request.build_opener(NoRedirect)
        with pytest.raises(urllib.error.HTTPError) as err:
            opener.open(base + "/?token=s3cret", timeout=10)
        assert err.value.code == 303 and err.value.headers["Location"] == "/"
        cookie = err.value.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "s3cret" not in cookie
        request = urllib.request.Request(base + "/api/status",
                                         headers={"Cookie": cookie.split(";")[0]})
        assert urllib.request.urlopen(request, timeout=10).status == 200
        bad = urllib.request.Request(base + "/api/status", headers={"Cookie": f"{COOKIE}=x"})
        with pytest.raises(urllib.error.HTTPError, match="401"):
            urllib.request.urlopen(bad, timeout=10)
        for method in ("POST", "PUT", "PATCH", "DELETE", "OPTIONS"):   # (was: 501, in HTML)
            changing = urllib.request.Request(base + "/api/status", data=b"{}", method=method,
                                              headers={"Authorization": "Bearer s3cret"})
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(changing, timeout=10)
            assert err.value.code == 405 and err.value.headers["Allow"] == "GET, HEAD"
            assert err.value.read() == b"405: the dashboard is read-only (GET and HEAD)\n"
    finally:
        board.close()

    open_board = Dashboard(lambda: snap[0], None)
    port = open_board.serve("127.0.0.1:0")
    try:
        assert _get(f"http://127.0.0.1:{port}/api/status")[0] == 200
        rebound = urllib.request.Request(f"http://127.0.0.1:{port}/api/status",
                                         headers={"Host": f"evil.example:{port}"})
        with pytest.raises(urllib.error.HTTPError, match="401"):
            urllib.request.urlopen(rebound, timeout=10)
    finally:
        open_board.close()


def test_the_page_asks_for_the_rows_it_draws_and_gets_the_busy_ones_first() -> None:
    """``/api/status?rows=N``: at most N jobs, running, then preempted, then queued, each in
    submission order, and ``jobs_total``; a bad ``rows`` is refused."""
    from gavelsched.daemon.dashboard import Dashboard
    from gavelsched.daemon.snapshot import Snapshot
    from gavelsched.rpc import pb

    states = ["done", "queued", "running", "preempted", "queued", "running"]
    reply = pb.StatusResponse(round=1, policy="fifo", round_seconds=2.0, jobs=[
        pb.JobStatus(id=str(i), state=s, total_steps=10, job_type="A3C", scale_factor=1)
        for i, s in enumerate(states)])
    board = Dashboard(lambda: Snapshot(1, "fifo", 2.0, 0.0, reply), "s3cret")
    port = board.serve("127.0.0.1:0")
    base = f"http://127.0.0.1:{port}/api/status"
    try:
        data = json.loads(_get(base + "?rows=4", "s3cret")[1])
        assert [j["id"] for j in data["jobs"]] == ["2", "5", "3", "1"]
        assert data["jobs_total"] == 6
        assert len(json.loads(_get(base, "s3cret")[1])["jobs"]) == 6
        for bad in ("-1", "x", "10000000"):
            assert _get(f"{base}?rows={bad}", "s3cret")[0] == 400
    finally:
        board.close()


def test_the_api_answer_is_json_s_own_with_no_call_over_more_than_a_chunk(monkeypatch) -> None:
    """``/api/status`` of many jobs parses to what one ``json.dumps`` gives, and no call of
    json's encoder takes more than ``JSON_CHUNK`` jobs: the C encoder holds the GIL for a
    whole call, and one call for 50,000 jobs stopped the scheduler's other threads
    (heartbeats, renewals) for half a second (``benchmarks/gil_holds.py``)."""
    from gavelsched.daemon.dashboard import JSON_CHUNK, encoded

    for n in (0, 1, JSON_CHUNK, 2 * JSON_CHUNK + 1):
        answer = {"round": 3, "jobs": [{"id": f"{i}", "after": [], "reason": "é \"x\""}
                                       for i in range(n)], "entities": [{"jobs": n}]}
        assert json.loads(encoded(answer)) == answer
    calls, real = [], json.dumps
    monkeypatch.setattr(json, "dumps", lambda value, **kw: calls.append(value) or real(value))
    encoded({"jobs": [{"id": str(i)} for i in range(2 * JSON_CHUNK + 1)]})
    assert max(len(c) for c in calls if isinstance(c, list)) == JSON_CHUNK


def test_a_status_to_another_caller_has_every_job_copied_no_more_than_a_chunk_a_call(
        monkeypatch) -> None:
    """A Status answered to another caller than its snapshot's is the snapshot with that
    caller, every job in order, and no copy takes more than ``COPY_CHUNK`` jobs at once
    (protobuf's copy holds the GIL for the whole call)."""
    from gavelsched.daemon import snapshot as snapshots
    from gavelsched.rpc import pb

    monkeypatch.setattr(snapshots, "COPY_CHUNK", 7)
    reply = pb.StatusResponse(round=2, policy="fifo", round_seconds=2.0, caller="daemon",
                              jobs=[pb.JobStatus(id=str(i), state="queued", job_type="A3C")
                                    for i in range(20)])
    snap = snapshots.Snapshot(2, "fifo", 2.0, 0.0, reply)
    extended = []
    real = type(reply.jobs).extend
    monkeypatch.setattr(type(reply.jobs), "extend",
                        lambda self, items: extended.append(len(items)) or real(self, items))
    answer = snap.status(caller="alice")
    assert answer.caller == "alice" and extended == [7, 7, 6]
    want = pb.StatusResponse()
    want.CopyFrom(reply)
    want.caller = "alice"
    assert answer == want


def test_a_users_token_opens_the_dashboard_until_the_user_is_removed() -> None:
    """With a users file, a user's or an admin's token opens the page (issue #28), and the
    cookie ``?token=`` sets for it stops working once the user is gone; a job's token and
    a token of no one do not open it."""
    from gavelsched.daemon.dashboard import Dashboard
    from gavelsched.rpc.identity import Identities, UserEntry, job_token, token_hash

    alice = UserEntry("alice", "user", frozenset({"team-a"}), token_hash("alice-token"))
    identities = [Identities("s3cret", [alice])]
    snap = [_snapshot()]
    board = Dashboard(lambda: snap[0], "s3cret", identities=lambda: identities[0])
    port = board.serve("127.0.0.1:0")
    base = f"http://127.0.0.1:{port}"

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **k):
            return None
    try:
        assert _get(base + "/api/status", "alice-token")[0] == 200
        assert _get(base + "/api/status", "s3cret")[0] == 200
        assert _get(base + "/api/status", job_token("s3cret", "0"))[0] == 401
        assert _get(base + "/api/status", "nobody")[0] == 401
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.build_opener(NoRedirect).open(base + "/?token=alice-token",
                                                         timeout=10)
        cookie = err.value.headers["Set-Cookie"].split(";")[0]
        assert err.value.code == 303 and "alice-token" not in cookie
        with_cookie = urllib.request.Request(base + "/api/status", headers={"Cookie": cookie})
        assert urllib.request.urlopen(with_cookie, timeout=10).status == 200
        identities[0] = Identities("s3cret", [])          # a reload removed alice
        with pytest.raises(urllib.error.HTTPError, match="401"):
            urllib.request.urlopen(with_cookie, timeout=10)
        assert _get(base + "/api/status", "alice-token")[0] == 401
    finally:
        board.close()


def test_a_users_picture_is_counted_against_their_budget_of_calls() -> None:
    """A user's ``/api/status`` takes from the same budget as their gRPC calls
    (``daemon/budgets.py``): past it, 429 with ``Retry-After`` and one line; the page and
    an admin's or the cluster's token are not counted, and another user has their own. A
    refusal is paused (``CallBudget.refuse``: 1 s at most) and counted for the metrics."""
    from gavelsched.daemon.budgets import CallBudget
    from gavelsched.daemon.dashboard import Dashboard
    from gavelsched.rpc.identity import Identities, UserEntry, token_hash

    users = [UserEntry(name, role, frozenset(), token_hash(f"{name}-token"))
             for name, role in (("alice", "user"), ("bob", "user"), ("root", "admin"))]
    budget = CallBudget(2, 600.0, lambda: 0.0, whose="user")    # 2, then one each 300 s
    limited: list[str] = []
    board = Dashboard(lambda: _snapshot(), "s3cret",
                      identities=lambda: Identities("s3cret", users), budget=budget,
                      on_limited=limited.append)
    port = board.serve("127.0.0.1:0")
    base = f"http://127.0.0.1:{port}"
    try:
        assert [_get(base + "/api/status", "alice-token")[0] for _ in range(2)] == [200, 200]
        assert limited == []
        request = urllib.request.Request(base + "/api/status",
                                         headers={"Authorization": "Bearer alice-token"})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(request, timeout=10)
        # held the refusal's pause (1 s of the 300 s alice must wait: the clock stands still)
        assert err.value.code == 429 and err.value.headers["Retry-After"] == "299"
        assert err.value.read() == (b"429: user 'alice' made more than 2 calls in 600 s; "
                                    b"try again in 299.00 s\n")
        assert limited == ["dashboard"]
        assert _get(base + "/", "alice-token")[0] == 200          # the page: not counted
        assert _get(base + "/api/status", "bob-token")[0] == 200
        for token in ("root-token", "s3cret", "root-token"):
            assert _get(base + "/api/status", token)[0] == 200
        assert limited == ["dashboard"]
    finally:
        board.close()


def test_utilisation_counts_a_draining_worker_s_held_gpus_in_service() -> None:
    # issue #29: "now 3/2 GPUs, 150%" while a worker drained: its runs still held GPUs
    # that the total left out
    from gavelsched.daemon.dashboard import Dashboard
    from gavelsched.daemon.snapshot import Snapshot
    from gavelsched.rpc import pb
    reply = pb.StatusResponse(
        round=5, policy="fifo", round_seconds=2.0, now_s=10.0,
        jobs=[pb.JobStatus(id=str(i), state="running", gpus=1, total_steps=10,
                           started_s=1.0, ended_s=-1.0, completion_s=-1.0) for i in range(3)],
        workers=[pb.WorkerStatus(id="0", type="v100", gpus=2, alive=True),
                 pb.WorkerStatus(id="1", type="v100", gpus=2, alive=True, drained=True,
                                 runs=1),
                 pb.WorkerStatus(id="2", type="v100", gpus=2, alive=True, drained=True)])
    board = Dashboard(lambda: Snapshot(5, "fifo", 2.0, 10.0, reply), None)
    board.sample()
    point = board.api()["utilisation"][-1]
    assert (point["busy"], point["total"]) == (3, 4)    # the drained idle one is out


def test_a_slow_status_shows_how_long_it_waits_then_keeps_the_last_answer(tmp_path) -> None:
    # issue #29: the page said "loading…" for as long as /api/status took; and it asked
    # again every 2 s whether the last answer had come or not
    from gavelsched.daemon.dashboard import Dashboard
    driver = _browser(tmp_path / "chromium-profile")
    slow, asked = [4.0], []

    def snapshot():
        if "process_request" in threading.current_thread().name:   # a request of the page
            asked.append(time.monotonic())
            time.sleep(slow[0])
        return _snapshot()
    board = Dashboard(snapshot, None)
    port = board.serve("127.0.0.1:0")
    try:
        driver.get(f"http://127.0.0.1:{port}/")
        meta = lambda: driver.find_element("id", "meta").text    # noqa: E731
        wait_until(lambda: "waiting for the scheduler's status… (" in meta(), 10,
                   "the page to say it waits")
        wait_until(lambda: "policy fifo" in meta(), 30, "the first answer")
        wait_until(lambda: "refreshing (" in meta(), 30, "the page to say it refreshes")
        assert "policy fifo" in meta()                           # the last answer stays
        gaps = [b - a for a, b in zip(asked, asked[1:])]
        assert gaps and min(gaps) >= slow[0]                     # one request at a time
    finally:
        slow[0] = 0.0
        board.close()
        driver.quit()


def test_a_failing_sample_leaves_a_gap_and_the_sampler_goes_on(monkeypatch, caplog) -> None:
    """A sample that raises (a bug) is logged once, however often it fails, and the
    utilisation graph goes on with the next sample that works: a gap, not an end."""
    from gavelsched.daemon import dashboard
    from gavelsched.daemon.snapshot import Snapshot
    from gavelsched.rpc import pb

    monkeypatch.setattr(dashboard, "SAMPLE_S", 0.01)
    now = {"round": 1, "fail": False}

    def snapshot() -> Snapshot:
        if now["fail"]:
            raise RuntimeError("a bug in the snapshot")
        return Snapshot(now["round"], "fifo", 2.0, float(now["round"]), pb.StatusResponse())

    board = dashboard.Dashboard(snapshot, "s3cret")
    board.serve("127.0.0.1:0")          # samples round 1 at once
    try:
        now["fail"] = True
        wait_until(lambda: sum("sample failed" in r.getMessage() for r in caplog.records) == 1,
                   10, "the failure logged", every=0.01)
        failed = len(caplog.records)
        now.update(round=2, fail=False)
        wait_until(lambda: [p["round"] for p in board.api()["utilisation"]] == [1, 2], 10,
                   "round 2 sampled after the failures", every=0.01)
        assert sum("sample failed" in r.getMessage() for r in caplog.records) == 1
        assert len(caplog.records) == failed
    finally:
        board.close()
