"""The callers' budgets (``daemon/budgets.py``): one job that loops on its RenewLease and
ReportSteps calls, or one user whose script loops on client calls, is refused with
RESOURCE_EXHAUSTED before the calls reach the executor, and every other job's and user's
calls are answered as before (docs/design.md, Safety rules: one bad job never stops the
others)."""

from __future__ import annotations

import logging
import time

import grpc
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gavelsched.daemon import budgets
from gavelsched.daemon.budgets import CALLS_PER_ROUND, Budgets, CallBudget, Overdrawn, refusal_pause
from gavelsched.daemon.config import ConfigError, load_config
from gavelsched.daemon.server import SchedulerDaemon
from gavelsched.rpc import pb, pb_grpc
from gavelsched.rpc.codes import retry_after
from gavelsched.rpc.security import channel


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_job_may_make_its_burst_then_one_call_per_interval():
    clock = Clock()
    budget = CallBudget(4, 8.0, clock)         # 4 in a burst, then one each 2 s
    assert [budget.take("a") for _ in range(4)] == [None] * 4
    assert budget.take("a") == pytest.approx(2.0)
    assert budget.take("b") is None            # another job's budget is its own
    clock.now = 1.0
    assert budget.take("a") == pytest.approx(1.0)
    clock.now = 2.0
    assert budget.take("a") is None
    assert budget.take("a") == pytest.approx(2.0)
    clock.now = 100.0                          # a quiet job has its whole burst again
    assert [budget.take("a") for _ in range(4)] == [None] * 4
    assert budget.take("a") is not None


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 8), st.floats(0.5, 20.0),
       st.lists(st.floats(0.0, 5.0), min_size=1, max_size=80))
def test_no_window_holds_more_calls_than_the_burst_and_the_rate_allow(burst, period_s, gaps):
    """The GCRA's bound: over any span of ``w`` seconds at most ``burst + w / interval``
    calls are allowed, however they come; a caller that calls at most at the budget's rate
    is never refused."""
    clock, budget = Clock(), CallBudget(burst, period_s, lambda: clock.now)
    interval, allowed = period_s / burst, []
    for gap in gaps:
        clock.now += gap
        if budget.take("job") is None:
            allowed.append(clock.now)
    for i, start in enumerate(allowed):
        for j in range(i, len(allowed)):
            span = allowed[j] - start
            assert j - i + 1 <= burst + span / interval + 1e-6
    paced = Clock()
    steady = CallBudget(burst, period_s, lambda: paced.now)
    for _ in range(3 * burst):
        assert steady.take("job") is None
        paced.now += interval * 1.000001


def test_the_table_forgets_the_jobs_that_have_their_whole_budget_again():
    clock = Clock()
    budget = CallBudget(2, 10.0, clock)
    for job in range(1000):
        budget.take(f"j{job}")
    assert len(budget) == 1000
    clock.now = 11.0                           # a round later: every entry is spent
    budget.take("late")
    assert len(budget) == 1


def test_a_budget_of_no_calls_is_no_limit_and_a_new_one_starts_afresh():
    for burst, period_s in ((-1, 1.0), (1, 0.0), (1, float("nan"))):
        with pytest.raises(ValueError):
            CallBudget(burst, period_s, Clock())
    budget = CallBudget(0, 1.0, Clock())
    assert all(budget.take("a") is None for _ in range(1000))
    budget.set(1, 60.0)                        # (a reload)
    assert budget.take("a") is None and budget.take("a") == pytest.approx(60.0)
    budget.set(2, 60.0)                        # every caller has its whole budget again
    assert [budget.take("a") for _ in range(2)] == [None, None]
    assert len(budget) == 1


def test_a_refused_call_is_held_until_its_job_may_call_again_within_limits():
    """A refusal answered at once is cheaper than the call: a job looping on its calls one
    at a time would only spin faster (benchmarks/job_flood.py). It is held until the job's
    next call is due, at most ``REFUSAL_PAUSE_S``, and never past its caller's deadline."""
    assert refusal_pause(0.3, None) == pytest.approx(0.3)
    assert refusal_pause(20.0, None) == budgets.REFUSAL_PAUSE_S
    assert refusal_pause(20.0, 0.5) == pytest.approx(0.5 - budgets.DEADLINE_MARGIN_S)
    assert refusal_pause(20.0, 0.05) == 0.0


def test_the_refusals_are_logged_once_per_interval_naming_the_worst_jobs(caplog):
    clock = Clock()
    log = Overdrawn("RenewLease and ReportSteps calls over their job's budget", "job",
                    every_s=5.0, clock=clock)
    with caplog.at_level(logging.WARNING, logger="gavelsched.daemon.budgets"):
        log.note("loop")
        for t, job in ((1.0, "loop"), (2.0, "loop"), (3.0, "other"), (6.0, "loop")):
            clock.now = t
            log.note(job)
        for n in range(7):                    # more jobs than a line names
            clock.now = 7.0 + n / 10
            log.note(f"j{n}")
        clock.now = 11.0
        log.note("j6")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "refused 1 RenewLease and ReportSteps calls over their job's budget ('loop' 1)",
        ("refused 4 RenewLease and ReportSteps calls over their job's budget in the last "
         "6.0 s ('loop' 3, 'other' 1)"),
        ("refused 8 RenewLease and ReportSteps calls over their job's budget in the last "
         "5.0 s ('j6' 2, 'j0' 1, 'j1' 1, 'j2' 1, 'j3' 1 and 2 more jobs)")]


def _config(tmp_path, **extra) -> dict:
    return {"listen": "127.0.0.1:0", "policy": "max_min_fairness_perf", "round_seconds": 60,
            "state_dir": str(tmp_path / "state"), "eta": False, **extra}


def _load(tmp_path, **extra):
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(_config(tmp_path, **extra)))
    return load_config(str(path))


def test_the_budget_is_set_in_the_cluster_yaml(tmp_path):
    assert _load(tmp_path).job_calls_per_round == CALLS_PER_ROUND
    assert _load(tmp_path, job_calls_per_round=0).job_calls_per_round == 0
    for bad in (-1, 2.5, "many", True):
        with pytest.raises(ConfigError, match="job_calls_per_round must be an integer >= 0"):
            _load(tmp_path, job_calls_per_round=bad)


def _refused(call) -> str:
    with pytest.raises(grpc.RpcError) as err:
        call()
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "\n" not in err.value.details()
    return err.value.details()


def test_a_job_that_loops_on_its_calls_is_refused_and_the_others_are_answered(tmp_path):
    """On a real scheduler over gRPC: a job's calls past its budget (3 a 60-s round here)
    are refused in one line (after a pause) before they reach the executor, RenewLease and
    ReportSteps alike; another job's are answered; the refusals are counted by method."""
    daemon = SchedulerDaemon(_load(tmp_path, job_calls_per_round=3)).start()
    try:
        stub = pb_grpc.IteratorToSchedulerStub(channel(f"127.0.0.1:{daemon.port}"))

        def report(job: str):
            return stub.ReportSteps(pb.ReportStepsRequest(
                job_id=job, steps=1, seconds=1.0, checkpointed=True), timeout=10)

        reached = []
        daemon.executor.processes.durable_steps = \
            lambda job, *a, **k: reached.append(job) or True
        assert all(report("loop").ok for _ in range(3))
        details = _refused(lambda: report("loop"))
        assert details.startswith("job 'loop' made more than 3 RenewLease and ReportSteps "
                                  "calls in 60 s (a round); try again in ")
        _refused(lambda: stub.RenewLease(pb.RenewLeaseRequest(
            job_id="loop", steps=1, seconds=1.0), timeout=10))
        assert report("other").ok
        assert reached == ["loop"] * 3 + ["other"]
        limited = daemon.metrics.registry.get_sample_value
        assert limited("gavelsched_calls_limited_total", {"method": "ReportSteps"}) == 1
        assert limited("gavelsched_calls_limited_total", {"method": "RenewLease"}) == 1
    finally:
        daemon.stop()


def test_no_budget_lets_every_call_through(tmp_path):
    daemon = SchedulerDaemon(_load(tmp_path, job_calls_per_round=0)).start()
    try:
        stub = pb_grpc.IteratorToSchedulerStub(channel(f"127.0.0.1:{daemon.port}"))
        daemon.executor.processes.durable_steps = lambda *a, **k: True
        for _ in range(3 * CALLS_PER_ROUND):
            assert stub.ReportSteps(pb.ReportStepsRequest(
                job_id="loop", steps=1, seconds=1.0, checkpointed=True), timeout=10).ok
    finally:
        daemon.stop()


def test_a_callers_refusals_are_paused_only_a_few_at_a_time(monkeypatch):
    """A caller's many threads must not hold many handler threads asleep: while
    ``PAUSED_PER_CALLER`` of its refusals are paused (2 here), its others are answered at
    once; another caller's are paused."""
    import threading

    from gavelsched.daemon import budgets as module

    monkeypatch.setattr(module, "PAUSED_PER_CALLER", 2)
    wake, slept, lock = threading.Event(), [], threading.Lock()

    def sleep(seconds):
        with lock:
            slept.append(seconds)
        wake.wait(30)

    monkeypatch.setattr(module.time, "sleep", sleep)
    budget = CallBudget(2, 10.0, Clock(), whose="user")
    held = [threading.Thread(target=budget.refuse, args=("loop", 4.0, None)) for _ in range(2)]
    for thread in held:
        thread.start()
    deadline = time.monotonic() + 30
    while len(slept) < 2 and time.monotonic() < deadline:
        wake.wait(0.01)         # (time.sleep is the fake's here)
    line, left = budget.refuse("loop", 4.0, None)          # answered at once
    assert line == "user 'loop' made more than 2 calls in 10 s; try again in 4.00 s"
    assert left == 4.0 and slept == [budgets.REFUSAL_PAUSE_S] * 2
    wake.set()
    for thread in held:
        thread.join()
    line, left = budget.refuse("other", 0.25, 5.0)
    assert line.endswith("try again in 0.00 s") and left == 0.0
    assert slept == [budgets.REFUSAL_PAUSE_S] * 2 + [0.25]
    budget.refuse("loop", 4.0, None)                        # paused again once free
    assert len(slept) == 4


def test_the_budgets_are_made_from_the_cluster_yaml_s_keys():
    made = Budgets.made(32, 5.0, 30.0)
    assert (made.jobs.burst, made.jobs.period_s) == (32, 30.0)
    assert (made.users.burst, made.users.period_s) == (100, 20.0)
    off = Budgets.made(0, 0.0, 30.0)
    assert all(off.jobs.take("j") is None and off.users.take("u") is None for _ in range(200))
    assert Budgets.made(1, 0.01, 30.0).users.burst == 1       # never below one call


def test_the_users_budget_is_set_in_the_cluster_yaml(tmp_path):
    assert _load(tmp_path).user_calls_per_second == budgets.USER_CALLS_PER_SECOND
    assert _load(tmp_path, user_calls_per_second=0).user_calls_per_second == 0
    for bad in (-1, "many", float("nan")):
        with pytest.raises(ConfigError, match="user_calls_per_second"):
            _load(tmp_path, user_calls_per_second=bad)


def test_a_user_s_calls_past_their_budget_are_refused_and_others_answered(tmp_path):
    """On a real scheduler with a users file: a user's calls past their budget (0.1 a
    second here: 2 at once, then one each 10 s) are refused in one line,
    RESOURCE_EXHAUSTED, with the seconds to wait; another user, and an admin (who has no
    budget), are answered. (The client's wait and retry: ``tests/client/test_retry_after.py``.)"""
    from gavelsched.daemon.users import add_user

    (tmp_path / "token").write_text("daemon-token")
    (tmp_path / "token").chmod(0o600)
    tokens = {name: add_user(tmp_path / "users.yaml", name, role, [])
              for name, role in (("loop", "user"), ("calm", "user"), ("root", "admin"))}
    daemon = SchedulerDaemon(_load(tmp_path, user_calls_per_second=0.1,
                                   auth_token_file="token", users_file="users.yaml")).start()
    try:
        def status(name: str):
            stub = pb_grpc.ClientToSchedulerStub(channel(f"127.0.0.1:{daemon.port}",
                                                         token=tokens[name]))
            return lambda: stub.Status(pb.StatusRequest(), timeout=10)

        for _ in range(2):
            status("loop")()
        with pytest.raises(grpc.RpcError) as err:
            status("loop")()
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert err.value.details().startswith(
            "user 'loop' made more than 2 calls in 20 s; try again in ")
        assert 0.0 < retry_after(err.value) <= 10.0
        status("calm")()
        for _ in range(20):
            status("root")()
        limited = daemon.metrics.registry.get_sample_value
        assert limited("gavelsched_calls_limited_total", {"method": "Status"}) == 1
    finally:
        daemon.stop()


def test_a_reload_puts_new_budgets_in_force(tmp_path):
    """``gavelsched reload`` (``SchedulerDaemon.reload``) puts the cluster YAML's budgets
    in force without a restart: a job refused over 3 calls a round is let through once
    the file says 0 (no limit), and refused again after 1 when it says 1."""
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(_config(tmp_path, job_calls_per_round=3)))
    daemon = SchedulerDaemon(load_config(str(path)), config_path=path).start()
    try:
        stub = pb_grpc.IteratorToSchedulerStub(channel(f"127.0.0.1:{daemon.port}"))
        daemon.executor.processes.durable_steps = lambda *a, **k: True

        def report():
            return stub.ReportSteps(pb.ReportStepsRequest(
                job_id="loop", steps=1, seconds=1.0, checkpointed=True), timeout=10)

        for _ in range(3):
            report()
        _refused(report)
        path.write_text(yaml.safe_dump(_config(tmp_path, job_calls_per_round=0)))
        line = daemon.reload("root")
        assert "change at a restart only" not in line
        assert all(report().ok for _ in range(10))
        path.write_text(yaml.safe_dump(_config(tmp_path, job_calls_per_round=1)))
        daemon.reload("root")
        assert report().ok
        _refused(report)
        assert daemon.config.job_calls_per_round == 1
    finally:
        daemon.stop()
