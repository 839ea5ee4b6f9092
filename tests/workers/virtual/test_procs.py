"""The local process group behind ``vn check`` and the communication profile."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from workers.virtual.procs import GroupFailed, run_group


def _sum_ranks(rank, world, report, offset):
    value = torch.tensor([float(rank + offset)])
    dist.all_reduce(value)
    report(rank, float(value))


def _fail_on_rank_one(rank, world, report):
    if rank == 1:
        raise ValueError("boom on purpose")
    dist.barrier()


def test_group_runs_real_collectives_and_the_parent_meanwhile():
    outputs, extra = run_group(_sum_ranks, 3, (10,), [0, 1, 2], lambda: "parent ran")
    assert outputs == {0: 33.0, 1: 33.0, 2: 33.0} and extra == "parent ran"


def test_a_failing_process_names_itself_and_the_error():
    with pytest.raises(GroupFailed, match=r"process 1 failed: ValueError: boom on purpose"):
        run_group(_fail_on_rank_one, 2, (), ["never"])
