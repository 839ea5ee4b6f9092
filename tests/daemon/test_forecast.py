"""The scheduler's own ETAs (issue #29): the forecast process and the thread that feeds it
(``gavelsched/daemon/forecast.py``, ``simulator/forecast.py``), with real subprocesses."""

from __future__ import annotations

import io
import sys
import threading

import pytest

from gavelsched.daemon.forecast import Forecaster
from gavelsched.rpc import pb
from gavelsched.rpc.frames import FrameError, read_frame, write_frame
from simulator.forecast import forecast


def picture(now=100.0, ends=104.0) -> pb.StatusResponse:
    """Two jobs on one v100 (10 s rounds): one running since an earlier round, one queued."""
    reply = pb.StatusResponse(policy="max_min_fairness_perf", round_seconds=10.0, now_s=now,
                              epoch_unix=1.7e9, resolve="responsive", round_ends_s=ends)
    reply.workers.add(id="0", type="v100", gpus=1, alive=True)
    reply.jobs.add(id="a", state="running", total_steps=400, steps_done=0,
                   job_type="ResNet-18", scale_factor=1, worker_type="v100",
                   steps_per_s={"v100": 2.0}, started_s=50.0, ended_s=-1, completion_s=-1,
                   run_began_s=84.0, run_up_s=86.0)
    reply.jobs.add(id="b", state="queued", total_steps=100, job_type="ResNet-18",
                   scale_factor=1, steps_per_s={"v100": 2.0}, started_s=-1, ended_s=-1,
                   completion_s=-1, run_began_s=-1, run_up_s=-1)
    return reply


def test_frames_round_trip_and_a_cut_frame_is_refused():
    stream = io.BytesIO()
    write_frame(stream, picture())
    write_frame(stream, pb.StatusResponse(now_s=1.0))
    stream.seek(0)
    first, second = pb.StatusResponse(), pb.StatusResponse()
    first.ParseFromString(read_frame(stream))
    second.ParseFromString(read_frame(stream))
    assert first == picture() and second.now_s == 1.0 and read_frame(stream) is None
    cut = io.BytesIO()
    write_frame(cut, picture())
    with pytest.raises(FrameError, match="ended"):
        read_frame(io.BytesIO(cut.getvalue()[:-3]))


def test_a_picture_s_forecast_is_on_the_scheduler_s_clock():
    answer = forecast(picture())
    got = {j.id: (j.eta_start_s, j.eta_finish_s) for j in answer.jobs}
    assert answer.eta_computed_s == 100.0 and answer.eta_error == ""
    start_b, finish_b = got["b"]
    assert start_b >= 104.0 - 1e-6          # not before the placed round's end
    assert got["a"][0] < 0                   # started already: no start predicted
    # both share the GPU: 500 steps at 2/s is 250 s of work from t = 86 (a's run came up
    # then and has not reported since: its count is the checkpoint it began from)
    assert 86.0 + 250.0 <= max(got["a"][1], finish_b) <= 86.0 + 250.0 + 60.0


def test_a_picture_that_cannot_be_replayed_answers_with_its_error():
    bad = picture()
    bad.policy = "no_such_policy"
    answer = forecast(bad)
    assert len(answer.jobs) == 0 and "no_such_policy" in answer.eta_error


class Snap:
    """What the forecaster reads of a ``Snapshot``."""

    def __init__(self, reply):
        self.reply = reply

    def status(self, request):
        return self.reply


def forecaster(**kwargs):
    ready = threading.Event()
    return Forecaster(ready.set, **kwargs), ready


def test_the_forecaster_replays_an_offered_picture_in_its_process():
    f, ready = forecaster()
    try:
        f.offer(Snap(picture()))
        assert ready.wait(60)
        got = f.latest
        assert got.error == "" and got.computed_s == 100.0
        assert set(got.finish_s) == {"a", "b"} and set(got.start_s) == {"b"}
        assert got.replay_s > 0
    finally:
        f.close()


def test_a_dying_or_stuck_forecast_process_becomes_an_error_and_is_replaced():
    dies = (sys.executable, "-c", "import sys; sys.stdin.buffer.read(4); sys.exit(3)")
    f, ready = forecaster(command=dies)
    try:
        f.offer(Snap(picture()))
        assert ready.wait(30)
        assert "exited (3)" in f.latest.error or "failed" in f.latest.error
        assert f.latest.finish_s == {}
    finally:
        f.close()
    stuck = (sys.executable, "-c", "import time; time.sleep(60)")
    f, ready = forecaster(command=stuck, timeout_s=0.5)
    try:
        f.offer(Snap(picture()))
        assert ready.wait(30)
        assert "longer than 0.5 s" in f.latest.error
        ready.clear()
        f.offer(Snap(picture()))             # a fresh process for the next picture
        assert ready.wait(30) and "longer than" in f.latest.error
    finally:
        f.close()


ONCE = """
import pathlib, sys
from gavelsched.rpc import pb
from gavelsched.rpc.frames import read_frame, write_frame
from simulator.forecast import forecast
mark = pathlib.Path(sys.argv[1])
if mark.exists():
    sys.exit(3)
mark.touch()
reply = pb.StatusResponse()
reply.ParseFromString(read_frame(sys.stdin.buffer))
write_frame(sys.stdout.buffer, forecast(reply))
"""


def test_after_a_failed_replay_the_last_etas_stay_with_the_error(tmp_path):
    # a forecast process that answers its first picture, then dies at its next start
    f, ready = forecaster(command=(sys.executable, "-c", ONCE, str(tmp_path / "answered")))
    try:
        f.offer(Snap(picture()))
        assert ready.wait(60) and f.latest.finish_s and not f.latest.error
        good = f.latest
        ready.clear()
        f.offer(Snap(picture(now=101.0)))
        assert ready.wait(30)
        assert f.latest.error and f.latest.finish_s == good.finish_s
        assert f.latest.computed_s == good.computed_s
    finally:
        f.close()


def test_a_forecast_command_that_cannot_start_is_an_error_not_a_dead_thread(tmp_path):
    f, ready = forecaster(command=(str(tmp_path / "no-such-python"), "-m", "x"))
    try:
        f.offer(Snap(picture()))
        assert ready.wait(30) and "the forecast process failed" in f.latest.error
        ready.clear()
        f.offer(Snap(picture()))             # the thread is still there to answer
        assert ready.wait(30)
    finally:
        f.close()


class Flaky(Snap):
    """A snapshot whose first look raises (a bug on the scheduler's side, not the
    forecast process's)."""

    def __init__(self, reply):
        super().__init__(reply)
        self.looks = 0

    def status(self, request):
        self.looks += 1
        if self.looks == 1:
            raise KeyError("no such row")
        return self.reply


def test_a_bug_while_making_the_picture_is_an_error_and_the_thread_goes_on():
    f, ready = forecaster()
    try:
        snap = Flaky(picture())
        f.offer(snap)
        assert ready.wait(30) and "internal error: KeyError" in f.latest.error
        assert f.latest.finish_s == {}
        ready.clear()
        f.offer(snap)                        # the thread is still there, and answers
        assert ready.wait(60) and f.latest.error == ""
        assert set(f.latest.finish_s) == {"a", "b"}
    finally:
        f.close()
