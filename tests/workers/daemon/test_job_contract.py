"""The job contract lives in one module (gavelsched/jobenv.py): the launcher writes a job's
environment through ``JobContext.to_env`` and the iterator reads it back with ``from_env``;
the worker daemon never imports the job side; every ``GAVEL_*`` name is spelled once."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from gavelsched import jobenv
from gavelsched.jobenv import (EMULATE_STEPS_PER_S_VAR, JobContext, JobFailed, read_progress,
                               worker_env, write_progress)
from gavelsched.virtual import envspec
from workers.daemon.launcher import LaunchSpec, job_env

ROOT = Path(__file__).resolve().parents[3]
ENV_NAME = re.compile(r"GAVEL_[A-Z0-9_]+")

FULL = JobContext(scheduler="10.0.0.1:50051", job_id="job-7", round=3, total_steps=900,
                  steps_done=120, checkpoint_dir="/shared/ckpt/job-7", server_id=2, rank=5,
                  world_size=8, token_file="/etc/gavel/token", tls_ca="/etc/gavel/ca.pem",
                  emulate_steps_per_s=12.5, job_type="ResNet-18 (batch size 32)")


@pytest.mark.parametrize("ctx", [
    FULL,
    JobContext(scheduler="h:1", job_id="j", round=0, total_steps=5, steps_done=0,
               checkpoint_dir="/c", server_id=-1, rank=0, world_size=1),
], ids=["full", "minimal"])
def test_to_env_round_trips_through_from_env(ctx):
    env = ctx.to_env()
    assert all(isinstance(v, str) for v in env.values())
    assert JobContext.from_env(env) == ctx


def test_to_env_leaves_out_what_is_not_set():
    env = JobContext(scheduler="h:1", job_id="j", round=0, total_steps=5, steps_done=0,
                     checkpoint_dir="/c", server_id=-1, rank=0, world_size=1).to_env()
    for absent in (jobenv.SERVER_ID_VAR, jobenv.TOKEN_FILE_VAR, jobenv.TLS_CA_VAR,
                   EMULATE_STEPS_PER_S_VAR):
        assert absent not in env
    assert worker_env(-1) == {}
    assert worker_env(4, "/t", None) == {jobenv.SERVER_ID_VAR: "4", jobenv.TOKEN_FILE_VAR: "/t"}


def test_from_env_rejects_a_bad_number():
    with pytest.raises(JobFailed, match=jobenv.ROUND_VAR):
        JobContext.from_env({**FULL.to_env(), jobenv.ROUND_VAR: "three"})
    assert JobContext.from_env({jobenv.JOB_ID_VAR: "j"}) is None   # no scheduler: standalone


def test_the_launcher_writes_the_context_the_job_reads(tmp_path, monkeypatch):
    monkeypatch.setenv(EMULATE_STEPS_PER_S_VAR, "99")    # stale: this worker does not emulate
    spec = LaunchSpec(job_id="j", round=2, job_type="lm", argv=("true",), gpus=(3, 1), rank=4,
                      world_size=6, master_addr="", master_port=0, total_steps=50,
                      steps_done=10, max_seconds=10, checkpoint_dir=str(tmp_path),
                      scheduler_address="s:1")
    shared = worker_env(7, "/token", "/ca.pem")
    for local in (0, 1):
        env = job_env(spec, local, shared)
        ctx = JobContext.from_env(env)
        assert ctx == JobContext(scheduler="s:1", job_id="j", round=2, total_steps=50,
                                 steps_done=10, checkpoint_dir=str(tmp_path), server_id=7,
                                 rank=4 + local, world_size=6, token_file="/token",
                                 tls_ca="/ca.pem", job_type="lm")
        assert (env["LOCAL_RANK"], env["CUDA_VISIBLE_DEVICES"]) == (str(local), "3,1")
    paced = replace(spec, emulate_steps_per_s=2.5)
    assert JobContext.from_env(job_env(paced, 0, shared)).emulate_steps_per_s == 2.5


def test_progress_file_round_trips(tmp_path):
    assert read_progress(tmp_path) is None
    path = write_progress(tmp_path / "new", 17, job_id="j")
    assert path == jobenv.progress_path(tmp_path / "new")
    assert read_progress(tmp_path / "new") == 17


# ---- the shape of the code -------------------------------------------------------------------

def _modules(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


def _imports(tree: ast.AST) -> set[str]:
    """Every module an import statement anywhere in ``tree`` names (function level too)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_the_worker_daemon_never_imports_the_iterator():
    for path in _modules("workers/daemon"):
        imports = _imports(ast.parse(path.read_text(), str(path)))
        bad = {m for m in imports if m == "gavelsched.iterator" or m.startswith(
            "gavelsched.iterator.") or m == "gavelsched.GavelIterator"}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_importing_the_contract_and_the_worker_stays_light():
    code = ("import sys, gavelsched.jobenv; heavy = {'torch', 'grpc'} & set(sys.modules); "
            "assert not heavy, heavy; import workers.daemon.worker; "
            "assert 'gavelsched.iterator' not in sys.modules")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_every_gavel_env_name_is_spelled_in_one_module():
    where: dict[str, set[str]] = {}
    for path in _modules("gavelsched", "workers"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and ENV_NAME.fullmatch(node.value):
                where.setdefault(node.value, set()).add(str(path.relative_to(ROOT)))
    owners = {name: "gavelsched/jobenv.py" for name in jobenv.VARIABLES}
    owners.update({name: "gavelsched/virtual/envspec.py" for name in envspec.VARIABLES})
    assert len(owners) == len(jobenv.VARIABLES) + len(envspec.VARIABLES)   # no name twice
    for name, modules in sorted(where.items()):
        assert name in owners, f"{name} ({sorted(modules)}) belongs in gavelsched/jobenv.py"
        others = modules - {owners[name]}
        assert modules >= {owners[name]} and not others, \
            f"{name} is spelled in {sorted(modules)}: import {owners[name]}'s constant"
