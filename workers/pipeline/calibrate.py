"""Varuna's calibration (Varuna §4.3–4.4): measure a rank's primitive costs inside the
ranks (:func:`calibrate_rank`), then predict the time per mini-batch of a layout by running
its real schedule through the event simulator with those costs (:func:`predict_calibrated`)
instead of the closed form of thesis §3.3.3 (the timing itself is
:func:`workers.pipeline.simulate.minibatch_time`, which the planner also runs on a profile).

The costs (:class:`workers.pipeline.records.StageCalibration`, measured by
``run_pipeline(cfg, calibrate=True)`` in all P × D processes at once): F and B
of each chunk on one micro-batch, one boundary tensor's trip to the next stage and what it
costs its two endpoints' own threads (starting the send, taking the arrived tensor), and one
flush update (gradient all-reduces, including the tied embedding's, then W − ν·g).

The update is the slowest stage's. Replicas of a stage run in parallel; a stage's cost is
its slowest replica's.

Varuna's per-cut-point calibration of a layer profile for the planner is
:func:`workers.pipeline.profile.calibrate_profile`, built on these.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

import torch
import torch.distributed as dist

from .config import RunConfig
from .executor import StageRuntime
from .records import StageCalibration
from .simulate import minibatch_time


def calibrate_rank(runtime: StageRuntime, repeats: int = 8,
                   warmup: int = 3) -> StageCalibration:
    """Measure the primitive costs of ``runtime``'s rank, all ranks at once (so they share
    the machine as in training): F and B of each chunk it holds on one micro-batch of random
    input mocking the previous stage, through the training code; one boundary tensor sent to
    the next stage and back (half the round trip); and one flush update (all-reduces, then
    W − ν·g). Means over ``repeats`` after ``warmup`` calls (means, not medians: a busy
    machine stretches some calls, and a mini-batch pays for all of them). Leaves the weights
    as they were (the gradients are zero)."""
    cfg = runtime.cfg
    began = time.perf_counter()
    last = runtime.n_chunks - 1
    forward: dict[int, float] = {}
    backward: dict[int, float] = {}
    forward_cpu: dict[int, float] = {}
    backward_cpu: dict[int, float] = {}
    runtime.step = 0
    for c in sorted(runtime.modules):
        f_times, b_times, f_cpu, b_cpu = [], [], [], []
        for rep in range(warmup + repeats):
            if c > 0:
                runtime.inputs[(0, c)] = torch.randn(runtime.boundary_shape(),
                                                     dtype=cfg.spec.torch_dtype,
                                                     device=runtime.device)
            t0, cpu0 = time.perf_counter(), time.thread_time()
            runtime.forward(0, c, with_graph=not runtime.recomputes(c))
            t1, cpu1 = time.perf_counter(), time.thread_time()
            if c < last:
                runtime.out_grads[(0, c)] = torch.randn(runtime.boundary_shape(),
                                                        dtype=cfg.spec.torch_dtype,
                                                        device=runtime.device)
            if runtime.kind.recomputes and runtime.recomputes(c):
                runtime.forward(0, c, with_graph=True, again=True)   # its own R action
            t2, cpu2 = time.perf_counter(), time.thread_time()
            runtime.backward(0, c)
            t3, cpu3 = time.perf_counter(), time.thread_time()
            runtime.reset_buffers()
            if rep >= warmup:
                f_times.append(t1 - t0)
                b_times.append(t3 - t2)
                f_cpu.append(cpu1 - cpu0)
                b_cpu.append(cpu3 - cpu2)
        forward[c], backward[c] = statistics.fmean(f_times), statistics.fmean(b_times)
        forward_cpu[c], backward_cpu[c] = statistics.fmean(f_cpu), statistics.fmean(b_cpu)
    for t in runtime.versions[0].values():
        t.grad = None
    p2p, send, recv = _calibrate_p2p(runtime, repeats) if cfg.stages > 1 else (0.0, 0.0, 0.0)
    updates = []
    for rep in range(warmup + repeats):
        if dist.is_initialized():
            dist.barrier()
        t0 = time.perf_counter()
        runtime.start_update(0, 0)
        runtime.finish_update()
        if rep >= warmup:
            updates.append(time.perf_counter() - t0)
    return StageCalibration(runtime.rank, runtime.stage, runtime.replica, forward, backward,
                            p2p, statistics.fmean(updates), time.perf_counter() - began,
                            forward_cpu, backward_cpu, send, recv)


def _calibrate_p2p(runtime: StageRuntime, repeats: int) -> tuple[float, float, float]:
    """Between each stage and the next (every pair in turn, so that pairs do not share the
    machine's cores): half the round trip of one boundary tensor; then, as in training, with
    the receive posted ahead, the sender's ``isend`` call and the receiver's posting and
    taking of the tensor once it has arrived. Returns (trip, send, receive): the trips'
    mean, the calls' medians (a trip's wait is what a consumer sees; the calls are CPU work,
    whose rare long ones are the machine's); a rank records only its own side (0 for the
    other)."""
    cfg = runtime.cfg
    buf = torch.randn(runtime.boundary_shape(), dtype=cfg.spec.torch_dtype,
                      device=runtime.device)
    trips: list[float] = []
    ends: dict[bool, list[float]] = {True: [], False: []}   # sending side, receiving
    for s in range(cfg.stages - 1):
        dist.barrier()
        if runtime.stage in (s, s + 1):
            sender = runtime.stage == s
            other = runtime.replica * cfg.stages + (s + 1 if sender else s)
            trips += _trips(buf, other, sender, repeats)
            ends[sender] += _endpoint_costs(runtime, buf, other, sender, repeats)
    return (statistics.fmean(trips) if trips else 0.0,
            *(statistics.median(ends[side]) if ends[side] else 0.0
              for side in (True, False)))


def _trips(buf: torch.Tensor, other: int, sender: bool, repeats: int) -> list[float]:
    """Half round trips of ``buf`` (timed on the sender; the first is dropped)."""
    times = []
    for rep in range(repeats + 1):
        t0 = time.perf_counter()
        if sender:
            dist.send(buf, other)
            dist.recv(buf, other)
            if rep:
                times.append((time.perf_counter() - t0) / 2)
        else:
            dist.recv(buf, other)
            dist.send(buf, other)
    return times


def _endpoint_costs(runtime: StageRuntime, buf: torch.Tensor, other: int, sender: bool,
                    repeats: int) -> list[float]:
    """This side's cost of one boundary tensor, the receive posted before the send: the
    sender's ``isend`` call, or the receiver's posting plus taking it once arrived."""
    token = torch.zeros(1, device=runtime.device)
    costs = []
    for rep in range(repeats + 1):
        if sender:
            dist.recv(token, other)          # its receive is posted
            t0 = time.perf_counter()
            handle = dist.isend(buf, other)
            cost = time.perf_counter() - t0
            handle.wait()
            dist.send(token, other)          # sent after the tensor, so behind it
        else:
            t0 = time.perf_counter()
            handle, _ = runtime.post_receive(other, 0)
            cost = time.perf_counter() - t0
            dist.send(token, other)
            dist.recv(token, other)          # the tensor has arrived
            t0 = time.perf_counter()
            handle.wait()
            cost += time.perf_counter() - t0
        if rep:
            costs.append(cost)
    return costs


def _mean_of_recorded(values: list[float]) -> float:
    """Mean over the ranks that measured it (0: none did, e.g. one stage)."""
    recorded = [v for v in values if v > 0]
    return statistics.mean(recorded) if recorded else 0.0


def stage_costs(cal: Sequence[StageCalibration]) -> tuple[dict[int, float], dict[int, float],
                                                          float, float]:
    """(F per chunk, B per chunk, boundary trip, update) over the ranks: a chunk's cost is
    its slowest replica's, the trip the mean of those measured, the update the slowest."""
    forward: dict[int, float] = {}
    backward: dict[int, float] = {}
    for c in cal:
        for chunk, t in c.forward_s.items():
            forward[chunk] = max(forward.get(chunk, 0.0), t)
        for chunk, t in c.backward_s.items():
            backward[chunk] = max(backward.get(chunk, 0.0), t)
    return (forward, backward, _mean_of_recorded([c.p2p_s for c in cal]),
            max(c.update_s for c in cal))


def predict_calibrated(cfg: RunConfig, cal: Sequence[StageCalibration]) -> float:
    """Seconds per mini-batch of ``cfg`` from its calibration (Varuna §4.4)."""
    if not cal:
        raise ValueError("no calibration records")
    forward, backward, comm, update = stage_costs(cal)
    missing = set(range(cfg.stages * cfg.chunks)) - set(forward)
    if missing:
        raise ValueError(f"calibration lacks chunks {sorted(missing)}")
    return minibatch_time(cfg.kind, cfg.stages, cfg.microbatches, cfg.chunks, forward,
                          backward, comm, update,
                          send_s=_mean_of_recorded([c.send_s for c in cal]),
                          recv_s=_mean_of_recorded([c.recv_s for c in cal]),
                          **cfg.schedule_options())
