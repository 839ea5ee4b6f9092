"""Virtual nodes against plain gradient accumulation on CPU (VirtualFlow §6.6, Figures 17-18).

Throughput: at the same per-pass batch, one global step of V passes through the virtual-node
engine (``workers.virtual.engine``: per-node RNG streams, batch-norm policy, share-weighted
accumulation into a flat gradient buffer) against plain PyTorch gradient accumulation (V
micro-batches, loss / V, one optimizer step). Both read each pass's samples the same way, by
a tensor of shuffled indices (a gather, as a shuffling data loader does; the engine's are its
sampler's, plain's a fixed permutation). Both run in this process (one torch thread),
in interleaved pairs, and the table gives the median ratio of their steps/s (CPU time)
over the pairs, with a distribution-free 95% confidence interval of that median (order
statistics of the pairs' ratios: no assumption about the noise of a shared machine); a second table repeats it on a tiny model, where the engine's own work
per node (data indices, random streams, batch-norm bookkeeping) is not hidden by compute (VirtualFlow reached
>= 88.4% of TensorFlow; the target here is >= 95%).

Memory: each configuration runs in a fresh process (import, build, 3 steps) and reports
its peak RSS growth (glibc's mmap threshold fixed, so RSS follows live memory); the overhead of virtual nodes is the difference to plain accumulation with
the same V, and to a plain single pass (V = 1), next to the model's size.

    python benchmarks/virtual_nodes.py [--hidden 2048] [--batch 32] [--nodes 1 2 4 8]
                                       [--repeats 15] [--steps 2]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workers.virtual.data import VirtualSampler
from workers.virtual.engine import VirtualNodeTrainer
from gavelsched.virtual.layout import VirtualLayout
from host import describe  # (a sibling: this file runs as a script)

FEATURES, CLASSES = 256, 10


def build(hidden: int, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(FEATURES, hidden, bias=False), nn.BatchNorm1d(hidden),
                         nn.ReLU(), nn.Dropout(0.1), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, CLASSES))


class Job:
    """One model, optimizer and data set; ``step()`` runs one global batch of V passes."""

    def __init__(self, method: str, hidden: int, batch: int, nodes: int) -> None:
        self.model = build(hidden)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        size = batch * nodes * 4
        generator = torch.Generator().manual_seed(1)
        self.inputs = torch.randn(size, FEATURES, generator=generator)
        self.labels = torch.randint(0, CLASSES, (size,), generator=generator)
        self.batch, self.nodes, self.method, self.done = batch, nodes, method, 0
        self.order = torch.randperm(size, generator=generator)
        if method == "virtual":
            sampler = VirtualSampler(size, VirtualLayout.even(batch * nodes, nodes))
            self.trainer = VirtualNodeTrainer(
                self.model, self.optimizer, nn.functional.cross_entropy,
                lambda i: (self.inputs[i], self.labels[i]), sampler, range(nodes))

    def step(self) -> None:
        if self.method == "virtual":
            self.trainer.step()
            return
        self.optimizer.zero_grad()  # PyTorch's default: gradients set to None
        start = (self.done % 4) * self.batch * self.nodes
        for k in range(self.nodes):
            lo = start + k * self.batch
            index = self.order[lo:lo + self.batch]
            loss = nn.functional.cross_entropy(self.model(self.inputs[index]),
                                               self.labels[index])
            (loss / self.nodes).backward()
        self.optimizer.step()
        self.done += 1


def median_ci(values: list[float], level: float = 0.95) -> tuple[float, float]:
    """A distribution-free confidence interval of the median: the k-th smallest and k-th
    largest value, k the largest with P(Binomial(n, 1/2) < k) <= (1 - level) / 2."""
    n, ordered = len(values), sorted(values)
    k, tail = 0, 0.0
    while k < n // 2:
        tail += math.comb(n, k) / 2 ** n
        if tail > (1 - level) / 2:
            break
        k += 1
    k = max(k, 1)
    return ordered[k - 1], ordered[n - k]


def timed(job: Job, steps: int) -> tuple[float, float]:
    """(wall, CPU) seconds per step; torch runs one thread, so CPU time is the work done,
    little disturbed by other processes on a shared machine."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        job.step()
    return (time.perf_counter() - wall) / steps, (time.process_time() - cpu) / steps


def throughput(args, hidden: int) -> list[dict]:
    rows = []
    for nodes in args.nodes:
        jobs = {m: Job(m, hidden, args.batch, nodes) for m in ("plain", "virtual")}
        first = {m: timed(job, 1)[0] for m, job in jobs.items()}  # one-time costs
        pairs: list[dict[str, tuple[float, float]]] = []
        for i in range(args.repeats):  # interleaved ABBA pairs: both see the same load
            order = ("plain", "virtual") if i % 2 == 0 else ("virtual", "plain")
            pairs.append({m: timed(jobs[m], args.steps) for m in order})
        ratio = [p["plain"][1] / p["virtual"][1] for p in pairs]
        quartiles = statistics.quantiles(ratio, n=4)
        low, high = median_ci(ratio)
        rows.append({
            "nodes": nodes,
            "plain_s": statistics.median(p["plain"][1] for p in pairs),
            "virtual_s": statistics.median(p["virtual"][1] for p in pairs),
            "ratio": statistics.median(ratio), "q1": quartiles[0], "q3": quartiles[2],
            "ci_low": low, "ci_high": high,
            "ratio_wall": statistics.median(p["plain"][0] / p["virtual"][0] for p in pairs),
            "first_plain_s": first["plain"], "first_virtual_s": first["virtual"]})
    return rows


def print_throughput(args, hidden: int, title: str) -> None:
    print(f"\n{title}: steps/s of virtual nodes / plain accumulation, medians over "
          f"{args.repeats} interleaved pairs of {args.steps} steps each")
    print(f"{'V':>3} {'plain CPU s/step':>16} {'virtual CPU s/step':>18} {'ratio (CPU)':>11} "
          f"{'95% CI':>13} {'quartiles':>13} {'ratio (wall)':>12} "
          f"{'first step wall s, plain / virtual':>35}")
    for r in throughput(args, hidden):
        print(f"{r['nodes']:>3} {r['plain_s']:>16.5f} {r['virtual_s']:>18.5f} "
              f"{r['ratio']:>11.3f} {r['ci_low']:>6.3f}-{r['ci_high']:<6.3f} "
              f"{r['q1']:>6.3f}-{r['q3']:<6.3f} {r['ratio_wall']:>12.3f} "
              f"{r['first_plain_s']:>22.3f} / {r['first_virtual_s']:.3f}")


def _status_kb(key: str) -> int:
    text = Path("/proc/self/status").read_text()
    return int(next(line.split()[1] for line in text.splitlines() if line.startswith(key)))


def child(method: str, hidden: int, batch: int, nodes: int) -> dict:
    """Runs in a fresh process: peak RSS growth of building the job and 3 steps, after
    the imports (torch._dynamo comes with the first optimizer step) and a reset of the
    kernel's peak counter."""
    import torch._dynamo  # its import is part of the baseline (RSS before the reset)

    torch.set_num_threads(1)
    Path("/proc/self/clear_refs").write_text("5")  # peak RSS := current RSS
    base = _status_kb("VmRSS")
    job = Job(method, hidden, batch, nodes)
    for _ in range(3):
        job.step()
    peak = _status_kb("VmHWM")
    return {"peak_mb": (peak - base) / 1024, "import_mb": base / 1024,
            "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def memory(args) -> list[dict]:
    configs = [("plain", 1)] * (1 not in args.nodes) + [
        (m, v) for v in args.nodes for m in ("plain", "virtual")]
    # a fixed mmap threshold: large blocks go back to the OS when freed, so peak RSS follows
    # live memory instead of glibc's adaptive caching (runs then agree within ~0.3 MB)
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}
    rows = []
    for method, nodes in configs:
        out = subprocess.run([sys.executable, __file__, "--child", method, str(nodes),
                              "--hidden", str(args.hidden), "--batch", str(args.batch)],
                             check=True, capture_output=True, text=True, env=env).stdout
        rows.append({"method": method, "nodes": nodes, **json.loads(out)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hidden", type=int, default=2048, help="MLP width")
    parser.add_argument("--batch", type=int, default=32, help="per-pass batch (one node)")
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--small-hidden", type=int, default=64,
                        help="width of the tiny model whose steps are mostly overhead")
    parser.add_argument("--repeats", type=int, default=15, help="interleaved pairs")
    parser.add_argument("--steps", type=int, default=2, help="steps per timed sample")
    parser.add_argument("--child", nargs=2, metavar=("METHOD", "NODES"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], args.hidden, args.batch, int(args.child[1]))))
        return 0
    torch.set_num_threads(1)  # steadier timings on a shared machine; both methods alike
    model = build(args.hidden)
    size_mb = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
    print(f"machine: {describe()}; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; model {size_mb:.1f} MB; per-pass batch "
          f"{args.batch}")
    print_throughput(args, args.hidden, f"throughput, model {size_mb:.1f} MB")
    print_throughput(args, args.small_hidden,
                     f"engine overhead, a tiny model (width {args.small_hidden})")
    print(f"\nmemory (fresh process each; peak RSS growth over build + 3 steps, MB; "
          f"model {size_mb:.1f} MB)")
    rows = memory(args)
    single = next(r["peak_mb"] for r in rows if r["method"] == "plain" and r["nodes"] == 1)
    plain = {r["nodes"]: r["peak_mb"] for r in rows if r["method"] == "plain"}
    print(f"{'method':<8} {'V':>3} {'peak RSS':>9} {'- plain same V':>15} "
          f"{'- single pass':>14} {'in models':>10}")
    for r in rows:
        over = r["peak_mb"] - plain[r["nodes"]]
        print(f"{r['method']:<8} {r['nodes']:>3} {r['peak_mb']:>9.1f} {over:>15.1f} "
              f"{r['peak_mb'] - single:>14.1f} {(r['peak_mb'] - single) / size_mb:>10.2f}")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
