"""The core and the planner never read the clock: time is an argument (docs/design.md, The flow;
docs/style.md §4, one clock).

Every clock Python offers is patched so that a read made while code of
``gavelsched.core`` or ``gavelsched.mechanism`` is on the stack fails the test. The one
exemption is named: ``policies.base.Policy.solve``, whose timer measures
``Allocation.solve_s``; reads below it on the stack (that timer, and the solver library's
own timers) belong to the policy, not to the core. Names bound before the patch (``from
time import monotonic`` in a core module) are replaced too. The companion tests show the
guard fails when a clock is read from a core module.
"""

from __future__ import annotations

import datetime
import importlib.util
import logging
import sys
import time
import types

import pytest

from gavelsched.core import CoreConfig, JobSpec, Report, SchedulerCore
from gavelsched.mechanism import ClusterView
from policies import get_policy
from policies.base import Policy

CLOCKS = ("perf_counter", "perf_counter_ns", "process_time", "process_time_ns", "time",
          "time_ns", "monotonic", "monotonic_ns", "thread_time", "thread_time_ns")
GUARDED = ("gavelsched.core", "gavelsched.mechanism")
# The exemption, by name: the timer that measures Allocation.solve_s.
EXEMPT = {Policy.solve.__code__: "policies.base.Policy.solve (Allocation.solve_s)"}


class ClockGuard:
    """Records every clock read made under core or planner code, and raises there."""

    def __init__(self) -> None:
        self.violations: list[str] = []
        self.exempt_reads = 0

    def check(self, clock: str) -> None:
        frame = sys._getframe(2)  # the caller of the patched clock
        while frame is not None:
            if frame.f_code in EXEMPT:
                self.exempt_reads += 1
                return
            module = frame.f_globals.get("__name__", "")
            if any(module == p or module.startswith(p + ".") for p in GUARDED):
                where = f"{clock}() read in {module}.{frame.f_code.co_name}:{frame.f_lineno}"
                self.violations.append(where)
                raise AssertionError(f"the core read the clock: {where}")
            frame = frame.f_back


def _guarded_function(guard: ClockGuard, name: str, real):
    def clock(*args, **kwargs):
        guard.check(f"time.{name}")
        return real(*args, **kwargs)
    clock.__name__ = name
    return clock


def _guarded_classes(guard: ClockGuard):
    class GuardedDate(datetime.date):
        @classmethod
        def today(cls):
            guard.check("datetime.date.today")
            return super().today()

    class GuardedDateTime(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            guard.check("datetime.datetime.now")
            return super().now(tz)

        @classmethod
        def utcnow(cls):
            guard.check("datetime.datetime.utcnow")
            return super().utcnow()

        @classmethod
        def today(cls):
            guard.check("datetime.datetime.today")
            return super().today()

    return GuardedDate, GuardedDateTime


@pytest.fixture
def clock_guard(monkeypatch) -> ClockGuard:
    guard = ClockGuard()
    replaced = {}
    for name in CLOCKS:
        real = getattr(time, name)
        replaced[id(real)] = _guarded_function(guard, name, real)
        monkeypatch.setattr(time, name, replaced[id(real)])
    date_cls, datetime_cls = _guarded_classes(guard)
    replaced[id(datetime.date)] = date_cls
    replaced[id(datetime.datetime)] = datetime_cls
    monkeypatch.setattr(datetime, "date", date_cls)
    monkeypatch.setattr(datetime, "datetime", datetime_cls)
    # names bound at import time in core and planner modules (``from time import ...``)
    for module_name, module in list(sys.modules.items()):
        if module is None or not any(module_name == p or module_name.startswith(p + ".")
                                     for p in GUARDED):
            continue
        for attr, value in list(vars(module).items()):
            if id(value) in replaced:
                monkeypatch.setattr(module, attr, replaced[id(value)])
    # A log record carries a timestamp (logging reads time.time_ns); that is no decision
    # of the core, so records are not made during the run.
    logging.disable(logging.CRITICAL)
    yield guard
    logging.disable(logging.NOTSET)


RATES = {"resnet": {"v100": 10.0, "p100": 5.0, "k80": 2.0},
         "lm": {"v100": 4.0, "p100": 3.0, "k80": 1.5}}


class Rates:
    """A ThroughputSource: steps/s by job type and worker type."""

    def get(self, worker_type, job_type, scale_factor=1):
        return RATES[job_type].get(worker_type, 0.0)

    def pair(self, worker_type, a, b):
        return None


def _finish(core: SchedulerCore, rnd, end: float):
    reports = [Report(t.key, t.steps, max(s / r for s, r in zip(t.steps, t.throughputs)))
               for t in rnd.tasks]
    return core.end_round(reports, end)


@pytest.mark.parametrize("name", ["max_min_fairness_perf", "finish_time_fairness_perf",
                                  "fifo"])
def test_the_core_never_reads_the_clock(name, clock_guard):
    """Arrivals, completions, re-solves (event-driven and periodic), worker failures, a
    worker joining and a cancellation, with a real cvxpy policy."""
    policy = get_policy(name)
    view = ClusterView.build({"v100": 2, "p100": 2, "k80": 2})
    config = CoreConfig.for_policy(policy, round_seconds=360.0, min_resolve_interval_s=0.0,
                                   resolve_period_s=720.0)
    core = SchedulerCore(policy, view, Rates(), config)
    R, now, completed, resolves = 360.0, 0.0, [], 0
    for i in range(4):
        core.submit(JobSpec(id=str(i), job_type=("resnet", "lm")[i % 2], scale_factor=1,
                            total_steps=2000 + 3000 * i), now)
    for k in range(12):
        if k == 2:
            core.submit(JobSpec(id="late", job_type="lm", scale_factor=2, total_steps=4000),
                        now)
        if k == 3:
            core.fail_workers([min(core.view.live_set("v100"))], now)
        if k == 5:
            core.add_workers("k80", 2, now)
        if k == 6 and "3" in core.active_jobs:
            core.cancel("3", now)
        rnd = core.start_round(now)
        resolves += rnd.resolved is not None
        now += R
        completed += _finish(core, rnd, now).completed
    assert clock_guard.violations == []
    assert resolves >= 4 and len(completed) >= 3
    assert clock_guard.exempt_reads >= resolves  # the patch was live: solve_s was timed


# ---- the guard itself fails when it should -------------------------------------------------
def _core_module(monkeypatch, tmp_path, source: str,
                 name: str = "gavelsched.core._clock_probe") -> types.ModuleType:
    """A module named like part of the core (or planner), imported from a file and
    registered in sys.modules."""
    path = tmp_path / "clock_probe.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, name, module)
    return module


@pytest.mark.parametrize("source", [
    "import time\ndef read():\n    return time.monotonic()\n",
    "import time\ndef read():\n    return time.perf_counter_ns()\n",
    "from time import perf_counter\ndef read():\n    return perf_counter()\n",
    "import datetime\ndef read():\n    return datetime.datetime.now()\n",
    "from datetime import datetime\ndef read():\n    return datetime.utcnow()\n",
    "import datetime\ndef read():\n    return datetime.date.today()\n",
])
@pytest.mark.parametrize("package", GUARDED)
def test_the_guard_fails_on_a_clock_read_in_a_core_module(source, package, monkeypatch,
                                                          tmp_path, request):
    # imported before the guard is installed, as the real modules are
    module = _core_module(monkeypatch, tmp_path, source, f"{package}._clock_probe")
    guard = request.getfixturevalue("clock_guard")
    with pytest.raises(AssertionError, match="the core read the clock"):
        module.read()
    assert len(guard.violations) == 1 and "_clock_probe.read" in guard.violations[0]


def test_the_guard_fails_when_the_core_reads_the_clock_mid_round(monkeypatch, tmp_path,
                                                                 clock_guard):
    """A clock read slipped into the core's round (monkeypatched into SchedulerCore)."""
    module = _core_module(monkeypatch, tmp_path, (
        "import time\n"
        "def stamped(start_round):\n"
        "    def start(self, now):\n"
        "        self.stamp = time.time()\n"
        "        return start_round(self, now)\n"
        "    return start\n"))
    monkeypatch.setattr(SchedulerCore, "start_round", module.stamped(SchedulerCore.start_round))
    policy = get_policy("max_min_fairness_perf")
    core = SchedulerCore(policy, ClusterView.build({"v100": 1}), Rates(),
                         CoreConfig.for_policy(policy))
    core.submit(JobSpec(id="0", job_type="lm", scale_factor=1, total_steps=100), 0.0)
    with pytest.raises(AssertionError, match=r"time\.time\(\) read in gavelsched\.core"):
        core.start_round(0.0)
    assert clock_guard.violations


def test_reads_outside_the_core_are_not_counted(clock_guard):
    """The test harness may read the clock; only core and planner frames are guarded."""
    assert time.perf_counter() > 0 and datetime.datetime.now().year > 2000
    assert clock_guard.violations == []
