"""Per-layer profiles: the input of the partitioner and the planner (thesis §2.4.1 "Profiler",
§3.3.3 "Estimating T^comp", "Cost function for MEMORY").

The profile JSON (documented in docs/pipelines.md)::

    {"model": "gpt-tiny",
     "microbatch_size": 4,                      # the per-layer numbers are for this many samples
     "bandwidth_bytes_per_s": 1.0e9,            # optional: in-pipeline / all-reduce bandwidth
     "tied_weight_bytes": 2048,                 # optional: weights the first and last layers share
     "layers": [{"name": "embed", "forward_s": 1e-4, "backward_s": 2e-4,
                 "activation_bytes": 4096,      # bytes saved for backward by this layer
                 "output_bytes": 1024,          # bytes of the layer's output (what a stage sends)
                 "weight_bytes": 2048,
                 "update_s": 1e-5}, ...]}       # optional: the optimizer step of its
                                                # weights (the last layer's: its tied copy)

Times and activation sizes scale linearly with the micro-batch size; weights and the update
do not. :func:`calibrate_profile` replaces a profile's F and B with those measured inside the
ranks (Varuna §4.3).
"""

from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path


class ProfileError(ValueError):
    """A profile file that is missing a field or holds a bad value."""


@dataclass(frozen=True)
class LayerProfile:
    """One layer, per sample (already divided by the profiled micro-batch size)."""

    name: str
    forward_s: float
    backward_s: float
    activation_bytes: float
    output_bytes: float
    weight_bytes: float
    update_s: float = 0.0               # the optimizer step of its weights, per mini-batch

    @property
    def compute_s(self) -> float:
        return self.forward_s + self.backward_s


@dataclass(frozen=True)
class Profile:
    """A model's per-layer profile, per sample."""

    model: str
    layers: tuple[LayerProfile, ...]
    bandwidth_bytes_per_s: float = math.inf
    tied_weight_bytes: float = 0.0      # shared by the first and last layers (§4.2)

    @property
    def weight_bytes(self) -> float:
        return sum(layer.weight_bytes for layer in self.layers)


_FIELDS = ("forward_s", "backward_s", "activation_bytes", "output_bytes", "weight_bytes",
           "update_s")
_OPTIONAL = ("output_bytes", "update_s")          # default 0
_PER_SAMPLE = ("forward_s", "backward_s", "activation_bytes", "output_bytes")


def _number(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)


def profile_from_dict(data: object, where: str = "profile") -> Profile:
    """Parse and check the JSON form; raise :class:`ProfileError` naming the bad value."""
    if not isinstance(data, dict):
        raise ProfileError(f"{where}: expected a JSON object")
    size = data.get("microbatch_size", 1)
    if not isinstance(size, int | float) or isinstance(size, bool) or size <= 0:
        raise ProfileError(f"{where}: microbatch_size={size!r} must be a positive number")
    bandwidth = data.get("bandwidth_bytes_per_s", math.inf)
    if not isinstance(bandwidth, int | float) or isinstance(bandwidth, bool) or bandwidth <= 0:
        raise ProfileError(f"{where}: bandwidth_bytes_per_s={bandwidth!r} must be positive")
    tied = data.get("tied_weight_bytes", 0.0)
    if not _number(tied):
        raise ProfileError(f"{where}: tied_weight_bytes={tied!r} must be a non-negative number")
    layers = data.get("layers")
    if not isinstance(layers, list) or not layers:
        raise ProfileError(f"{where}: 'layers' must be a non-empty list")
    out = []
    for index, layer in enumerate(layers):
        if not isinstance(layer, dict):
            raise ProfileError(f"{where}: layers[{index}] must be an object")
        values = {}
        for name in _FIELDS:
            value = layer.get(name, 0.0 if name in _OPTIONAL else None)
            if not _number(value):
                raise ProfileError(f"{where}: layers[{index}].{name}={value!r} must be a "
                                   "non-negative number")
            values[name] = float(value)
        scale = {k: (v / size if k in _PER_SAMPLE else v) for k, v in values.items()}
        out.append(LayerProfile(str(layer.get("name", f"layer{index}")), **scale))
    return Profile(str(data.get("model", "model")), tuple(out), float(bandwidth), float(tied))


def load_profile(path: Path) -> Profile:
    """Read a profile JSON file."""
    try:
        data = json.loads(Path(path).read_text())
    except json.JSONDecodeError as err:
        raise ProfileError(f"{path}: not valid JSON (line {err.lineno}: {err.msg})") from None
    return profile_from_dict(data, str(path))


def profile_model(spec, microbatch_size: int = 4, repeats: int = 20) -> dict:
    """Measure the reference model layer by layer on this CPU (one thread) and return the
    profile JSON. Each repeat runs the whole model as a pipeline stage holding it would: every
    layer's forward in order, then every layer's backward in reverse with the real upstream
    gradient, then every step, each timed on its own (so a layer meets the caches the layers
    before it left, not its own warm ones). ``activation_bytes`` is what autograd saves for
    backward (counted by the same hook as the executor's); the last layer includes the loss;
    ``update_s`` is the executor's SGD step on the layer's weights (W − ν·g into a new
    tensor; the head's is the step on its copy of the embedding's weight,
    ``tied_weight_bytes``). Times are medians over ``repeats``, so a burst of load from
    elsewhere moves them little. The link is not measured here
    (:func:`workers.pipeline.launch.measure_link`)."""
    import torch

    from .model import build_layers, loss_sum, make_batch

    torch.set_num_threads(1)
    layers = build_layers(spec)
    n = len(layers)
    tokens, targets = make_batch(spec, 0, microbatch_size)
    params = [list(layer.parameters()) for layer in layers]
    times = {kind: [[] for _ in range(n)] for kind in ("forward_s", "backward_s", "update_s")}
    saved = [0] * n
    output_bytes = [0] * n
    for rep in range(_WARMUP + repeats):  # the first passes warm caches and allocators up
        inputs, outputs = [], []
        x: torch.Tensor = tokens
        for index, layer in enumerate(layers):
            inp = x.detach().requires_grad_(x.is_floating_point())
            saved[index] = 0

            def pack(t, index=index):
                saved[index] += t.numel() * t.element_size()
                return t

            t0 = time.perf_counter()
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                out = layer(inp)
                # the last layer's profile includes the loss, as its stage computes it
                result = loss_sum(out, targets) if index == n - 1 else out
            _record(times["forward_s"][index], rep, time.perf_counter() - t0)
            output_bytes[index] = out.numel() * out.element_size()
            inputs.append(inp)
            outputs.append(result)
            x = out
        grad = None
        for index in reversed(range(n)):
            t0 = time.perf_counter()
            outputs[index].backward(grad)
            _record(times["backward_s"][index], rep, time.perf_counter() - t0)
            grad = inputs[index].grad
        for index in range(n):
            t0 = time.perf_counter()
            with torch.no_grad():
                _ = [(w - 1e-3 * w.grad).requires_grad_(True) for w in params[index]]
            _record(times["update_s"][index], rep, time.perf_counter() - t0)
        for layer in layers:
            layer.zero_grad(set_to_none=True)
    rows = [{"name": type(layer).__name__.lower() + str(index),
             **{kind: statistics.median(times[kind][index]) for kind in times},
             "activation_bytes": saved[index], "output_bytes": output_bytes[index],
             # the head's weight is the embedding's, counted once
             "weight_bytes": 0 if index == n - 1 else sum(w.numel() * w.element_size()
                                                          for w in params[index])}
            for index, layer in enumerate(layers)]
    return {"model": f"reference-gpt-{spec.blocks}x{spec.hidden}",
            "microbatch_size": microbatch_size,
            "tied_weight_bytes": sum(w.numel() * w.element_size() for w in params[-1]),
            "layers": rows}


_WARMUP = 2


def _record(samples: list[float], rep: int, seconds: float) -> None:
    if rep >= _WARMUP:
        samples.append(seconds)


def calibrate_profile(data: dict, spec, stages: int = 2, timeout_s: float = 300.0) -> dict:
    """Varuna's per-cut-point calibration (Varuna §4.3) of a layer profile (the JSON of
    :func:`profile_model` for the reference model ``spec``): ``stages`` ranks hold every
    layer as a chunk of its own (the interleaved layout) and calibrate at once
    (:func:`workers.pipeline.calibrate.calibrate_rank`), so each layer's F and B are measured
    in the executor's own code on one micro-batch of the profile's size, while the other
    ranks compute as in training. Returns ``data`` with those F and B, and the bandwidth of
    the calibrated boundary trip."""
    from .calibrate import stage_costs
    from .config import RunConfig
    from .launch import run_pipeline

    layers = spec.layers
    size = data.get("microbatch_size")
    if not isinstance(size, int) or size < 1:
        raise ValueError(f"microbatch_size={size!r} must be a positive integer to calibrate")
    if len(data.get("layers", ())) != layers:
        raise ValueError(f"the profile has {len(data.get('layers', ()))} layers, the model "
                         f"{layers}")
    if not isinstance(stages, int) or stages < 2 or layers % stages:
        raise ValueError(f"stages={stages!r} must be at least 2 and divide the {layers} "
                         "layers")
    cfg = RunConfig(kind="interleaved", stages=stages, microbatches=stages,
                    chunks=layers // stages, steps=1, batch=stages * size, spec=spec,
                    cuts=tuple(range(1, layers)))
    run = run_pipeline(cfg, timeout_s=timeout_s, calibrate=True)
    forward, backward, trip, _ = stage_costs(run.calibration)
    rows = [{**row, "forward_s": forward[i], "backward_s": backward[i]}
            for i, row in enumerate(data["layers"])]
    boundary = max(row["output_bytes"] for row in rows[:-1])
    return {**data, "layers": rows, "bandwidth_bytes_per_s": boundary / trip}
