"""Build ``traces/data/catalog.yaml``, the default job catalog, from stated inputs.

It also writes ``catalog.json``, the same data parsed from that YAML text: the twin that
``traces.catalog.default_catalog`` reads at start-up (JSON parses ~30x faster than YAML).

The catalog holds the 26 job types of thesis Table 5.2 on the three GPU types of the Gavel
evaluation (K80, P100, V100; §5.7.1), at scale factors 1, 2, 4 and 8, plus the throughputs of
co-located pairs for space sharing (§5.3.1, Figure 5.4), GCP prices (chapter 6) and
checkpoint times (§5.7.5). We have no GPUs to measure on, so every number is *derived*: the
inputs below each name their source (a thesis table, a datasheet, a paper, or a stated
assumption), and the formulas are written out in the generated file's header.

Over 400 lines: one generator script, each sourced input beside the formula that reads it.

Run ``python -m traces.build_catalog`` after editing an input; ``--check`` exits 1 when
either committed file is stale (the test suite runs the same check).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CATALOG_PATH = Path(__file__).with_name("data") / "catalog.yaml"
SCALE_FACTORS = (1, 2, 4, 8)
SIGNIFICANT_DIGITS = 4

# --------------------------------------------------------------------------------------
# Inputs. Every value names where it comes from.
# --------------------------------------------------------------------------------------

SOURCES = {
    "T5.2": "Narayanan, PhD thesis (2021), Table 5.2: models, datasets and batch sizes",
    "T6.1": "Narayanan, PhD thesis (2021), Table 6.1: throughput speedups vs one K80 "
            "(ResNet-50, ResNet-18, A3C, Transformer, CycleGAN on P100 and V100)",
    "T6.3": "Narayanan, PhD thesis (2021), Table 6.3: GCP on-demand/spot price ratios "
            "3.4x (K80), 3.4x (P100), 3.3x (V100)",
    "S5.7.5": "Narayanan, PhD thesis (2021), §5.7.5: checkpoint load and save take < 5 s "
              "for the evaluated models",
    "F5.4": "Narayanan, PhD thesis (2021), Figure 5.4 text: co-located pairs differ "
            "widely, many gain, some cannot share a GPU for lack of memory",
    "K80": "NVIDIA Tesla K80 datasheet: two GK210 GPUs per board, 8.73 TFLOPS FP32 (boost), "
           "24 GB and 480 GB/s per board; a cloud 'K80 GPU' is one GK210",
    "P100": "NVIDIA Tesla P100 PCIe 16 GB datasheet: 9.3 TFLOPS FP32, 732 GB/s",
    "V100": "NVIDIA Tesla V100 SXM2 16 GB datasheet: 15.7 TFLOPS FP32, 900 GB/s",
    "GCP": "Google Cloud GPU price list, us-central1, 2020 (GPU only, excluding the VM): "
           "on-demand K80 $0.45, P100 $1.46, V100 $2.48; preemptible $0.135, $0.43, $0.74 "
           "per GPU-hour; consistent with Table 6.1's dollar-normalized column (e.g. "
           "ResNet-50: 9.6 / (2.48/0.45) = 1.74 ~ 1.8) and with Table 6.3's ratios",
    "He2016": "He et al., Deep Residual Learning (CVPR 2016), Table 1: ResNet-50 is "
              "3.8e9 multiply-adds per 224x224 image; 25.6M parameters (torchvision)",
    "Zaremba2014": "Zaremba et al., Recurrent Neural Network Regularization (2014): "
                   "'medium' 2-layer LSTM, 650 units, BPTT 35; Wikitext-2 vocabulary 33,278",
    "Vaswani2017": "Vaswani et al., Attention Is All You Need (2017): base model, 6+6 "
                   "layers, d_model 512, d_ff 2048",
    "Zhu2017": "Zhu et al., CycleGAN (ICCV 2017): ResNet-9-block generators and 70x70 "
               "PatchGAN discriminators at 256x256, Adam",
    "ML20M": "MovieLens-20M README: 26,744 movies carry ratings",
    "estimate": "our own estimate, reasoned in the entry's 'note' (no measurement)",
}


@dataclass(frozen=True)
class Gpu:
    """One worker type. Only the K80's peak FLOPS enters the formulas (absolute rates);
    bandwidths give the P100/V100 speedups of the two families Table 6.1 lacks."""

    memory_gb: float
    peak_fp32_tflops: float
    memory_bandwidth_gb_s: float
    source: str


GPUS = {
    "k80": Gpu(12.0, 4.37, 240.0, "K80"),
    "p100": Gpu(16.0, 9.3, 732.0, "P100"),
    "v100": Gpu(16.0, 15.7, 900.0, "V100"),
}

PRICES = {"k80": 0.45, "p100": 1.46, "v100": 2.48}
PREEMPTIBLE_PRICES = {"k80": 0.135, "p100": 0.43, "v100": 0.74}

# Global model constants (all stated assumptions, see the file header for their use).
MODEL = {
    "allreduce_gb_per_s": (10.0, "estimate", ("NCCL ring all-reduce over PCIe 3.0 x16 "
                           "(15.75 GB/s theoretical, ~10 GB/s achieved)")),
    "allreduce_overlap": (0.5, "estimate", ("fraction of the all-reduce hidden behind the "
                          "backward pass by bucketed data-parallel training")),
    "interference": (0.10, "estimate", ("throughput lost by each of two co-located jobs to "
                     "cache/memory-bandwidth contention and MPS context switching (F5.4)")),
    "usable_memory_fraction": (0.90, "estimate", ("share of GPU memory two co-located jobs "
                               "may fill (allocator fragmentation, driver reserve)")),
    "cuda_context_gb": (0.5, "estimate", "CUDA context plus cuDNN/cuBLAS workspaces, per job"),
    "checkpoint_fixed_s": (1.0, "estimate", ("serialization and file open/close per "
                           "checkpoint")),
    "checkpoint_write_mb_per_s": (250.0, "estimate", "persistent-SSD class write bandwidth"),
    "checkpoint_read_mb_per_s": (500.0, "estimate", "persistent-SSD class read bandwidth"),
}


@dataclass(frozen=True)
class Family:
    """One model of Table 5.2, with the inputs that produce its job types' numbers."""

    model: str                      # Table 5.2 name
    job_type: str                   # Gavel-style name; '{bs}' is replaced by the batch size
    task: str
    dataset: str
    batch_sizes: tuple[int, ...]
    k80_ms_per_sample: float        # GPU time per sample on one K80
    k80_ms_note: str                # how k80_ms_per_sample was derived
    host_ms_per_step: float         # per-step time that a faster GPU does not shrink
    host_ms_note: str
    speedup: dict[str, float]       # vs K80, at the largest batch size
    speedup_source: str
    params_millions: float
    params_note: str
    optimizer_states: int           # fp32 tensors per parameter kept by the optimizer
    optimizer_note: str
    activation_mb_per_sample: float
    activation_note: str


def _k80_ms(train_gflop_per_sample: float, efficiency: float) -> float:
    """GPU milliseconds per sample on one K80 at ``efficiency`` x 4.37 TFLOPS."""
    return train_gflop_per_sample / (GPUS["k80"].peak_fp32_tflops * efficiency)


def _bandwidth_speedup(worker: str) -> float:
    """Speedup of a memory-bandwidth-bound model: the ratio of memory bandwidths to a K80."""
    return round(GPUS[worker].memory_bandwidth_gb_s / GPUS["k80"].memory_bandwidth_gb_s, 2)


_BW_NOTE = ("not in Table 6.1; memory-bandwidth-bound at these sizes, so the ratio of "
            "memory bandwidths to a K80 (datasheets K80, P100, V100): 732/240, 900/240")

FAMILIES = (
    Family(
        "ResNet-50", "ResNet-50 (batch size {bs})", "Image Classification", "ImageNet",
        (16, 32, 64, 128),
        _k80_ms(22.8, 0.30), "3 x 2 x 3.8 GMAC = 22.8 GFLOP per training image (He2016) at "
        "30% of the K80's 4.37 TFLOPS FP32 peak (estimate: cuDNN convolutions)",
        10.0, "estimate: ~500 kernel launches x ~10 us plus the optimizer step",
        {"p100": 3.7, "v100": 9.6}, "T6.1",
        25.6, "He2016", 1, "SGD with momentum (torchvision ImageNet recipe)",
        85.0, "estimate: ~21M fp32 activations kept for the backward pass at 224x224",
    ),
    Family(
        "ResNet-18", "ResNet-18 (batch size {bs})", "Image Classification", "CIFAR-10",
        (16, 32, 64, 128, 256),
        _k80_ms(3.34, 0.30), "3 x 2 x 0.56 GMAC = 3.34 GFLOP per training image (CIFAR "
        "ResNet-18: 3x3 stem, no max-pool, 32x32 input; estimate from layer shapes) at 30% "
        "of the K80 peak (estimate)",
        8.0, "estimate: ~250 kernel launches x ~10 us plus the optimizer step",
        {"p100": 4.0, "v100": 6.8}, "T6.1",
        11.2, "torchvision ResNet-18 with a 10-class head", 1, "SGD with momentum",
        8.0, "estimate: ~2M fp32 activations at 32x32",
    ),
    Family(
        "A3C", "A3C", "Deep RL", "Pong",
        (4,),
        15.0, "estimate: the policy (4 convs + LSTM(256) on 42x42 frames) is ~4.4 MFLOP a "
        "step, far too little to fill a GPU; a 20-step rollout is latency-bound at ~300 "
        "small kernels x ~50 us on a K80",
        30.0, "estimate: Atari emulator steps and Python-side loss of the rollout (CPU)",
        {"p100": 1.2, "v100": 2.2}, "T6.1",
        0.6, "estimate from layer shapes (convs ~28k, LSTM cell ~0.56M)", 2, "shared Adam",
        2.0, "estimate: negligible (42x42 frames)",
    ),
    Family(
        "LSTM", "LM (batch size {bs})", "Language Modeling", "Wikitext-2",
        (5, 10, 20, 40, 80),
        _k80_ms(5.96, 0.25), "2 layers x 8 x 1300 x 650 + 2 x 650 x 33,278 = 56.8 MFLOP "
        "per token forward (Zaremba2014 medium config, untied), x 3 x 35 tokens = 5.96 GFLOP "
        "per sequence, at 25% of the K80 peak (estimate: small recurrent GEMMs)",
        15.0, "estimate: per-timestep kernels for 35 steps x 2 layers",
        {"p100": _bandwidth_speedup("p100"), "v100": _bandwidth_speedup("v100")}, _BW_NOTE,
        50.0, "Zaremba2014: 2 x 3.4M LSTM + 21.6M embedding + 21.6M decoder", 0,
        "plain SGD with gradient clipping",
        10.4, "estimate: ~74k fp32 values per token (gates, states, 33,278 logits) x 35",
    ),
    Family(
        "Transformer", "Transformer (batch size {bs})", "Language Translation",
        "Multi30k (de-en)",
        (16, 32, 64, 128, 256),
        _k80_ms(3.7, 0.30), "6 x params x tokens: 13 source tokens x 18.9M encoder + 13 "
        "target tokens x 28.3M decoder and projection = 3.7 GFLOP per sentence pair "
        "(Vaswani2017 base; Multi30k sentences ~13 tokens, estimate), at 30% of the K80 peak",
        15.0, "estimate: ~700 kernel launches x ~10 us plus the optimizer step",
        {"p100": 3.3, "v100": 3.3}, "T6.1",
        51.3, "Vaswani2017 base: 44.1M in layers + ~7.2M embeddings (8k/6k vocabularies, "
        "estimate)", 2, "Adam",
        11.0, "estimate: ~35 KB per token per layer x 12 layers x 26 tokens",
    ),
    Family(
        "CycleGAN", "CycleGAN", "Image-to-Image Translation", "monet2photo",
        (1,),
        _k80_ms(2160.0, 0.30), "per iteration 6 generator passes x 56.9 GMAC + 6 "
        "discriminator passes x 3.1 GMAC = 720 GFLOP forward (Zhu2017 networks at 256x256, "
        "GMACs estimated from layer shapes), x 3 for training = 2,160 GFLOP, at 30% of the "
        "K80 peak",
        20.0, "estimate: four networks' launches and optimizer steps",
        {"p100": 4.5, "v100": 9.3}, "T6.1",
        28.3, "Zhu2017: 2 generators x 11.4M + 2 discriminators x 2.8M", 2, "Adam",
        2400.0, "estimate: ~400 MB of 256x256 feature maps per generator pass x 6",
    ),
    Family(
        "Recoder", "Recommendation (batch size {bs})", "Recommendation", "ML-20M",
        (512, 1024, 2048, 4096, 8192),
        _k80_ms(0.0642, 0.15), "autoencoder 26,744 -> 200 -> 26,744 (ML20M; 200 hidden "
        "units is an estimate): 2 x 2 x 26,744 x 200 = 21.4 MFLOP per user forward, x 3 = "
        "64.2 MFLOP, at 15% of the K80 peak (estimate: memory-bound)",
        10.0, "estimate: few layers; data loading of sparse rows dominates",
        {"p100": _bandwidth_speedup("p100"), "v100": _bandwidth_speedup("v100")}, _BW_NOTE,
        10.7, "2 x 26,744 x 200 weights plus biases", 2, "Adam",
        0.43, "4 dense fp32 vectors of 26,744 items per user",
    ),
)

# --------------------------------------------------------------------------------------
# Formulas (mirrored in the generated file's header).
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobType:
    name: str
    family: Family
    batch_size: int


def job_types() -> tuple[JobType, ...]:
    """The 26 job types of Table 5.2, in table order."""
    return tuple(JobType(f.job_type.format(bs=bs), f, bs)
                 for f in FAMILIES for bs in f.batch_sizes)


def gpu_speedup(family: Family, worker: str) -> float:
    """g_w: how much faster worker ``w`` runs the family's GPU work than a K80, chosen so that
    the whole step at the largest batch size B is ``speedup[w]`` times faster (Table 6.1)."""
    if worker == "k80":
        return 1.0
    big = max(family.batch_sizes) * family.k80_ms_per_sample
    h = family.host_ms_per_step
    rest = (h + big) / family.speedup[worker] - h
    if rest <= 0:
        raise ValueError(f"{family.model}: speedup {family.speedup[worker]} on {worker} is "
                         "unreachable with that host time per step")
    return big / rest


def step_ms(job: JobType, worker: str) -> tuple[float, float]:
    """(host ms, GPU ms) of one step of ``job`` alone on one ``worker``."""
    f = job.family
    return f.host_ms_per_step, job.batch_size * f.k80_ms_per_sample / gpu_speedup(f, worker)


def solo_steps_per_s(job: JobType, worker: str, scale_factor: int) -> float:
    """Steps/s summed over the job's ``scale_factor`` data-parallel replicas."""
    host, gpu = step_ms(job, worker)
    k = scale_factor
    grad_mb = 4.0 * job.family.params_millions
    comm_ms = ((1.0 - MODEL["allreduce_overlap"][0]) * 2.0 * (k - 1) / k * grad_mb
               / MODEL["allreduce_gb_per_s"][0])
    return 1000.0 * k / (host + gpu + comm_ms)


def memory_gb(job: JobType) -> float:
    f = job.family
    state_bytes = 4.0 * (2 + f.optimizer_states)  # weights, gradients, optimizer state
    return (MODEL["cuda_context_gb"][0] + f.params_millions * state_bytes / 1000.0
            + job.batch_size * f.activation_mb_per_sample / 1000.0)


def pair_steps_per_s(a: JobType, b: JobType, worker: str) -> tuple[float, float] | None:
    """Co-located steps/s of (a, b) on one ``worker`` at scale factor 1, or None when their
    memory does not fit (Figure 5.4's black squares)."""
    if memory_gb(a) + memory_gb(b) > MODEL["usable_memory_fraction"][0] * GPUS[worker].memory_gb:
        return None
    (ha, ga), (hb, gb) = step_ms(a, worker), step_ms(b, worker)
    stretch = max(1.0, ga / (ha + ga) + gb / (hb + gb))
    keep = 1.0 - MODEL["interference"][0]
    return 1000.0 * keep / (ha + stretch * ga), 1000.0 * keep / (hb + stretch * gb)


def checkpoint_s(job: JobType) -> tuple[float, float]:
    """(save seconds, load seconds): weights plus optimizer state."""
    mb = job.family.params_millions * 4.0 * (1 + job.family.optimizer_states)
    fixed = MODEL["checkpoint_fixed_s"][0]
    return (fixed + mb / MODEL["checkpoint_write_mb_per_s"][0],
            fixed + mb / MODEL["checkpoint_read_mb_per_s"][0])


# --------------------------------------------------------------------------------------
# Rendering.
# --------------------------------------------------------------------------------------

HEADER = """\
# gavelsched default job catalog: the 26 job types of thesis Table 5.2 on K80, P100 and V100.
#
# GENERATED by traces/build_catalog.py from the inputs listed under `meta` below; do not
# edit by hand. Change an input there and run `python -m traces.build_catalog`.
# No number here was measured: each is an input that names its source (meta.sources keys:
# thesis tables, datasheets, papers, or 'estimate' with a note) or comes from a formula:
#
# Units: steps/s; one step is one mini-batch of `batch size` samples on one GPU.
# Solo, scale factor 1, on worker type w, for a job of family f and batch size b:
#   t_w(b) = h_f + b * c_f / g_fw                 step time (ms)
#     h_f  = host_ms_per_step (does not shrink on a faster GPU)
#     c_f  = k80_ms_per_sample (GPU time per sample on one K80; derivation in its note)
#     g_fw = B*c_f / ((h_f + B*c_f) / S_fw - h_f), B = the family's largest batch size and
#            S_fw = speedup_vs_k80[w]: so t_k80(B) / t_w(B) = S_fw exactly (Table 6.1), and
#            smaller batches, whose steps are host-bound, gain less from a faster GPU.
#   steps/s = 1000 / t_w(b)
# Scale factor k (data parallel, k replicas of batch b each; steps of all replicas count):
#   steps/s = 1000 k / (t_w(b) + (1 - allreduce_overlap) * 2 (k-1)/k * 4 * params_millions
#                                 / allreduce_gb_per_s)
# Co-located pairs (space sharing, scale factor 1; `pairs:` section):
#   u = GPU busy fraction alone = (b*c_f/g_fw) / t_w(b);  s = max(1, u_a + u_b)
#   steps/s of a beside b = 1000 (1 - interference) / (h_a + s * b_a*c_a/g_aw), same for b
#   omitted (cannot co-locate) when memory_gb(a) + memory_gb(b)
#                                    > usable_memory_fraction * GPU memory_gb
#   memory_gb = cuda_context_gb + params_millions * 4 * (2 + optimizer_states) / 1000
#               + b * activation_mb_per_sample / 1000
# Checkpoints (meta.job_types): MB = params_millions * 4 * (1 + optimizer_states)
#   save_s = checkpoint_fixed_s + MB / checkpoint_write_mb_per_s; load_s likewise with read.
# Prices: meta.prices_usd_per_gpu_hour (source GCP).
# Values are rounded to 4 significant digits.
"""


def _num(x: float) -> str:
    """A float rounded to SIGNIFICANT_DIGITS, written so that YAML reads it back as a float."""
    value = float(f"{x:.{SIGNIFICANT_DIGITS}g}")
    text = repr(value)
    return text


def _q(text: str) -> str:
    """A YAML double-quoted scalar (JSON strings are valid YAML)."""
    return json.dumps(text, ensure_ascii=False)


def _meta_lines() -> list[str]:
    out = ["meta:", "  schema: gavelsched-catalog/1", "  sources:"]
    out += [f"    {key}: {_q(text)}" for key, text in SOURCES.items()]
    out.append("  prices_usd_per_gpu_hour:  # on-demand; source GCP")
    out += [f"    {w}: {_num(p)}" for w, p in PRICES.items()]
    out.append("  preemptible_prices_usd_per_gpu_hour:  # source GCP, cross-checked with T6.3")
    out += [f"    {w}: {_num(p)}" for w, p in PREEMPTIBLE_PRICES.items()]
    out.append("  gpus:")
    for w, g in GPUS.items():
        out.append(f"    {w}: {{memory_gb: {_num(g.memory_gb)}, peak_fp32_tflops: "
                   f"{_num(g.peak_fp32_tflops)}, memory_bandwidth_gb_s: "
                   f"{_num(g.memory_bandwidth_gb_s)}, source: {g.source}}}")
    out.append("  model:")
    for key, (value, source, note) in MODEL.items():
        out.append(f"    {key}: {{value: {_num(value)}, source: {source}, note: {_q(note)}}}")
    out.append("  families:")
    for f in FAMILIES:
        out += [
            f"    {_q(f.model)}:",
            f"      job_type: {_q(f.job_type)}",
            f"      task: {_q(f.task)}",
            f"      dataset: {_q(f.dataset)}",
            f"      batch_sizes: [{', '.join(map(str, f.batch_sizes))}]  # source T5.2",
            (f"      speedup_vs_k80: {{p100: {_num(f.speedup['p100'])}, "
            f"v100: {_num(f.speedup['v100'])}}}"),
            f"      speedup_source: {_q(f.speedup_source)}",
            f"      k80_ms_per_sample: {_num(f.k80_ms_per_sample)}",
            f"      k80_ms_per_sample_note: {_q(f.k80_ms_note)}",
            f"      host_ms_per_step: {_num(f.host_ms_per_step)}",
            f"      host_ms_per_step_note: {_q(f.host_ms_note)}",
            f"      params_millions: {_num(f.params_millions)}",
            f"      params_note: {_q(f.params_note)}",
            f"      optimizer_states: {f.optimizer_states}  # {f.optimizer_note}",
            f"      activation_mb_per_sample: {_num(f.activation_mb_per_sample)}",
            f"      activation_note: {_q(f.activation_note)}",
        ]
    out.append("  job_types:  # memory_gb and checkpoint seconds by the formulas above")
    for j in job_types():
        save, load = checkpoint_s(j)
        out.append(f"    {_q(j.name)}: {{family: {_q(j.family.model)}, batch_size: "
                   f"{j.batch_size}, memory_gb: {_num(memory_gb(j))}, checkpoint_save_s: "
                   f"{_num(save)}, checkpoint_load_s: {_num(load)}}}")
    return out


def _solo_lines() -> list[str]:
    out: list[str] = []
    for w in GPUS:
        out.append(f"{w}:  # steps/s by scale factor")
        for j in job_types():
            cells = ", ".join(f"{k}: {_num(solo_steps_per_s(j, w, k))}" for k in SCALE_FACTORS)
            out.append(f"  {_q(j.name)}: {{{cells}}}")
    return out


def _pair_lines() -> list[str]:
    out = ["pairs:  # scale factor 1; steps/s of (a, b) when sharing one GPU"]
    types = job_types()
    for w in GPUS:
        out.append(f"  {w}:")
        omitted = 0
        for i, a in enumerate(types):
            for b in types[i:]:
                rates = pair_steps_per_s(a, b, w)
                if rates is None:
                    omitted += 1
                    continue
                out.append(f"    - {{a: {_q(a.name)}, b: {_q(b.name)}, steps_per_s: "
                           f"[{_num(rates[0])}, {_num(rates[1])}]}}")
        out.append(f"    # {omitted} pairs omitted on {w}: they do not fit in memory together")
    return out


def render_catalog() -> str:
    """The full text of ``catalog.yaml``."""
    lines = [HEADER.rstrip("\n"), ""] + _meta_lines() + [""] + _solo_lines() + [""]
    lines += _pair_lines()
    return "\n".join(lines) + "\n"


def render_catalog_json(yaml_text: str | None = None) -> str:
    """The full text of ``catalog.json``: ``yaml_text`` (default: :func:`render_catalog`)
    parsed as the loader parses it, written as compact JSON (scale-factor keys become
    strings, which the native loader accepts) with a trailing newline."""
    from .throughputs import _parse_yaml  # the loader's own YAML reading, so values match

    data = _parse_yaml(render_catalog() if yaml_text is None else yaml_text, CATALOG_PATH)
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False, sort_keys=False,
                      allow_nan=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if a committed catalog file differs from the inputs")
    parser.add_argument("-o", "--output", type=Path, default=CATALOG_PATH,
                        help="the YAML file; its JSON twin goes beside it (.json)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    text = render_catalog()
    outputs = {args.output: text, args.output.with_suffix(".json"): render_catalog_json(text)}
    if args.check:
        stale = [path for path, want in outputs.items()
                 if not path.exists() or path.read_text(encoding="utf-8") != want]
        for path in outputs:
            if path in stale:
                log.error("%s is stale: run python -m traces.build_catalog", path)
            else:
                log.info("%s is up to date", path)
        return 1 if stale else 0
    for path, want in outputs.items():
        path.write_text(want, encoding="utf-8")
        log.info("wrote %s (%d job types)", path, len(job_types()))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
