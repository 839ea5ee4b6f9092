"""docs/examples/ddp_train.py, the DDP example of docs/iterator.md ("Distributed jobs: the
order of set-up"), is the real thing: two gloo ranks train it alone and under a scheduler's
leases to the same parameters, and the wrong order of set-up fails at once."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gavelsched import checkpoints
from gavelsched.daemon.leases import free_port
from gavelsched.iterator import EXIT_JOB_FAILED, read_progress
from tests.workers.fake_scheduler import FakeJob, job_environment, steps_lease

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "iterator.md"
EXAMPLE = REPO / "docs" / "examples" / "ddp_train.py"
WORLD = 2
STEPS = 8           # the job's total steps
PER_LEASE = 5       # the first lease ends at step 5 (a checkpoint), the second, resumed from
                    # it, at the job's end
TIMEOUT_S = 120     # a safety net against a hung rank, not a measurement

# Runs the example as its own ``__main__`` (argv: OUT_DIR EXAMPLE [ARGS...]), then saves
# what this rank trained, the example's model and its iterator's state, to OUT_DIR/rankR.pt.
RUN_EXAMPLE = """
import os, runpy, sys, torch
out = os.path.join(sys.argv[1], f"rank{os.environ['RANK']}.pt")
sys.argv = sys.argv[2:]
ns = runpy.run_path(sys.argv[0], run_name="__main__")
it = ns["iterator"]
torch.save({"params": {k: v.cpu() for k, v in ns["net"].state_dict().items()},
            "steps": it.steps, "done": it.done, "finished": it.finished,
            "standalone": it.standalone}, out)
"""

# The order the docs warn against: the iterator before the process group.
WRONG_ORDER = """
import torch
import torch.distributed as dist
from gavelsched import GavelIterator

iterator = GavelIterator(range(100), None, lambda d: None, lambda d: None)
dist.init_process_group("gloo")
for _ in iterator:
    pass
iterator.close()
dist.destroy_process_group()
"""


def doc_blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", DOC.read_text(), flags=re.DOTALL)


def latest_commit(ckpt: Path) -> Path:
    """The newest checkpoint commit under the job's checkpoint directory, checked against
    the step count written beside it."""
    commit = checkpoints.latest(ckpt)
    assert commit is not None, f"no checkpoint commit in {ckpt}"
    assert read_progress(commit.path) == commit.steps
    return commit.path



def launch(argv: list[str], extra: dict[str, str] | None = None) -> list[tuple[int, str]]:
    """Start WORLD ranks of ``python ARGV`` as a worker would (torchrun's variables, plus
    ``extra``); their exit codes and stderr, by rank."""
    port = str(free_port())
    procs = []
    for rank in range(WORLD):
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1",
               **(extra or {}), "RANK": str(rank), "LOCAL_RANK": str(rank),
               "WORLD_SIZE": str(WORLD), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
        procs.append(subprocess.Popen([sys.executable, *argv],
                                      env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True))
    results = []
    try:
        for proc in procs:
            _, err = proc.communicate(timeout=TIMEOUT_S)
            results.append((proc.returncode, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return results


def run_example(out: Path, scheduler_env: dict[str, str] | None = None,
                args: tuple[str, ...] = ()) -> list[dict]:
    """Run the example on WORLD ranks; what each rank trained (all exited 0)."""
    argv = ["-c", RUN_EXAMPLE, str(out), str(EXAMPLE), *args]
    for rank, (code, err) in enumerate(launch(argv, scheduler_env)):
        assert code == 0, f"rank {rank} exited {code}:\n{err}"
    return [torch.load(out / f"rank{rank}.pt", weights_only=True) for rank in range(WORLD)]


def assert_close(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].dtype == b[name].dtype == torch.float64
        assert torch.allclose(a[name], b[name], rtol=0, atol=1e-9), name


@pytest.fixture(scope="module")
def standalone(tmp_path_factory) -> list[dict]:
    """The example alone (no GAVEL_SCHEDULER): 2 ranks, STEPS steps."""
    return run_example(tmp_path_factory.mktemp("standalone"), args=("--steps", str(STEPS)))


def test_the_doc_shows_the_example_file_as_it_is():
    assert EXAMPLE.read_text() in doc_blocks("python")


def test_alone_both_ranks_train_the_same_parameters(standalone):
    first, second = standalone
    assert first["standalone"] and not first["done"]
    assert first["params"].keys() == second["params"].keys()
    for name, value in first["params"].items():
        assert torch.equal(value, second["params"][name]), name
    torch.manual_seed(0)        # and they did train: they left the example's initial values
    init = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(),
                               torch.nn.Linear(8, 1)).double().state_dict()
    assert all(not torch.equal(init[k], v) for k, v in first["params"].items())


def test_under_leases_it_resumes_and_ends_where_a_run_alone_does(sched, tmp_path, standalone):
    sched.jobs["ddp"] = FakeJob(total_steps=STEPS, lease=steps_lease(sched, PER_LEASE))
    ckpt = tmp_path / "ckpt"
    env = job_environment(sched.address, "ddp", ckpt)
    ends = []
    for lease in range(STEPS):           # far more launches than the leases need
        out = tmp_path / f"lease{lease}"
        out.mkdir()
        ranks = run_example(out, env)
        assert {r["steps"] for r in ranks} == {ranks[0]["steps"]}   # one stop step
        assert all(r["done"] and not r["standalone"] for r in ranks)
        ends.append(ranks[0]["steps"])
        assert checkpoints.latest(ckpt).steps == ends[-1] == sched.jobs["ddp"].steps_done
        if ranks[0]["finished"]:
            break
    assert ends == [5, STEPS]
    # Every launch asked for its lease on both ranks; only rank 0 saved and reported.
    assert len(sched.log.inits) == WORLD * len(ends)
    assert [(r.rank, r.steps, r.checkpointed) for r in sched.log.steps] == \
        [(0, n, True) for n in ends]
    # Checkpointed, stopped and resumed, the job trained what a run alone trains.
    for rank in ranks:
        assert_close(rank["params"], standalone[0]["params"])
    saved = torch.load(latest_commit(ckpt) / "ckpt.pt", weights_only=True)["model"]
    assert_close(saved, standalone[0]["params"])


def test_the_iterator_before_the_process_group_fails_at_once(sched, tmp_path):
    sched.jobs["wrong"] = FakeJob(total_steps=STEPS)
    script = tmp_path / "wrong_order.py"
    script.write_text(WRONG_ORDER)
    results = launch([str(script)], job_environment(sched.address, "wrong", tmp_path / "ckpt"))
    last = []
    for rank, (code, err) in enumerate(results):
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code == EXIT_JOB_FAILED, f"rank {rank} exited {code}:\n{err}"
        assert lines[-1].startswith("gavel: ") and "init_process_group" in lines[-1], err
        last.append(lines[-1])
    assert checkpoints.latest(tmp_path / "ckpt") is None    # nothing was trained or saved
    # docs/iterator.md quotes the line a 2-rank job gets
    assert last[0] in [b.strip() for b in doc_blocks("text")], last[0]
