"""The dashboard's teams (``gavelsched/daemon/dashboard.py``, ``utilisation.py``): each
job's user and entity, the entities of a hierarchical policy, and each entity's share of
the GPUs per round, kept in the utilisation series across restarts; with no entity (one
implicit entity) the page hides its entity views. The page itself is checked in a headless
Chromium when one is installed (``tests/browser.py``)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from gavelsched.daemon.dashboard import PAGE, Dashboard, entities, entity_gpus
from gavelsched.daemon.snapshot import Snapshot
from gavelsched.daemon.utilisation import Utilisation
from gavelsched.rpc import pb
from tests import browser

from .cluster import wait_until

TOKEN = "s3cret"


def job(id_, entity, gpus, user="ann", state="running") -> pb.JobStatus:
    return pb.JobStatus(id=id_, state=state, steps_done=1, total_steps=10, job_type="A3C",
                        scale_factor=max(1, gpus), worker_type="v100" if gpus else "",
                        gpus=gpus, entity=entity, user=user, started_s=1.0, ended_s=-1.0,
                        completion_s=-1.0)


def snapshot(round_: int, jobs, teams=()) -> Snapshot:
    reply = pb.StatusResponse(
        round=round_, policy="hierarchical", round_seconds=2.0, now_s=2.0 * round_,
        epoch_unix=0.0, jobs=jobs, entities=list(teams),
        workers=[pb.WorkerStatus(id="0", type="v100", gpus=8, alive=True)])
    return Snapshot(round_, "hierarchical", 2.0, 2.0 * round_, reply)


TEAMS = [pb.EntityStatus(name="vision", weight=2.0, policy="fairness", max_gpus=6, gpus=5,
                         jobs=2),
         pb.EntityStatus(name="nlp", weight=1.0, policy="fifo", max_gpus=0, gpus=2, jobs=2)]
ROUNDS = [[job("1", "vision", 4), job("2", "nlp", 2, "bob"), job("3", "", 1, "cy")],
          [job("1", "vision", 4), job("4", "vision", 1), job("2", "nlp", 2, "bob"),
           job("5", "nlp", 0, "bob", "queued")]]


def get(port: int, path: str) -> dict:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                     headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return json.loads(reply.read())


def test_entity_gpus_and_entities_of_a_status():
    reply = snapshot(1, ROUNDS[1], TEAMS).response
    assert entity_gpus(reply) == {"vision": 5, "nlp": 2}
    assert entity_gpus(snapshot(0, ROUNDS[0]).response) == {"vision": 4, "nlp": 2}
    assert entities(reply) == [
        {"name": "vision", "weight": 2.0, "policy": "fairness", "max_gpus": 6, "gpus": 5,
         "jobs": 2},
        {"name": "nlp", "weight": 1.0, "policy": "fifo", "max_gpus": 0, "gpus": 2, "jobs": 2}]
    assert entities(snapshot(0, [job("1", "", 1)]).response) == []


def test_a_shared_gpu_counts_once_for_each_entity_of_its_pair():
    """As the entity's GPU cap counts it (gavelsched/mechanism/quota.py): jobs 1 and 4 of
    vision share a GPU (1 of vision's), job 2 of nlp shares one with job 6 of vision (1
    of each)."""
    jobs = [job("1", "vision", 1), job("4", "vision", 1), job("2", "nlp", 1, "bob"),
            job("6", "vision", 1)]
    for a, b in (("1", "4"), ("2", "6")):
        jobs[[j.id for j in jobs].index(a)].shared_with = b
        jobs[[j.id for j in jobs].index(b)].shared_with = a
    assert entity_gpus(snapshot(1, jobs).response) == {"vision": 2, "nlp": 1}


def test_the_series_carries_each_entitys_gpus_per_round(tmp_path):
    snap = [snapshot(0, ROUNDS[0], TEAMS)]
    board = Dashboard(lambda: snap[0], TOKEN, tmp_path / "utilisation.jsonl")
    port = board.serve("127.0.0.1:0")
    try:
        snap[0] = snapshot(1, ROUNDS[1], TEAMS)
        board.sample()
        data = get(port, "/api/status")
    finally:
        board.close()
    assert [(p["round"], p["busy"], p["total"], p["entities"]) for p in data["utilisation"]] \
        == [(0, 7, 8, {"nlp": 2, "vision": 4}), (1, 7, 8, {"nlp": 2, "vision": 5})]
    assert data["entities"] == entities(snap[0].response)
    assert {j["id"]: j["entity"] for j in data["jobs"]} == {
        "1": "vision", "4": "vision", "2": "nlp", "5": "nlp"}
    # kept across a restart, as the utilisation is
    again = Utilisation(tmp_path / "utilisation.jsonl")
    assert [p["entities"] for p in again.points()] == [{"nlp": 2, "vision": 4},
                                                      {"nlp": 2, "vision": 5}]


def test_without_entities_the_status_has_none(tmp_path):
    snap = snapshot(0, [job("1", "", 2)])
    board = Dashboard(lambda: snap, TOKEN)
    port = board.serve("127.0.0.1:0")
    try:
        data = get(port, "/api/status")
    finally:
        board.close()
    assert data["entities"] == [] and data["utilisation"][0]["entities"] == {}


@pytest.mark.parametrize("entities_, kept", [
    ({"a": 1, "b": 2}, True), ({}, True), (None, True),
    ({"a": 0}, False), ({"a": -1}, False), ({"a": 1.5}, False), ({"a": True}, False),
    ({"a": 4}, False),                  # more than the GPUs held
    ([1], False), ("a", False)])
def test_bad_entity_maps_in_the_file_are_skipped(tmp_path, entities_, kept):
    point = {"round": 1, "now_s": 2.0, "busy": 3, "total": 4}
    if entities_ is not None:
        point["entities"] = entities_
    path = tmp_path / "utilisation.jsonl"
    path.write_text(json.dumps(point) + "\n")
    assert Utilisation(path).points() == ([point] if kept else [])


def test_the_page_has_the_user_and_entity_columns_and_the_entity_views():
    head = PAGE.split(b"<tbody>")[0]
    jobs_head = PAGE.split(b'<table id="jobs">')[1].split(b"</thead>")[0]
    assert b"<th>user</th><th>entity</th>" in jobs_head
    assert b'<section id="entities-view" hidden>' in head
    assert b'<svg id="entity-chart"' in head and b'<table id="entities">' in PAGE
    script = PAGE.split(b"<script>")[1]
    for needle in (b'j.user || "-", "user"', b'j.entity || "-", "entity"', b"renderEntities(d)",
                   b"p.entities"):
        assert needle in script, needle


# ---- in a browser ------------------------------------------------------------------------

def _page(driver) -> dict:
    return driver.execute_script("""
        const cells = tr => [...tr.querySelectorAll('td')].map(td => td.textContent);
        return {
          view_hidden: document.getElementById('entities-view').hidden,
          jobs: Object.fromEntries([...document.querySelectorAll('#jobs tbody tr')].map(
            tr => [tr.dataset.job, {user: tr.querySelector('.user').textContent,
                                    entity: tr.querySelector('.entity').textContent}])),
          entities: [...document.querySelectorAll('#entities tbody tr')].map(cells),
          bars: [...document.querySelectorAll('#entity-chart rect.held')].map(
            r => [r.dataset.entity, +r.getAttribute('height')]),
          legend: document.getElementById('entity-legend').textContent,
          busy: document.querySelectorAll('#chart rect.busy').length};""")


def test_the_page_draws_users_entities_and_shares(tmp_path: Path) -> None:
    why = browser.missing()
    if why:
        pytest.skip(why)
    driver = browser.chromium(tmp_path / "chromium-profile")
    snap = [snapshot(0, ROUNDS[0], TEAMS)]
    board = Dashboard(lambda: snap[0], TOKEN)
    port = board.serve("127.0.0.1:0")
    try:
        snap[0] = snapshot(1, ROUNDS[1], TEAMS)
        board.sample()
        want = {j["id"]: j for j in get(port, "/api/status")["jobs"]}
        driver.get(f"http://127.0.0.1:{port}/?token={TOKEN}")
        page = wait_until(lambda: driver.execute_script("return document.body.dataset.loaded")
                          and _page(driver), 30, "the page to load the status")
        assert not page["view_hidden"]
        assert page["jobs"] == {i: {"user": j.get("user") or "-", "entity": j["entity"]}
                                for i, j in want.items()}
        assert page["entities"] == [["vision", "2", "fairness", "6", "5", "2"],
                                    ["nlp", "1", "fifo", "-", "2", "2"]]
        # round 0: nlp 2, vision 4, one GPU of no entity; round 1: nlp 2, vision 5
        names = [name for name, _ in page["bars"]]
        assert names == ["nlp", "vision", "(none)", "nlp", "vision"]
        heights = dict(zip(range(5), (h for _, h in page["bars"])))
        assert heights[1] == pytest.approx(2 * heights[0]) and \
            heights[4] == pytest.approx(5 * heights[2])
        assert "vision 63%" in page["legend"] and "nlp 25%" in page["legend"]
        assert page["busy"] == 2

        # one implicit entity: the entity views are hidden, the rest is drawn
        snap[0] = snapshot(2, [job("9", "", 1, "dee")])
        quiet = Dashboard(lambda: snap[0], TOKEN)
        other = quiet.serve("127.0.0.1:0")
        try:
            driver.get(f"http://127.0.0.1:{other}/?token={TOKEN}")
            page = wait_until(lambda: driver.execute_script(
                "return document.body.dataset.loaded") and _page(driver), 30, "the page")
            assert page["view_hidden"] and page["entities"] == [] and page["bars"] == []
            assert page["jobs"]["9"]["entity"] == "-" and page["busy"] == 1
        finally:
            quiet.close()
    finally:
        board.close()
        driver.quit()
