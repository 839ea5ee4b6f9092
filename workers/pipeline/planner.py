"""PipeDream-2BW's planner (thesis §3.3, Algorithm 1, §3.3.3 closed-form cost functions):
sweep data-parallel width d and depth p, and for each the micro-batch size b, gradient
accumulation m = B/(d·b) and activation recomputation r; keep the fastest configuration whose
MEMORY(.) fits, with the global batch B fixed.

Per micro-batch, stage i takes T_i = c·b·Σ(forward+backward per sample) + 2·b·out_i/bw_pipe
(c = c_extra = 4/3 with recomputation, else 1; the second term only when p > 1). Once per
mini-batch it all-reduces its gradients, s_i = 2(d−1)/d·|W_i|/bw (a weight tied between the
first and last stages over its 2d copies), and steps its optimizer, u_i (the profile's
per-layer ``update_s``). Time per mini-batch:

* 2bw (no flush; thesis §3.3.3): max_i max(m·T_i + u_i, s_i): the all-reduce overlaps the
  next mini-batch, the step does not;
* 1f1b (PipeDream-Flush): Σ_i T_i + (m−1)·max_i T_i + max_i (s_i + u_i): the first
  micro-batch crosses every stage, the slowest stage then runs the other m−1, and the
  all-reduce and step after the flush are not overlapped.

With ``timing="simulated"`` the time is instead Varuna's (Varuna §4.4): the schedule
itself runs through the event simulator with each stage's F and B from the profile (a
recompute adds one F to B), a boundary tensor's transfer as the delay of every cross-stage
dependency, and the all-reduce and step after the flush (1f1b), or the step after each
mini-batch with the all-reduce overlapped (2bw). It sees the schedule's real bubbles, where
the closed form bounds them.

Memory of stage i (bytes; the last stage's W_i includes its copy of a tied weight):
v·|W_i| + k_i·|A_i(b)| without recomputation, or v·|W_i| + |A_i(b)| + k_i·|A^input_i(b)|
with it, where v is 2 for 2bw and 1 for 1f1b and k_i = min(p−i, m) micro-batches are in
flight on stage i (the thesis's formula is stage 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .kinds import KINDS
from .profile import Profile
from .simulate import minibatch_time

# the kinds whose time and memory the cost model above describes (ScheduleKind.planner)
SCHEDULES = tuple(name for name, kind in KINDS.items() if kind.planner)
TIMINGS = ("closed_form", "simulated")


class PlanInfeasible(ValueError):
    """No configuration fits in memory (or the inputs admit none)."""


@dataclass(frozen=True)
class Prediction:
    """What the cost model says about one configuration."""

    time_s: float                       # per mini-batch
    stage_memory_bytes: tuple[float, ...]
    stage_activation_bytes: tuple[float, ...]

    @property
    def memory_bytes(self) -> float:
        return max(self.stage_memory_bytes)


@dataclass(frozen=True)
class Plan:
    """A chosen configuration and its prediction."""

    stages: int
    replicas: int
    microbatch_size: int
    microbatches: int                   # accumulation steps per mini-batch on each replica
    recompute: bool
    schedule: str
    cuts: tuple[int, ...]               # first layer of stages 1…p−1
    prediction: Prediction

    def to_json(self) -> dict:
        return {"stages": self.stages, "replicas": self.replicas,
                "gpus": self.stages * self.replicas, "microbatch_size": self.microbatch_size,
                "microbatches": self.microbatches, "recompute": self.recompute,
                "schedule": self.schedule, "cuts": list(self.cuts),
                "predicted_time_per_minibatch_s": self.prediction.time_s,
                "predicted_memory_bytes": self.prediction.memory_bytes,
                "stage_memory_bytes": list(self.prediction.stage_memory_bytes)}


def balanced_cuts(costs: list[float], parts: int) -> tuple[int, ...]:
    """Contiguous split of ``costs`` into ``parts`` non-empty groups minimising the largest
    sum (ties: earlier cuts); returns the first index of groups 1…parts−1."""
    n = len(costs)
    if not 1 <= parts <= n:
        raise PlanInfeasible(f"cannot split {n} layers into {parts} stages")
    prefix = [0.0]
    for c in costs:
        prefix.append(prefix[-1] + c)
    best = [[math.inf] * (n + 1) for _ in range(parts + 1)]
    cut = [[0] * (n + 1) for _ in range(parts + 1)]
    best[0][0] = 0.0
    for k in range(1, parts + 1):
        for j in range(k, n + 1):
            for i in range(k - 1, j):
                value = max(best[k - 1][i], prefix[j] - prefix[i])
                if value < best[k][j] - 1e-15:
                    best[k][j], cut[k][j] = value, i
    cuts, j = [], n
    for k in range(parts, 1, -1):
        j = cut[k][j]
        cuts.append(j)
    return tuple(reversed(cuts))


def _allreduce(nbytes: float, copies: int, bandwidth: float) -> float:
    """Ring all-reduce of ``nbytes`` over ``copies``: 2(n−1)/n·|W|/bw (thesis §3.3.3)."""
    return 2 * (copies - 1) / copies * nbytes / bandwidth


def predict(profile: Profile, stages: int, replicas: int, microbatch_size: int,
            microbatches: int, recompute: bool, schedule: str = "1f1b",
            cuts: tuple[int, ...] | None = None, c_extra: float = 4 / 3,
            bandwidth_cross: float | None = None, timing: str = "closed_form") -> Prediction:
    """THROUGHPUT(.) and MEMORY(.) of one configuration (thesis §3.3.3); ``timing`` picks
    the closed form or the simulated schedule (Varuna §4.4)."""
    if schedule not in SCHEDULES:
        raise PlanInfeasible(f"schedule {schedule!r} is not one of {', '.join(SCHEDULES)}")
    if timing not in TIMINGS:
        raise PlanInfeasible(f"timing {timing!r} is not one of {', '.join(TIMINGS)}")
    kind = KINDS[schedule]
    layers = profile.layers
    if cuts is None:
        cuts = balanced_cuts([layer.compute_s for layer in layers], stages)
    edges = [0, *cuts, len(layers)]
    b = microbatch_size
    bw_pipe = profile.bandwidth_bytes_per_s
    bw_cross = bandwidth_cross or bw_pipe
    # the first and last layers share a weight; on different stages each holds and updates
    # a copy, and its gradient is all-reduced over all 2·d copies (§4.2)
    tied = profile.tied_weight_bytes if stages > 1 else 0.0
    times, syncs, updates, memory, acts = [], [], [], [], []
    forward, backward, transfers = {}, {}, []   # per stage and boundary, for the simulator
    versions = kind.weight_versions
    for i in range(stages):
        group = layers[edges[i]:edges[i + 1]]
        forward[i] = b * sum(layer.forward_s for layer in group)
        plain_backward = b * sum(layer.backward_s for layer in group)
        comp = (forward[i] + plain_backward) * (c_extra if recompute else 1.0)
        # the simulator's recompute: one more F before B
        backward[i] = plain_backward + (forward[i] if recompute else 0.0)
        transfer = b * group[-1].output_bytes / bw_pipe
        if i < stages - 1:
            transfers.append(transfer)
        times.append(comp + (2 * transfer if stages > 1 else 0.0))
        # one stage holding both ends of a tied weight keeps one copy: the last layer's step
        # (on its copy) is not taken
        own = group[:-1] if stages == 1 and profile.tied_weight_bytes else group
        updates.append(sum(layer.update_s for layer in own))
        w = sum(layer.weight_bytes for layer in group) + (tied if i == stages - 1 else 0.0)
        shared = tied if i in (0, stages - 1) else 0.0
        syncs.append(_allreduce(max(w - shared, 0.0), replicas, bw_cross)
                     + _allreduce(shared, 2 * replicas, bw_cross))
        in_flight = min(stages - i, microbatches)
        full = b * sum(layer.activation_bytes for layer in group)
        inputs = b * layers[edges[i] - 1].output_bytes if i > 0 else 0.0
        act = full + in_flight * inputs if recompute else in_flight * full
        acts.append(act)
        memory.append(versions * w + act)
    slowest = max(times)
    flush = max(s + u for s, u in zip(syncs, updates))   # all-reduce, then the step
    if timing == "simulated":
        comm = sum(transfers) / len(transfers) if transfers else 0.0
        if not kind.flush:   # the all-reduce overlaps the next mini-batch (§3.3.3)
            time_s = max(minibatch_time(schedule, stages, microbatches, 1, forward, backward,
                                        comm, max(updates)), max(syncs))
        else:
            time_s = minibatch_time(schedule, stages, microbatches, 1, forward, backward,
                                    comm, flush)
    elif not kind.flush:
        time_s = max(max(microbatches * t + u, s) for t, s, u in zip(times, syncs, updates))
    else:
        time_s = sum(times) + (microbatches - 1) * slowest + flush
    return Prediction(time_s, tuple(memory), tuple(acts))


def plan(profile: Profile, gpus: int, batch: int, memory_bytes: float,
         schedule: str = "1f1b", server_gpus: int | None = None,
         inter_server_bandwidth: float | None = None, c_extra: float = 4 / 3,
         exact: bool = False, replicas: int | None = None,
         timing: str = "closed_form") -> Plan:
    """Algorithm 1: the fastest (d, p, b, r) with d·p ≤ ``gpus`` (= with ``exact``: a job
    that holds its GPUs uses them all), d·b·m = ``batch`` and memory ≤ ``memory_bytes``;
    ``replicas`` pins d; ``timing`` as in :func:`predict`. Ties go to fewer GPUs, no
    recomputation, larger b."""
    for name, value in (("gpus", gpus), ("batch", batch)):
        if not isinstance(value, int) or value < 1:
            raise PlanInfeasible(f"{name}={value!r} must be a positive integer")
    if not memory_bytes > 0:
        raise PlanInfeasible(f"memory={memory_bytes!r} must be positive")
    if replicas is not None and (not isinstance(replicas, int) or not 1 <= replicas <= gpus):
        raise PlanInfeasible(f"replicas={replicas!r} must be an integer in 1..{gpus}")
    best: tuple | None = None
    for d in range(1, gpus + 1):
        if batch % d or (replicas is not None and d != replicas):
            continue
        # bwdth_cross-pipeline(d): high inside a server, low across servers (thesis §3.3.3)
        cross = (inter_server_bandwidth if server_gpus and inter_server_bandwidth
                 and d > server_gpus else None)
        for p in range(1, min(gpus // d, len(profile.layers)) + 1):
            if exact and d * p != gpus:
                continue
            cuts = balanced_cuts([layer.compute_s for layer in profile.layers], p)
            per_replica = batch // d
            for b in range(1, per_replica + 1):
                if per_replica % b:
                    continue
                m = per_replica // b
                for r in (False, True):
                    pred = predict(profile, p, d, b, m, r, schedule, cuts, c_extra, cross,
                                   timing)
                    if pred.memory_bytes > memory_bytes:
                        continue
                    key = (pred.time_s, d * p, r, -b)
                    if best is None or key < best[0]:
                        best = (key, Plan(p, d, b, m, r, schedule, cuts, pred))
    if best is None:
        width = f" with {replicas} replicas" if replicas is not None else ""
        raise PlanInfeasible(f"no configuration of {'exactly' if exact else 'up to'} {gpus} "
                             f"GPUs{width} fits in {memory_bytes / 2**30:.3g} GiB for batch "
                             f"{batch}")
    return best[1]
