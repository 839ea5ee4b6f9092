"""The pipeline runtime on one rank: a simple interpreter of a lowered schedule (docs/style.md §2;
thesis §2.4 and §3.2 for the weight semantics, §4.2 for the P × D layout).

Ranks are laid out replica-major: rank = replica·P + stage. Activations and gradients move
point-to-point inside a replica's pipeline (non-blocking sends, one tag per (micro-batch,
boundary)). Each rank keeps its next ``recv_ahead`` receives posted (by default a whole
mini-batch's): gloo's TCP transport holds a message sent before its receive is posted until
a rendezvous, which cost 3-20 ms per message when the sender was busy or itself waiting
(BENCHMARKS.md, Pipelines); weight gradients are all-reduced among the D replicas of a stage,
and a tied weight over all its copies at once (every replica of every stage that uses it).
What to do follows the kind's traits (:class:`workers.pipeline.kinds.ScheduleKind`): a
``flush`` kind applies W ← W − ν∇f(W) after every mini-batch; a no-flush kind (2bw) runs its
whole schedule and makes version t+1 = W(t) − ν∇f(W(t−1)) on each stage once that stage has
finished mini-batch t: the all-reduce runs in the background until the first forward that
needs version t+1, so a stage does not wait for the others at every mini-batch (thesis
§3.2.1). A ``recomputes`` kind (varuna) runs forwards without a graph and has R actions.
The calibration that drives this runtime is :mod:`workers.pipeline.calibrate`.

(Over 400 lines: one rank's set-up, interpreter, weight versions and both training loops share
its state.)
"""

from __future__ import annotations

import logging
import resource
import statistics
import time
from collections import deque
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.func import functional_call

from .config import RunConfig
from .kinds import build_schedule
from .lowering import add_communication, peer, tag
from .model import build_layers, global_names, layer_bounds, loss_sum, make_batch
from .morph import load_layer
from .ops import Op, PipeOp
from .records import RankStats, StageCalibration
from .versions import weight_version

log = logging.getLogger(__name__)

RECENT = 256   # durations kept per (op, chunk) for the online calibration


class StageRuntime:
    """Executes the schedule of one (stage, replica) and owns its weights."""

    def __init__(self, cfg: RunConfig, rank: int) -> None:
        self.cfg = cfg
        self.kind = cfg.schedule_kind
        self.rank = rank
        self.stage = rank % cfg.stages
        self.replica = rank // cfg.stages
        self.n_chunks = cfg.stages * cfg.chunks
        # nccl needs CUDA tensors: one GPU per rank on the node (untested here: CPU-only)
        self.device = (torch.device("cuda", rank % torch.cuda.device_count())
                       if torch.cuda.is_available() else torch.device("cpu"))
        layers = build_layers(cfg.spec)
        names = global_names(layers)
        bounds = layer_bounds(cfg.spec.layers, self.n_chunks,
                              list(cfg.cuts) if cfg.cuts is not None else None)
        self.modules: dict[int, tuple[nn.Module, dict[str, str]]] = {}
        self.layers_held: list[int] = []
        for c in range(self.stage, self.n_chunks, cfg.stages):
            a, b = bounds[c]
            module = nn.Sequential(*[layers[i] for i in range(a, b)])
            mapping = {f"{j}.{local}": names[i][local]
                       for j, i in enumerate(range(a, b)) for local in names[i]}
            self.modules[c] = (module, mapping)
            self.layers_held += list(range(a, b))
        self.stage_users = {}  # global name -> stages that use it
        for c, (a, b) in enumerate(bounds):
            for i in range(a, b):
                for g in names[i].values():
                    self.stage_users.setdefault(g, set()).add(c % cfg.stages)
        params = {g: p for i in self.layers_held
                  for local, g in names[i].items()
                  for p in [dict(layers[i].named_parameters(remove_duplicate=False))[local]]}
        self.versions: dict[int, dict[str, torch.Tensor]] = {
            0: {g: p.detach().to(self.device, copy=True).requires_grad_(True)
                for g, p in params.items()}}
        self.names_by_layer = names
        if cfg.load_dir:
            self.load_layers(Path(cfg.load_dir))
        self.max_versions = 1
        self.pending: tuple[int, dict[str, torch.Tensor], list] | None = None
        self._groups()
        self.reset_buffers()
        self._lowered: list[PipeOp] | None = None
        self._compute = 0.0                # F, B and R seconds so far
        self._peak = 0                     # most activation bytes held at once
        self._step_walls: list[float] = []
        self._step_computes: list[float] = []
        # recent durations of F/B per chunk and of flush updates (online calibration)
        self._op_times: dict[tuple[Op, int], deque[tuple[float, float]]] = {}  # wall, CPU
        self._update_times: deque[float] = deque(maxlen=RECENT)
        self._started = self._last_mark = time.perf_counter()

    # -- set-up -------------------------------------------------------------------------
    def _groups(self) -> None:
        """Create every process group in the same order on every rank."""
        cfg = self.cfg
        self.dp_group = None
        for s in range(cfg.stages):
            ranks = [r * cfg.stages + s for r in range(cfg.replicas)]
            group = dist.new_group(ranks) if cfg.replicas > 1 else None
            if s == self.stage:
                self.dp_group = group
        # a tied weight is summed over every copy at once: all replicas of all its stages
        self.tied_groups: dict[str, object] = {}
        for g in sorted(self.stage_users):
            stages = sorted(self.stage_users[g])
            if len(stages) < 2:
                continue
            group = dist.new_group([r * cfg.stages + s for r in range(cfg.replicas)
                                    for s in stages])
            if self.stage in stages:
                self.tied_groups[g] = group

    def load_layers(self, folder: Path) -> None:
        """Overwrite the newest weights of the layers this stage holds with a layer-wise
        checkpoint (Varuna §4: any layer-to-stage mapping can resume from it)."""
        weights = self.versions[max(self.versions)]
        with torch.no_grad():
            for i in self.layers_held:
                state = load_layer(folder, i)
                for local, g in self.names_by_layer[i].items():
                    if local not in state:
                        raise ValueError(f"{folder}: layer {i} checkpoint lacks {local!r}")
                    if state[local].shape != weights[g].shape:
                        raise ValueError(f"{folder}: layer {i} {local!r} has shape "
                                         f"{tuple(state[local].shape)}, the model "
                                         f"{tuple(weights[g].shape)}")
                    weights[g].copy_(state[local])

    def reset_buffers(self) -> None:
        self.inputs: dict[tuple[int, int], torch.Tensor] = {}
        self.outputs: dict[tuple[int, int], torch.Tensor] = {}
        self.out_grads: dict[tuple[int, int], torch.Tensor] = {}   # grad of chunk output
        self.in_grads: dict[tuple[int, int], torch.Tensor] = {}    # grad of chunk input, to send
        self.used_version: dict[tuple[int, int], int] = {}
        self.saved_bytes: dict[tuple[int, int], int] = {}
        self.sends: list[tuple[object, torch.Tensor]] = []
        # receives posted ahead of their action: (op, mb, chunk) -> (handle, buffer)
        self.posted: dict[tuple[Op, int, int], tuple[object, torch.Tensor]] = {}
        self.to_post: deque[PipeOp] = deque()   # receive actions not posted yet, in order
        self.recv_window = 0                     # how many receives to keep posted

    # -- data ---------------------------------------------------------------------------
    def _data(self, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Tokens and targets of global micro-batch k on this replica."""
        cfg = self.cfg
        step, i = divmod(k, cfg.microbatches)
        if self.kind.flush:   # the schedule is one mini-batch's; a no-flush one spans them all
            step = self.step
        tokens, targets = make_batch(cfg.spec, cfg.start_step + step, cfg.global_batch)
        lo = self.replica * cfg.microbatches * cfg.micro_size + i * cfg.micro_size
        return (tokens[lo:lo + cfg.micro_size].to(self.device),
                targets[lo:lo + cfg.micro_size].to(self.device))

    # -- compute ------------------------------------------------------------------------
    def _run_chunk(self, c: int, x: torch.Tensor, version: int) -> torch.Tensor:
        module, mapping = self.modules[c]
        weights = self.versions[version]
        return functional_call(module, {local: weights[g] for local, g in mapping.items()}, (x,))

    def recomputes(self, c: int) -> bool:
        """Whether chunk ``c`` drops its activations and recomputes them before B."""
        return (self.cfg.recompute or self.kind.recomputes) and c != self.n_chunks - 1

    def forward(self, k: int, c: int, with_graph: bool, again: bool = False) -> None:
        """Forward of (k, c); ``again`` marks a recompute, which hands nothing on."""
        cfg = self.cfg
        version = (weight_version(k + 1, cfg.microbatches) if self.kind.weight_versions > 1
                   else 0)
        self.used_version[(k, c)] = version
        tokens, targets = self._data(k)
        if c == 0:
            x = tokens
        else:
            x = self.inputs[(k, c)].detach().requires_grad_(True)
            self.inputs[(k, c)] = x
        # bytes autograd saves for backward; without a graph, the stashed input instead
        saved = [x.numel() * x.element_size() if c > 0 and not with_graph else 0]

        def pack(t: torch.Tensor) -> torch.Tensor:
            saved[0] += t.numel() * t.element_size()
            return t

        with (torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t),
              torch.set_grad_enabled(with_graph)):
            y = self._run_chunk(c, x, version)
            if c == self.n_chunks - 1:
                tokens_total = cfg.global_batch * cfg.spec.seq
                y = loss_sum(y, targets) / tokens_total
        if c == 0:
            self.inputs[(k, c)] = x
        self.outputs[(k, c)] = y
        self.saved_bytes[(k, c)] = saved[0]
        if not again and c + 1 < self.n_chunks and (c + 1) % cfg.stages == self.stage:
            self.inputs[(k, c + 1)] = y.detach()

    def backward(self, k: int, c: int) -> None:
        cfg = self.cfg
        if self.recomputes(c) and not self.outputs[(k, c)].requires_grad:
            self.forward(k, c, with_graph=True, again=True)
        y = self.outputs.pop((k, c))
        if c == self.n_chunks - 1:
            y.backward()
        else:
            y.backward(self.out_grads.pop((k, c)))
        x = self.inputs.pop((k, c))
        if c > 0:
            grad = x.grad
            if (c - 1) % cfg.stages == self.stage:
                self.out_grads[(k, c - 1)] = grad
            else:
                self.in_grads[(k, c)] = grad
        self.saved_bytes.pop((k, c), None)

    # -- the interpreter ------------------------------------------------------------------
    def execute(self, action: PipeOp, k: int) -> None:
        """Run one lowered action for global micro-batch ``k``."""
        cfg = self.cfg
        c = action.chunk
        dst = self.replica * cfg.stages + peer(action, cfg.stages) if action.op in (
            Op.SA, Op.RA, Op.SG, Op.RG) else None
        if action.op is Op.F:
            self.forward(k, c, with_graph=not self.recomputes(c))
        elif action.op is Op.R:
            self.forward(k, c, with_graph=True, again=True)
        elif action.op is Op.B:
            self.backward(k, c)
        elif action.op is Op.SA:
            t = self.outputs[(k, c)].detach().contiguous()
            self.sends.append((dist.isend(t, dst, tag=tag(PipeOp(Op.SA, k, c), self.n_chunks)), t))
        elif action.op is Op.SG:
            t = self.in_grads.pop((k, c)).contiguous()
            self.sends.append((dist.isend(t, dst, tag=tag(PipeOp(Op.SG, k, c), self.n_chunks)), t))
        elif action.op in (Op.RA, Op.RG):
            key = (action.op, k, c)
            if key not in self.posted:   # recv_ahead 0: nothing is posted ahead
                self._post(PipeOp(action.op, k, c), dst)
            handle, buf = self.posted.pop(key)
            handle.wait()
            (self.inputs if action.op is Op.RA else self.out_grads)[(k, c)] = buf

    def _post(self, action: PipeOp, src: int) -> None:
        """Post the receive of ``action`` (its micro-batch index is global) from rank ``src``."""
        self.posted[(action.op, action.mb, action.chunk)] = self.post_receive(
            src, tag(action, self.n_chunks))

    def post_receive(self, src: int, message_tag: int) -> tuple[dist.Work, torch.Tensor]:
        buf = torch.empty(self.boundary_shape(), dtype=self.cfg.spec.torch_dtype,
                          device=self.device)
        return dist.irecv(buf, src, tag=message_tag), buf

    def _post_ahead(self) -> None:
        """Keep the next ``recv_ahead`` receives of this rank's list posted, so that a
        message finds its receive waiting when it is sent."""
        while self.to_post and len(self.posted) < self.recv_window:
            action = self.to_post.popleft()
            self._post(action, self.replica * self.cfg.stages + peer(action, self.cfg.stages))

    def _queue_receives(self, actions: list[PipeOp]) -> None:
        """Queue the receives of ``actions`` (about to run) and post the first ones."""
        self.to_post = deque(a for a in actions if a.op in (Op.RA, Op.RG))
        self.recv_window = self.cfg.recv_ahead
        if self.recv_window is None:   # a mini-batch's (2bw's list holds every mini-batch)
            batches = 1 if self.kind.flush else self.cfg.steps
            self.recv_window = len(self.to_post) // batches
        self._post_ahead()

    def _wait_sends(self) -> None:
        for handle, _ in self.sends:
            handle.wait()
        self.sends.clear()

    def boundary_shape(self) -> tuple[int, int, int]:
        return (self.cfg.micro_size, self.cfg.spec.seq, self.cfg.spec.hidden)

    def start_update(self, version: int, new_version: int) -> None:
        """Start all-reducing the gradients on ``version`` (a tied weight over all its copies,
        any other over the stage's replicas) without waiting; :meth:`finish_update` makes
        ``new_version`` = newest − ν·grad from them."""
        weights = self.versions[version]
        grads, handles = {}, []
        for g in sorted(weights):
            grad = weights[g].grad
            if grad is None:
                grad = torch.zeros_like(weights[g])
            weights[g].grad = None
            group = self.tied_groups.get(g, self.dp_group)
            if group is not None:
                handles.append(dist.all_reduce(grad, group=group, async_op=True))
            grads[g] = grad
        self.pending = (new_version, grads, handles)

    def finish_update(self) -> None:
        """Wait for the pending all-reduces and write the new weight version."""
        if self.pending is None:
            return
        new_version, grads, handles = self.pending
        self.pending = None
        for handle in handles:
            handle.wait()
        newest = self.versions[max(self.versions)]
        with torch.no_grad():
            self.versions[new_version] = {
                g: (newest[g] - self.cfg.lr * grads[g]).requires_grad_(True) for g in newest}
        # 2bw: mini-batch new_version−1 is done, and the next one uses version new_version−1
        for v in [v for v in self.versions if v < new_version - 1]:
            del self.versions[v]
        self.max_versions = max(self.max_versions, len(self.versions))
        if len(self.versions) > self.kind.weight_versions:
            raise RuntimeError(f"{len(self.versions)} weight versions held after making "
                               f"version {new_version}")

    def _run(self, action: PipeOp) -> None:
        """Execute one action, timing compute and tracking the activation peak."""
        c0, cpu0 = time.perf_counter(), time.thread_time()
        self.execute(action, action.mb)
        if action.op in (Op.F, Op.B, Op.R):
            spent = time.perf_counter() - c0
            self._compute += spent
            self._op_times.setdefault((action.op, action.chunk), deque(maxlen=RECENT)).append(
                (spent, time.thread_time() - cpu0))
            self._peak = max(self._peak, sum(self.saved_bytes.values()))
        self._post_ahead()

    def _mark(self) -> None:
        """Close a mini-batch: its wall time and compute time on this rank."""
        now = time.perf_counter()
        self._step_walls.append(now - self._last_mark)
        self._step_computes.append(self._compute - sum(self._step_computes))
        self._last_mark = now

    def _lowered_actions(self) -> list[PipeOp]:
        if self._lowered is None:
            cfg = self.cfg
            schedule = build_schedule(cfg.kind, cfg.stages, cfg.microbatches, cfg.chunks,
                                      **cfg.schedule_options())
            self._lowered = [a for a in add_communication(schedule, cfg.chunks)[self.stage]
                             if a is not None]
        return self._lowered

    def minibatch(self, step: int) -> None:
        """Train mini-batch ``step`` (data offset ``cfg.start_step + step``) with a flush
        schedule: every action of this rank, then W ← W − ν∇f(W) (thesis §3.2)."""
        if not self.kind.flush:
            raise ValueError(f"{self.kind.name} has no per-mini-batch flush; use train()")
        self.step = step
        actions = self._lowered_actions()
        self._queue_receives(actions)
        for action in actions:
            self._run(action)
        u0 = time.perf_counter()
        self.start_update(0, 0)   # flush: W ← W − ν∇f(W), in place of version 0
        self.finish_update()
        self._update_times.append(time.perf_counter() - u0)
        self._wait_sends()
        self._mark()

    def _next_version(self, batch: int) -> None:
        """Mini-batch ``batch`` is finished on this stage: finish the update in flight and
        start making version ``batch + 1`` in place of the oldest one kept (thesis §3.2.1)."""
        self.finish_update()
        self.start_update(max(batch - 1, 0), batch + 1)

    def _train_without_flush(self) -> None:
        """The whole schedule of a kind with no per-mini-batch flush (``ScheduleKind.flush``
        false, e.g. 2BW): version t+1 is made once this stage has finished mini-batch t
        (thesis §3.2.1)."""
        cfg = self.cfg
        self.step = 0
        done_in_batch: dict[int, int] = {}
        finished: list[int] = []   # mini-batches whose update waits for their last send
        actions = self._lowered_actions()
        self._queue_receives(actions)
        for action in actions:
            if finished and action.op in (Op.F, Op.B, Op.R):
                # the mini-batch's last gradient has been sent: start its update
                u0 = time.perf_counter()
                self._next_version(finished.pop())
                self._update_times.append(time.perf_counter() - u0)
                self._mark()
            if (self.pending is not None and action.op is Op.F
                    and weight_version(action.mb + 1, cfg.microbatches) >= self.pending[0]):
                u0 = time.perf_counter()
                self.finish_update()   # this forward needs the version being made
                self._update_times[-1] += time.perf_counter() - u0
            self._run(action)
            if action.op is Op.B:
                batch = action.mb // cfg.microbatches
                done_in_batch[batch] = done_in_batch.get(batch, 0) + 1
                if done_in_batch[batch] == cfg.microbatches:
                    finished.append(batch)
        if finished:
            self._next_version(finished.pop())
        self.finish_update()
        self._wait_sends()
        self._mark()

    def train(self) -> RankStats:
        """Run every step; return what was measured."""
        self._started = self._last_mark = time.perf_counter()
        if self.kind.flush:
            for step in range(self.cfg.steps):
                self.minibatch(step)
        else:
            self._train_without_flush()
        return self.stats()

    def stats(self) -> RankStats:
        """What this rank measured so far."""
        wall = time.perf_counter() - self._started
        weight_bytes = sum(t.numel() * t.element_size() for t in self.final_weights().values())
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return RankStats(self.rank, self.stage, self.replica, wall, self._compute,
                         tuple(self._step_walls), tuple(self._step_computes), self._peak,
                         weight_bytes, self.max_versions, rss, self.observed())

    def observed(self, p2p_s: float = 0.0) -> StageCalibration | None:
        """The costs this rank has seen while training (means of the last RECENT): the
        calibration measured on the run itself; None before the first mini-batch."""
        chunks = sorted(self.modules)
        if not all((Op.F, c) in self._op_times and (Op.B, c) in self._op_times
                   for c in chunks):
            return None
        def mean(op: Op, c: int, which: int) -> float:
            return statistics.fmean(t[which] for t in self._op_times[(op, c)])

        return StageCalibration(
            self.rank, self.stage, self.replica, {c: mean(Op.F, c, 0) for c in chunks},
            {c: mean(Op.B, c, 0) for c in chunks}, p2p_s,
            statistics.fmean(self._update_times) if self._update_times else 0.0, 0.0,
            {c: mean(Op.F, c, 1) for c in chunks}, {c: mean(Op.B, c, 1) for c in chunks})

    def final_weights(self) -> dict[str, torch.Tensor]:
        """The newest version of this stage's weights, by global name."""
        return {g: t.detach().cpu() for g, t in self.versions[max(self.versions)].items()}

    def layer_state(self) -> dict[int, dict[str, torch.Tensor]]:
        """This stage's newest weights per layer, under each layer's own parameter names."""
        weights = self.final_weights()
        return {i: {local: weights[g] for local, g in self.names_by_layer[i].items()}
                for i in self.layers_held}
