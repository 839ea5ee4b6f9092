"""Plots of a simulation (matplotlib, Agg backend: files only, no display).

- ``jct_cdf.png``: CDF of job completion times (thesis Figures 5.9b-5.11b);
- ``allocation.png``: each job's computed allocation over time, in GPUs (time fraction x
  scale factor), stacked; the first ``max_jobs`` jobs (or the window's) are drawn;
- ``utilization.png``: busy workers per type over time, as a share of the type's workers;
- ``jct_vs_rate.png`` (sweeps): average JCT against input job rate, one line per policy,
  mean over seeds with a band of one standard deviation (Figures 5.9a-5.11a);
- ``plot_cdfs``: JCT CDFs of several policies on one axis (Figures 5.9b-5.10b).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from .result import SimulationResult


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def write_plots(result: SimulationResult, out_dir: str | Path, *, max_jobs: int = 40) -> list[Path]:
    """Write the three per-run plots into ``out_dir``; return their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plt = _pyplot()
    paths = [_jct_cdf(plt, result, out / "jct_cdf.png")]
    if result.timeline is not None:
        paths.append(_allocation(plt, result, out / "allocation.png", max_jobs))
        paths.append(_utilization(plt, result, out / "utilization.png"))
    return paths


def _jct_cdf(plt, result: SimulationResult, path: Path) -> Path:
    window = result.window
    jcts = np.sort([j.jct_s / 3600 for j in result.jobs if j.jct_s is not None and (
        window is None or window[0] <= int(j.id) < window[1])])
    fig, ax = plt.subplots(figsize=(6, 4))
    if len(jcts):
        ax.plot(jcts, np.arange(1, len(jcts) + 1) / len(jcts), label=result.policy)
        ax.set_xscale("log")
    ax.set_xlabel("job completion time (hours)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title("JCT CDF" + (f" (jobs {window[0]}-{window[1] - 1})" if window else ""))
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(plt, fig, path)


def _allocation(plt, result: SimulationResult, path: Path, max_jobs: int) -> Path:
    tl = result.timeline
    if result.window is not None:
        chosen = [str(i) for i in range(result.window[0], result.window[1])][:max_jobs]
    else:
        chosen = [j.id for j in result.jobs][:max_jobs]
    end = {j.id: j.completion_s for j in result.jobs}
    fig, ax = plt.subplots(figsize=(8, 4.5))
    if tl.allocations:
        times = [t for t, _ in tl.allocations] + [result.end_s]
        steps = np.array(times) / 3600
        series = []
        for job_id in chosen:
            vals = []
            for (t, shares), t_next in zip(tl.allocations, times[1:]):
                done = end.get(job_id)
                alive = done is None or t < done
                vals.append(shares.get(job_id, 0.0) if alive else 0.0)
            series.append(vals + vals[-1:])
        if series:
            ax.stackplot(steps, np.array(series), step="post", linewidth=0)
    ax.set_xlabel("time (hours)")
    ax.set_ylabel("allocation (GPUs)")
    ax.set_title(f"computed allocation, {len(chosen)} jobs ({result.policy})")
    ax.grid(alpha=0.3)
    return _save(plt, fig, path)


def _utilization(plt, result: SimulationResult, path: Path) -> Path:
    tl = result.timeline
    fig, ax = plt.subplots(figsize=(8, 4))
    if tl.round_start:
        start = np.array(tl.round_start) / 3600
        busy = np.array(tl.busy, dtype=float)
        for j, t in enumerate(tl.types):
            cap = tl.capacity[j] or 1
            ax.step(start, busy[:, j] / cap, where="post", label=t, linewidth=0.8)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("time (hours)")
    ax.set_ylabel("busy share of workers")
    ax.set_title(f"cluster utilisation ({result.utilization:.0%} overall)")
    ax.legend()
    ax.grid(alpha=0.3)
    return _save(plt, fig, path)


def plot_sweep(rows: Sequence[Mapping], path: str | Path) -> Path:
    """Average JCT (hours) vs input job rate, per policy, mean +- std over seeds."""
    plt = _pyplot()
    path = Path(path)
    fig, ax = plt.subplots(figsize=(6, 4))
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    for policy in policies:
        mine = [r for r in rows if r["policy"] == policy and r["avg_jct_s"] is not None]
        rates = sorted({float(r["rate"]) for r in mine})
        if not rates:
            continue
        mean, std = [], []
        for rate in rates:
            vals = [float(r["avg_jct_s"]) / 3600 for r in mine if float(r["rate"]) == rate]
            mean.append(np.mean(vals))
            std.append(np.std(vals))
        mean, std = np.array(mean), np.array(std)
        ax.plot(rates, mean, marker="o", label=policy)
        ax.fill_between(rates, mean - std, mean + std, alpha=0.2)
    ax.set_xlabel("input job rate (jobs/hour)")
    ax.set_ylabel("average JCT (hours)")
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(plt, fig, path)


def plot_cdfs(series: Mapping[str, Sequence[float]], path: str | Path, *,
              title: str = "JCT CDF") -> Path:
    """One CDF per label of completion times in seconds, drawn in hours on a log axis."""
    plt = _pyplot()
    path = Path(path)
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, seconds in series.items():
        hours = np.sort(np.asarray(seconds, dtype=float)) / 3600
        if len(hours):
            ax.plot(hours, np.arange(1, len(hours) + 1) / len(hours), label=label)
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (hours)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(plt, fig, path)


def _save(plt, fig, path: Path) -> Path:
    """Lay out, write and close one figure."""
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
