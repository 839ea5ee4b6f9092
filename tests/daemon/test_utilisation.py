"""The dashboard's utilisation history survives a restart (``gavelsched/daemon/
utilisation.py``): one point per round in ``utilisation.jsonl``, read back at start;
bad lines are skipped, and a file grown past twice the ring is compacted."""

from __future__ import annotations

import json

from gavelsched.daemon.utilisation import Utilisation


def rounds(history):
    return [(p["round"], p["busy"], p["total"]) for p in history.points()]


def test_the_history_is_read_back_after_a_restart(tmp_path):
    path = tmp_path / "utilisation.jsonl"
    first = Utilisation(path)
    first.record(0, 0.0, 1, 4)
    first.record(0, 1.0, 3, 4)          # the latest point of a round wins
    first.record(1, 6.0, 4, 4)
    first.record(2, 12.0, 2, 4)
    first.flush()                       # at shutdown: the round in progress too
    again = Utilisation(path)
    assert rounds(again) == [(0, 3, 4), (1, 4, 4), (2, 2, 4)]
    again.record(2, 13.0, 1, 4)         # the same round after the restart: replaced
    again.record(3, 18.0, 0, 4)
    assert rounds(Utilisation(path)) == [(0, 3, 4), (1, 4, 4), (2, 1, 4)]


def test_bad_lines_are_skipped_and_the_rest_kept(tmp_path, caplog):
    path = tmp_path / "utilisation.jsonl"
    good = [{"round": 1, "now_s": 6.0, "busy": 2, "total": 4},
            {"round": 2, "now_s": 12.0, "busy": 4, "total": 4}]
    path.write_bytes(b"\n".join([
        json.dumps(good[0]).encode(), b"\xff\xfe not utf-8", b"{not json",
        json.dumps({"round": 3, "now_s": float("nan"), "busy": 1, "total": 4}).encode(),
        json.dumps({"round": 4, "now_s": 1.0, "busy": 5, "total": 4}).encode(),
        json.dumps({"round": -1, "now_s": 1.0, "busy": 0, "total": 4}).encode(),
        json.dumps({"round": 5, "now_s": 1.0, "busy": 0, "total": 4, "x": 1}).encode(),
        json.dumps(good[1]).encode()]) + b"\n")
    history = Utilisation(path)
    assert history.points() == good
    assert "6 bad lines skipped" in caplog.text
    # the file was rewritten with the good points only
    assert [json.loads(line) for line in path.read_text().splitlines()] == good


def test_the_ring_is_bounded_and_the_file_compacted(tmp_path):
    path = tmp_path / "utilisation.jsonl"
    history = Utilisation(path, size=10)
    for r in range(50):
        history.record(r, 6.0 * r, r % 3, 4)
    assert [p["round"] for p in history.points()] == list(range(40, 50))
    assert len(path.read_text().splitlines()) == 49       # appended once per ended round
    again = Utilisation(path, size=10)
    assert [p["round"] for p in again.points()] == list(range(39, 49))
    assert len(path.read_text().splitlines()) == 10       # compacted


def test_without_a_file_it_keeps_memory_only(tmp_path):
    history = Utilisation(None)
    history.record(0, 0.0, 1, 2)
    history.record(1, 1.0, 2, 2)
    history.flush()
    assert rounds(history) == [(0, 1, 2), (1, 2, 2)]
    assert list(tmp_path.iterdir()) == []
