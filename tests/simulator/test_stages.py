"""``benchmarks/simulate.py --stages``: each stage of the round it names is a callable of
the code today, is timed at every call, and is put back after the run."""

from __future__ import annotations

import importlib
import threading

from tests.benchmark_modules import loaded


def _holders(sim):
    out = []
    for _, module, owner, attr in sim.STAGES:
        holder = importlib.import_module(module)
        out.append((getattr(holder, owner) if owner else holder, attr))
    return out


def test_every_stage_is_timed_at_each_call_and_put_back(monkeypatch, capsys):
    with loaded("simulate") as sim:
        monkeypatch.setitem(sim.CASES, "tiny", (40, 6.0, "max_min_fairness_perf", False, None))
        holders = _holders(sim)
        assert all(callable(getattr(h, attr)) for h, attr in holders)
        before = [getattr(h, attr) for h, attr in holders]
        sim.stages("tiny")
        assert [getattr(h, attr) for h, attr in holders] == before
    lines = capsys.readouterr().out.splitlines()
    head = lines[0].split()
    rounds, resolves = int(head[5]), int(head[7])
    calls = {line[:34].strip(): int(line[34:].split()[2]) for line in lines[2:]}
    assert set(calls) == {label.strip() for label, *_ in sim.STAGES}
    assert calls["the planner (plan_round)"] == rounds
    assert calls["the policy (policy.solve)"] == resolves > 0


def test_a_pure_stage_called_twice_leaves_the_run_as_it_was(monkeypatch):
    """``--stages CASE --instructions`` counts a stage as a run with it called twice less a
    plain run, which holds only if a second call changes nothing: the same rounds,
    re-solves and JCT, and each call made twice."""
    with loaded("simulate") as sim:
        monkeypatch.setitem(sim.CASES, "tiny", (40, 6.0, "max_min_fairness_perf", False, None))
        for label in sim.PURE_STAGES:
            holder, attr = sim._stage(label)
            inner = getattr(holder, attr)
            calls, own = [], threading.current_thread()

            def counted(*args, _inner=inner, **kwargs):
                if threading.current_thread() is own:  # (not a thread an earlier test
                    calls.append(1)                     # of this process left running)
                return _inner(*args, **kwargs)

            monkeypatch.setattr(holder, attr, counted)     # (put back at the test's end)
            plain, once = sim.run_case("tiny"), len(calls)
            sim.call_twice(label)
            doubled = sim.run_case("tiny")
            monkeypatch.setattr(holder, attr, inner)
            assert once >= plain[sim.PURE_STAGES[label]] > 0 and len(calls) == 3 * once, label
            assert [doubled[k] for k in ("rounds", "resolves", "avg_jct_h")] == \
                [plain[k] for k in ("rounds", "resolves", "avg_jct_h")], label
