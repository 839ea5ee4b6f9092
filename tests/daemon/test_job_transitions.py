"""Job states as one transition table (``gavelsched/daemon/jobs.py``, issue #27): the table
refuses what it does not list, the final states are those with no way out, ``Jobs`` checks
and writes every change, and no other module of ours assigns a job's state."""

from __future__ import annotations

import ast
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gavelsched.core import JobSpec
from gavelsched.daemon import jobs
from gavelsched.daemon.jobs import IllegalTransition, JobRow, Jobs
from gavelsched.daemon.store import Store

ROOT = Path(__file__).resolve().parents[2]
OWNER = ROOT / "gavelsched/daemon/jobs.py"
# calls that make a job row with a state: ``row.but(state=...)``, ``replace(row, state=...)``,
# ``JobRow(..., state=...)`` (or its state as the fourth positional argument)
MAKERS = ("but", "replace", "JobRow")
STATE_POSITION = 3


@pytest.mark.parametrize("old, new", [
    ("done", "running"), ("done", "preempted"), ("done", "failed"), ("done", "done"),
    ("failed", "running"), ("failed", "queued"), ("cancelled", "done"),
    ("cancelled", "running"), ("queued", "preempted"), ("queued", "queued"),
    ("running", "queued"), ("running", "running"), ("preempted", "queued"),
    ("preempted", "preempted"), ("queued", "paused"), ("paused", "running")])
def test_the_table_refuses_a_transition_it_does_not_list(old, new):
    with pytest.raises(IllegalTransition, match=f"{old} -> {new} is not a transition"):
        jobs.check("7", old, new)


@pytest.mark.parametrize("old, new", [
    ("queued", "running"), ("running", "preempted"), ("preempted", "running"),
    *((s, end) for s in ("queued", "running", "preempted")
      for end in ("done", "failed", "cancelled"))])
def test_the_table_allows_a_run_to_start_end_and_a_job_to_end_from_any_active_state(old,
                                                                                   new):
    jobs.check("7", old, new)


def test_the_final_states_are_those_with_no_way_out_and_the_rest_are_active():
    assert jobs.FINAL == {s for s in jobs.STATES if not jobs.TRANSITIONS[s]}
    assert jobs.FINAL == {"done", "failed", "cancelled"}
    assert jobs.ACTIVE == ("queued", "running", "preempted", "held")
    assert set(jobs.STATES) == set(jobs.ACTIVE) | jobs.FINAL
    assert all(after <= set(jobs.STATES) for after in jobs.TRANSITIONS.values())
    assert jobs.WAITING == ("queued", "preempted")
    # every active state can end, and is reachable from the first one
    reached, todo = {jobs.FIRST}, [jobs.FIRST]
    while todo:
        for nxt in jobs.TRANSITIONS[todo.pop()] - reached:
            reached.add(nxt)
            todo.append(nxt)
    assert reached == set(jobs.STATES)


def row(job_id: str = "0", **changes) -> JobRow:
    return JobRow(JobSpec(id=job_id, job_type="ResNet-18", scale_factor=1,
                          total_steps=100)).but(**changes)


def test_jobs_checks_writes_and_tells_of_every_change(tmp_path):
    store, told = Store(tmp_path), []
    table = Jobs(store, changed=lambda: told.append(1))
    table.submit([row()])
    table.start("0", 2.0, "v100")
    assert table["0"].state == "running" and table["0"].started_s == 2.0
    assert table.credit("0", 40) == 40 and table.credit("0", 30) == 0
    table.preempt("0")
    assert table["0"].state == "preempted"
    table.finish("0", 9.0)
    assert (table["0"].state, table["0"].steps_done, table["0"].ended_s) == ("done", 100, 9.0)
    with pytest.raises(IllegalTransition, match="done -> running"):
        table.start("0", 10.0, "v100")
    with pytest.raises(IllegalTransition, match="done -> cancelled"):
        table.cancel("0", 10.0)
    assert len(told) == 5                     # submit, start, credit, preempt, finish
    assert [(j.state, j.steps_done, j.started_s) for j in store.jobs()] == [("done", 100, 2.0)]
    store.close()


def test_a_restore_puts_every_job_not_final_back_to_its_waiting_state(tmp_path):
    store = Store(tmp_path)
    table = Jobs(store)
    rows = [row("0", state="running", started_s=1.0), row("1", state="running"),
            row("2", state="queued", steps_done=5), row("3", state="failed", reason="x")]
    again = table.restore(rows)
    assert [j.id for j in again] == ["0", "1", "2"]
    assert [table[j].state for j in "0123"] == ["preempted", "queued", "preempted", "failed"]
    store.close()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["submit", "start", "preempt", "hold", "release",
                                           "finish", "fail", "cancel"]),
                          st.integers(0, 5), st.sampled_from(["ann", "bo"])), max_size=40))
def test_each_users_unfinished_jobs_are_counted_through_every_change_and_a_restore(events):
    """``Jobs.open_of`` (a users file's ``max_jobs``) is the number of the user's jobs not
    final, whatever the changes, and again after the table is restored from the store."""
    with tempfile.TemporaryDirectory() as folder:
        store = Store(Path(folder))
        table = Jobs(store)
        for kind, job, user in events:
            job_id = str(job)
            try:
                if kind == "submit":
                    if job_id not in table:
                        table.submit([row(job_id, user=user)])
                elif job_id in table:
                    {"start": lambda j: table.start(j, 1.0, "v100"),
                     "preempt": table.preempt,
                     "hold": lambda j: table.hold(j, "held"),
                     "release": table.release,
                     "finish": lambda j: table.finish(j, 2.0),
                     "fail": lambda j: table.fail(j, "x", 2.0),
                     "cancel": lambda j: table.cancel(j, 2.0)}[kind](job_id)
            except IllegalTransition:
                pass
            for who in ("ann", "bo"):
                assert table.open_of(who) == sum(
                    1 for j in table.values() if j.user == who and not j.final)
        restored = Jobs(store)
        restored.restore(store.jobs())
        for who in ("ann", "bo", "nobody"):
            assert restored.open_of(who) == table.open_of(who)
        store.close()


def _assigns_state(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    name = (node.func.attr if isinstance(node.func, ast.Attribute)
            else node.func.id if isinstance(node.func, ast.Name) else None)
    if name not in MAKERS:
        return False
    return (any(k.arg == "state" for k in node.keywords)
            or (name == "JobRow" and len(node.args) > STATE_POSITION))


def test_only_the_jobs_module_assigns_a_jobs_state():
    found = []
    for folder in ("gavelsched", "simulator", "workers"):
        for path in (ROOT / folder).rglob("*.py"):
            if path == OWNER:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if _assigns_state(node):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == [], "change a job's state through gavelsched/daemon/jobs.py: " + \
        ", ".join(found)


def test_the_scan_sees_each_way_of_assigning_a_state():
    made = ["row.but(state='done')", "replace(row, state='done')",
            "JobRow(spec, state='done')", "JobRow(spec, '', '', 'done')"]
    kept = ["row.but(reason='x')", "pb.JobStatus(state='done')", "JobRow(spec, '', '')",
            "gauge.labels(state='done')"]
    assert [_assigns_state(ast.parse(c).body[0].value) for c in made + kept] == \
        [True] * len(made) + [False] * len(kept)


def test_no_other_module_lists_the_final_states():
    """The final states are defined once, by the table: a literal that names them all
    elsewhere (a second ``FINAL``) goes out of date when a state is added."""
    found = []
    for folder in ("gavelsched", "simulator", "workers", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            if path == OWNER:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, (ast.Tuple, ast.Set, ast.List)) and jobs.FINAL <= {
                        e.value for e in node.elts if isinstance(e, ast.Constant)}:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == [], "import FINAL from gavelsched/daemon/jobs.py: " + ", ".join(found)
