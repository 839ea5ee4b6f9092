"""The store's meta keys are declared once (issue #27, ``gavelsched/daemon/meta.py``): every
key a real executor writes is declared, no module spells a key where it uses it, each key
is written only by its declared owner, the store refuses an undeclared key, and the load
check of every declaration refuses a bad value. A job's keys go with its checkpoints
(``retention``; also ``test_retention.py``)."""

from __future__ import annotations

import ast
import logging
import sqlite3
from pathlib import Path

import pytest

from gavelsched import checkpoints
from gavelsched.daemon import meta
from gavelsched.daemon.retention import SWEEP_EVERY_S
from gavelsched.daemon.store import Store

from .test_round_aligned import R, Scheduler

DAEMON = Path(meta.__file__).parent


def _stored_keys(state: Path) -> list[str]:
    db = sqlite3.connect(state / "gavelsched.db")
    try:
        return [k for (k,) in db.execute("SELECT key FROM meta ORDER BY key")]
    finally:
        db.close()


def test_declarations_are_unique_and_their_owners_are_daemon_modules():
    names = [k.name for k in meta.KEYS]
    assert len(set(names)) == len(names)
    for k in meta.KEYS:
        assert (DAEMON / f"{k.owner}.py").is_file(), k
        assert meta.declared(k.key("7") if k.family else k.key()) is k
    assert {k.name for k in meta.PER_JOB} == {"attempts/", "generation/",
                                              "checkpoint_generation/"}
    assert meta.declared("rounds") is None and meta.declared("attempts/") is None
    with pytest.raises(ValueError):
        meta.ROUND.key("3")
    with pytest.raises(ValueError):
        meta.ATTEMPTS.key()


WRITES = ("set_meta", "set_meta_later")     # (the store's two ways to write a meta row)


def _meta_calls(tree: ast.AST):
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("get_meta", *WRITES) and node.args):
            arg = node.args[0]
            keys = arg.keys if node.func.attr in WRITES and isinstance(arg, ast.Dict) \
                else [arg]
            yield node, keys


def test_no_module_spells_a_meta_key_and_only_owners_write_theirs():
    """Every get_meta/set_meta(_later) key in ``gavelsched/`` is a declaration's ``.key(...)``
    (or a variable holding one), never a literal; a write has only its module's own keys,
    and every declaration is written by its owner."""
    declarations = {name: value for name, value in vars(meta).items()
                    if isinstance(value, meta.MetaKey)}
    bad, written = [], set()
    for path in sorted((DAEMON.parent).rglob("*.py")):
        tree = ast.parse(path.read_text())
        for call, keys in _meta_calls(tree):
            where = f"{path.relative_to(DAEMON.parents[1])}:{call.lineno}"
            for key in keys:
                if isinstance(key, (ast.Constant, ast.JoinedStr, ast.BinOp)):
                    bad.append(f"{where}: a key spelled where it is used")
                    continue
                if (isinstance(key, ast.Call) and isinstance(key.func, ast.Attribute)
                        and isinstance(key.func.value, ast.Name)
                        and key.func.value.id in declarations):
                    owner = declarations[key.func.value.id].owner
                    if call.func.attr in WRITES:
                        written.add(owner + ":" + key.func.value.id)
                        if path.parent != DAEMON or path.stem != owner:
                            bad.append(f"{where}: writes {key.func.value.id}, owned by {owner}")
    assert not bad, bad
    assert written == {f"{k.owner}:{name}" for name, k in declarations.items()}   # all used


def test_the_store_refuses_an_undeclared_key(tmp_path):
    store = Store(tmp_path)
    try:
        with pytest.raises(KeyError, match="declared nowhere"):
            store.set_meta({"rounds": 1})
        store.set_meta({meta.ROUND.key(): 3})
        assert store.get_meta(meta.ROUND.key()) == "3"
    finally:
        store.close()


@pytest.mark.parametrize("declaration,good,bad", [
    (meta.ROUND, "3", "-1"), (meta.EPOCH_UNIX, "1.5e9", "nan"),
    (meta.STARTUP_S, "2.5", "inf"), (meta.ATTEMPTS, "[]", "{}"),
    (meta.DRAINED, "1", "x"), (meta.STARTUP_WAVE, '["A", 2, 0.3, 7]', '["A", 0, 0.3, 7]'),
    (meta.STARTUP_WAVE, None, '["A", 1, NaN, 7]'), (meta.STARTUP_WAVE, None, '["A", 1, 0.3]'),
    (meta.PROFILE, None, '{"worker_type": 3}')])
def test_each_check_refuses_a_bad_value_at_load(tmp_path, caplog, declaration, good, bad):
    key = declaration.key("a") if declaration.family else declaration.key()
    store = Store(tmp_path)
    store.close()
    db = sqlite3.connect(tmp_path / "gavelsched.db")
    db.execute("INSERT INTO meta VALUES (?, ?)", (key, bad))
    db.commit()
    db.close()
    with caplog.at_level(logging.WARNING, logger="gavelsched.daemon.store"):
        store = Store(tmp_path)
    try:
        assert store.get_meta(key) is None
        assert any("meta row" in r.getMessage() and key in r.getMessage()
                   for r in caplog.records)
        if good is not None:
            declaration.check(good, key)
    finally:
        store.close()


def test_every_key_a_real_executor_writes_is_declared_and_a_jobs_go_with_its_checkpoints(
        tmp_path):
    s = Scheduler(tmp_path, checkpoint_retention_s=5.0)
    try:
        job = s.submit(steps=10)
        s.at(1.0)
        s.init(job)
        root = s.x.config.checkpoints / job
        checkpoints.begin(root, 10, s.gen(job))
        checkpoints.commit(root, 10, s.gen(job))
        s.exited(job, 10)
        assert s.x.jobs[job].state == "done"
        written = _stored_keys(tmp_path / "state")
        assert [k for k in written if meta.declared(k) is None] == []
        mine = set(meta.job_keys(job))
        assert {meta.GENERATION.key(job), meta.CHECKPOINT_GENERATION.key(job)} <= set(written)
        s.at(1.0 + R - s.x.config.plan_lead)
        s.at(1.0 + R)
        s.at(1.0 + R + SWEEP_EVERY_S)         # the next sweep, past the retention
        s.x.retention.join()
        assert not root.exists()
        left = _stored_keys(tmp_path / "state")
        assert not mine & set(left)
        assert meta.NEXT_GENERATION.key() in left and meta.ROUND.key() in left
    finally:
        s.close()
