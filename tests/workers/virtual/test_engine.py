"""One virtual-node step against independent references (VirtualFlow §3.2, §4.1, §5.2)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from torch import nn

from workers.virtual.checkpoint import CheckpointMismatch, load_checkpoint, save_checkpoint
from workers.virtual.data import VirtualSampler
from workers.virtual.engine import VirtualNodeTrainer
from gavelsched.virtual.layout import VirtualLayout
from workers.virtual.reference import (
    ReferenceJob,
    reference_data,
    reference_model,
    reference_trainer,
    state_vector,
)

PLAIN = ReferenceJob(dropout=0.0, batchnorm=False)


def _plain_full_batch_run(job: ReferenceJob, sampler: VirtualSampler, steps: int) -> nn.Module:
    """Plain torch: the whole global batch in one forward pass, mean loss, Adam, schedule."""
    model = reference_model(job)
    inputs, labels = reference_data(job)
    optimizer = torch.optim.Adam(model.parameters(), lr=job.lr, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=4)
    for step in range(steps):
        index = torch.cat([sampler.node_indices(step, n) for n in range(sampler.layout.nodes)])
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(inputs[index]), labels[index]).backward()
        optimizer.step()
        scheduler.step()
    return model


@pytest.mark.parametrize("sizes", [(6, 2), (3, 3, 3, 3, 3, 3, 3, 3), (5, 1, 7, 3), (20,)])
def test_uneven_nodes_equal_one_full_batch_pass(sizes):
    """The paper's 6:2 example and other uneven splits: share-weighted accumulation gives
    exactly the full-batch gradient (an epoch's short last step included)."""
    job = replace(PLAIN, dataset_size=3 * sum(sizes) + 5)
    layout = VirtualLayout(sizes)
    model = reference_model(job)
    inputs, labels = reference_data(job)
    optimizer = torch.optim.Adam(model.parameters(), lr=job.lr, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=4)
    sampler = VirtualSampler(job.dataset_size, layout, job.seed)
    trainer = VirtualNodeTrainer(model, optimizer, nn.functional.cross_entropy,
                                 lambda i: (inputs[i], labels[i]), sampler, range(len(sizes)),
                                 scheduler=scheduler)
    for _ in range(5):
        trainer.step()
    plain = _plain_full_batch_run(job, sampler, 5)
    for ours, theirs in zip(model.parameters(), plain.parameters()):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-12)


def test_naive_average_would_be_wrong():
    """The 6:2 split with a plain average of per-process means (the bug §5.2 warns of)
    differs from the weighted one; the engine uses the weighted one."""
    job = replace(PLAIN, dataset_size=8)
    model = reference_model(job)
    inputs, labels = reference_data(job)
    loss = nn.functional.cross_entropy
    grads = []
    for part in (slice(0, 6), slice(6, 8)):
        model.zero_grad()
        loss(model(inputs[part]), labels[part]).backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    model.zero_grad()
    loss(model(inputs), labels).backward()
    full = [p.grad.clone() for p in model.parameters()]
    naive = [(a + b) / 2 for a, b in zip(*grads)]
    weighted = [0.75 * a + 0.25 * b for a, b in zip(*grads)]
    assert max((n - f).abs().max() for n, f in zip(naive, full)) > 1e-3
    assert max((w - f).abs().max() for w, f in zip(weighted, full)) < 1e-12


def test_gradients_live_in_one_flat_buffer_across_processes(monkeypatch):
    """With an all-reduce to do, every .grad is a view of the one tensor it all-reduces."""
    from workers.virtual import engine

    monkeypatch.setattr(engine.VirtualNodeTrainer, "_world", property(lambda self: 2))
    reduced = []
    monkeypatch.setattr(engine.dist, "all_reduce",
                        lambda tensor, group=None: reduced.append(tensor))
    trainer = reference_trainer(ReferenceJob(), range(8))
    trainer.step()
    trainer.optimizer.zero_grad()  # sets .grad to None; the next step re-attaches the views
    trainer.step()
    flat = trainer._flat
    assert reduced == [flat, flat]   # one all-reduce per step
    start, end = flat.data_ptr(), flat.data_ptr() + flat.numel() * flat.element_size()
    for p in trainer.model.parameters():
        assert start <= p.grad.data_ptr() < end


def test_alone_gradients_accumulate_as_plain_accumulation_does():
    """One process: no gradient buffer to zero; the flat tensor holds only the batch-norm
    buffers and the loss (vn check compares this path with multi-process runs)."""
    alone = reference_trainer(ReferenceJob(), range(8))
    for _ in range(3):
        alone.step()
    assert alone._flat.numel() == 2 * ReferenceJob().hidden + 1
    flat = alone._flat
    for p in alone.model.parameters():
        assert not flat.data_ptr() <= p.grad.data_ptr() < flat.data_ptr() + flat.nbytes


def test_batchnorm_running_stats_are_the_share_weighted_node_average():
    """BN policy: per-node batch statistics; running stats = weighted mean of node updates."""
    job = replace(ReferenceJob(dropout=0.0), nodes=2, node_batch=4, dataset_size=8)
    trainer = reference_trainer(job, range(2))
    trainer.step()
    bn = trainer.model[1]
    inputs, _ = reference_data(job)
    first = reference_model(job)[0]
    means, variances = [], []
    for node in range(2):
        hidden = first(inputs[trainer.sampler.node_indices(0, node)]).detach()
        means.append(hidden.mean(0))
        variances.append(hidden.var(0, unbiased=True))
    momentum = bn.momentum
    expected_mean = momentum * (means[0] + means[1]) / 2
    expected_var = (1 - momentum) + momentum * (variances[0] + variances[1]) / 2
    torch.testing.assert_close(bn.running_mean, expected_mean, rtol=0, atol=1e-12)
    torch.testing.assert_close(bn.running_var, expected_var, rtol=0, atol=1e-12)
    assert int(bn.num_batches_tracked) == 1


def _trained(steps: int, trainer=None):
    """The reference job on one process (all 8 nodes) after ``steps`` more steps."""
    trainer = trainer or reference_trainer(ReferenceJob(), range(8))
    for _ in range(steps):
        trainer.step()
    return trainer


def test_resume_continues_the_same_trajectory(tmp_path):
    """Elasticity (§4.1): parameters, Adam moments, LR schedule, step counter and the
    nodes' random streams (dropout) carry over a checkpoint."""
    straight = _trained(7)
    save_checkpoint(_trained(3), tmp_path / "ckpt.pt")
    resumed = reference_trainer(ReferenceJob(), range(8))
    assert load_checkpoint(resumed, tmp_path / "ckpt.pt") == 3
    _trained(4, resumed)
    assert resumed.global_step == 7
    assert torch.equal(state_vector(resumed), state_vector(straight))
    assert resumed.scheduler.get_last_lr() == straight.scheduler.get_last_lr()
    moments = [s["exp_avg_sq"] for s in resumed.optimizer.state.values()]
    assert all(torch.equal(a, s["exp_avg_sq"])
               for a, s in zip(moments, straight.optimizer.state.values()))


def test_resume_without_restoring_state_would_diverge():
    """The resume test above can fail: a fresh optimizer after 3 steps leaves the path."""
    straight = _trained(5)
    fresh = reference_trainer(ReferenceJob(), range(8))
    fresh.model.load_state_dict(_trained(3).model.state_dict())
    fresh.global_step = 3
    _trained(2, fresh)
    assert (state_vector(fresh) - state_vector(straight)).abs().max() > 1e-6


def test_resume_refuses_another_layout(tmp_path):
    trainer = reference_trainer(ReferenceJob(), range(8))
    save_checkpoint(trainer, tmp_path / "ckpt.pt")
    other = reference_trainer(ReferenceJob(nodes=4, node_batch=12), range(4))
    with pytest.raises(CheckpointMismatch, match="layout"):
        load_checkpoint(other, tmp_path / "ckpt.pt")


def test_one_node_fast_path_has_the_general_paths_bits(monkeypatch):
    """V = 1 on one process skips the per-node bookkeeping; batch norm, dropout and the
    epoch's short last step still give bit for bit what the general path gives."""
    from workers.virtual import engine

    job = ReferenceJob(nodes=1, node_batch=16, dataset_size=40)
    fast = reference_trainer(job, [0])
    losses = [fast.step() for _ in range(5)]
    # the general path: pretend to be one of two processes, with an all-reduce that adds 0
    monkeypatch.setattr(engine.VirtualNodeTrainer, "_world", property(lambda self: 2))
    monkeypatch.setattr(engine.dist, "all_reduce", lambda tensor, group=None: None)
    general = reference_trainer(job, [0])
    assert [general.step() for _ in range(5)] == losses
    assert torch.equal(state_vector(general), state_vector(fast))
    assert general._flat is not None and fast._flat is None
