"""Varuna-style morphing (Varuna §4): layer-wise checkpoints that any layer-to-stage
mapping can resume from.

Each layer is saved in its own file, ``layer_<i>.pt``, under the layer's own parameter names
(a tied weight is saved with every layer that uses it), next to ``meta.json`` holding the
number of mini-batches done. A job that gets a different GPU count re-plans with the global
batch fixed, and every new stage loads just the layers it now holds.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from .config import RunConfig
from .model import build_layers, global_names

META = "meta.json"


def save_layers(folder: Path, layers: dict[int, dict[str, torch.Tensor]]) -> None:
    """Write one file per layer (atomically: temp file, then rename)."""
    folder.mkdir(parents=True, exist_ok=True)
    for index, state in layers.items():
        tmp = folder / f".layer_{index}.pt.tmp"
        torch.save({k: v.detach().clone() for k, v in state.items()}, tmp)
        tmp.replace(folder / f"layer_{index}.pt")


def load_layer(folder: Path, index: int) -> dict[str, torch.Tensor]:
    """The saved parameters of layer ``index``."""
    path = folder / f"layer_{index}.pt"
    if not path.is_file():
        raise FileNotFoundError(2, "no layer checkpoint", str(path))
    return torch.load(path, weights_only=True)


def write_meta(folder: Path, steps_done: int, layers: int, **extra: object) -> None:
    """Write ``meta.json`` (atomically); ``extra`` records e.g. the layout that wrote it."""
    tmp = folder / f".{META}.tmp"
    tmp.write_text(json.dumps({"steps_done": steps_done, "layers": layers, **extra}))
    tmp.replace(folder / META)


def read_meta(folder: Path) -> dict:
    path = folder / META
    try:
        meta = json.loads(path.read_text())
        return {"steps_done": int(meta["steps_done"]), "layers": int(meta["layers"])}
    except FileNotFoundError:
        raise
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: not a layer-checkpoint meta file ({err})") from None


def read_weights(folder: Path, spec) -> dict[str, torch.Tensor]:
    """The whole model's weights in a layer checkpoint, by global parameter name (a tied
    weight once, from the first layer that uses it)."""
    weights: dict[str, torch.Tensor] = {}
    for index, names in global_names(build_layers(spec)).items():
        state = load_layer(folder, index)
        for local, g in names.items():
            weights.setdefault(g, state[local])
    return weights


def config_for_plan(chosen, spec, kind: str = "1f1b", lr: float = 0.1, steps: int = 1,
                    start_step: int = 0, load_dir: str | None = None) -> RunConfig:
    """The run of plan ``chosen`` (:class:`workers.pipeline.planner.Plan`): its depth, width,
    micro-batching, recomputation and stage cuts; the global batch is the plan's."""
    if chosen.cuts and len(chosen.cuts) != chosen.stages - 1:
        raise ValueError(f"plan has {len(chosen.cuts)} cuts for {chosen.stages} stages")
    return RunConfig(kind=kind, stages=chosen.stages, replicas=chosen.replicas,
                     microbatches=chosen.microbatches,
                     batch=chosen.replicas * chosen.microbatch_size * chosen.microbatches,
                     steps=steps, lr=lr, spec=spec, recompute=chosen.recompute,
                     cuts=tuple(chosen.cuts) or None, start_step=start_step,
                     load_dir=load_dir)


def read_meta_for(folder: Path, spec) -> dict:
    """``read_meta``, refusing a checkpoint of a model with another number of layers."""
    meta = read_meta(folder)
    if meta["layers"] != spec.layers:
        raise ValueError(f"{folder}: checkpoint has {meta['layers']} layers, model has "
                         f"{spec.layers}")
    return meta


def resume_config(chosen, spec, folder: Path, kind: str = "1f1b", lr: float = 0.1,
                  steps: int = 1) -> RunConfig:
    """The run that continues a job from the layer checkpoint in ``folder`` under a new
    plan (made for the new GPU count with the same global batch)."""
    meta = read_meta_for(folder, spec)
    return config_for_plan(chosen, spec, kind, lr, steps, meta["steps_done"], str(folder))
