"""What the ranks of a pipeline run report: their measurements (:class:`RankStats`) and their
calibrated primitive costs (:class:`StageCalibration`, Varuna §4.3, Table 2)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class StageCalibration:
    """One rank's calibrated primitive costs (Varuna §4.3, Table 2), in seconds."""

    rank: int
    stage: int
    replica: int
    forward_s: dict[int, float]       # chunk -> F of one micro-batch
    backward_s: dict[int, float]      # chunk -> B of one micro-batch (with any recompute
    #                                   it does itself; varuna's R is an action of its own)
    p2p_s: float                      # one boundary tensor to the next stage (0: last stage)
    update_s: float                   # one flush update: all-reduces, then W − ν·g
    seconds: float = 0.0              # what calibrating took on this rank
    # the same F and B in this thread's CPU seconds: the work, whatever the machine's load
    forward_cpu_s: dict[int, float] = field(default_factory=dict)
    backward_cpu_s: dict[int, float] = field(default_factory=dict)
    # what a boundary tensor costs its endpoints' own threads, beside the trip: starting its
    # send (on the sender of each pair), and taking it once it has arrived (the receiver)
    send_s: float = 0.0
    recv_s: float = 0.0


@dataclass(frozen=True)
class RankStats:
    """What one rank measured."""

    rank: int
    stage: int
    replica: int
    wall_s: float                     # whole training loop
    compute_s: float                  # inside F, B and R
    step_wall_s: tuple[float, ...]    # per mini-batch (2bw: between this stage's updates)
    step_compute_s: tuple[float, ...]  # F, B and R time inside each of those
    peak_activation_bytes: int        # tensors saved for backward + stashed inputs
    weight_bytes: int                 # one version of this stage's weights
    max_versions: int
    peak_rss_kb: int                  # this rank's peak resident set size
    observed: StageCalibration | None = None   # F, B and update costs seen while training
