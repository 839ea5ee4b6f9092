"""Restart statistics per job type: how long a fresh run takes from its round's start to
its first ``InitJob`` (imports, model build, checkpoint load), the cost a restart takes out
of its round (thesis §5.6-5.7, what the simulator charges as preemption overhead), and how
long a run whose lease ended takes to save and exit. Their sum is what a restart costs a
job (``restart_s``), which the core's restart rule weighs (``core/restarts.py``). Also how
long a finished run takes from its last step to its exit (``exit_s``, a torch process:
half a second to a second; a preempted run's, from its save's commit, is the same path and
counts too), which a refill of its GPUs waits for at the worker: the scheduler's forecast
starts such a refill that much later (issue #29). Before any exit is timed, a type's is
a share of its start-up.

The means are kept in the store's meta table (``startup_s/<job type>`` over
``startup_n/<job type>`` runs, ``save_s/`` over ``save_n/``, ``exit_s/`` over
``exit_n/``; written behind, ``Store.set_meta_later``), so they survive a scheduler
restart, and so does the restart cost the core weighs (``restart_s/``), which follows
their sum only when it moves by more than ``RESTART_BAND``, as a job's planned
throughputs follow its measurements (``core/online.py``).

Each start-up is also kept with its launch wave (how many processes its round started at
once on its machine), the last ``WAVE_WINDOW`` of them (``startup_wave/<slot>``, a ring): a forecast
charges a launch its type's start-up alone times its wave's factor, fitted on them
(``core/waves.py``).

A job type none of whose runs has started up yet is expected to cost what the types
measured cost on average (their mean start-up, their mean restart cost), not nothing: its
first runs are then launched, held and forecast as the later ones will be (issue #29: a
first run counted as free was preempted at the next plan in the scheduler's forecast,
and the daemon held it once its start-up was measured, a few seconds later).
"""

from __future__ import annotations

import json

from ..core.waves import fit_waves
from .meta import (EXIT_N, EXIT_S, RESTART_S, SAVE_N, SAVE_S, STARTUP_N, STARTUP_S,
                   STARTUP_WAVE, MetaKey)
from .store import Store

# Once a type has this many samples, a new one counts at most this many times their mean:
# one save of 26 s on a machine at load 100 (its usual: under a second) made that type's
# restart cost 10x for good, and the restart rule held its runs that much longer. A real
# change (a bigger checkpoint) still moves the mean, a bounded step per run.
OUTLIER_AFTER = 3
OUTLIER_RATIO = 3.0
# The restart cost the core weighs moves only when the measured one differs from it by more
# than this share. Start-ups and saves vary by tens of percent from run to run, and each
# shift moved the restart rule's thresholds (a run within 30 restarts of its job's end is
# kept, ``core/restarts.py``) past some job: which runs were kept then depended on which
# sample came last, which no replay of the run can know (issue #29).
RESTART_BAND = 0.5
# Until a process's exit has been timed on this cluster, it is expected to take this share
# of its start-up: both are the process's own work, its imports and model built, then
# torn down. Charged nothing, the first forecasts started every refill early by a whole
# exit (issue #29: under the restart rule no run is preempted before a job first ends).
# Measured here: torch jobs 0.64-0.90 s to exit after 2.1-2.8 s to start (0.29-0.32),
# the emulated ``steps`` job 0.06-0.13 s after 0.14 s.
EXIT_PRIOR_SHARE = 0.3
# The start-ups kept with their launch waves (the most recent; what the wave model is
# fitted on, so that it follows the machines as they are now).
WAVE_WINDOW = 256


class Startups:
    def __init__(self, store: Store) -> None:
        self._store = store
        # (mean key, job type) -> (mean s, samples), read from the store on first use
        self._means: dict[tuple[str, str], tuple[float, int]] = {}
        # job types whose first start-up this process measured: a forecast made before
        # charged them a guess (the ETAs are due again, ``executor``)
        self.first_measured = 0
        self._weighed: dict[str, float] = {}      # job type -> the restart cost weighed
        self._measured: set[str] | None = None    # job types with a start-up recorded
        self._waves: list[list] | None = None     # [job type, wave, seconds, number], by number
        self._fit: tuple[float, dict[str, float]] | None = None   # ``fit_waves`` of them

    def _get(self, mean_key: MetaKey, count_key: MetaKey, job_type: str) -> tuple[float, int]:
        got = self._means.get((mean_key.name, job_type))
        if got is None:
            got = (float(self._store.get_meta(mean_key.key(job_type), "0") or 0.0),
                   int(self._store.get_meta(count_key.key(job_type), "0") or 0))
            self._means[mean_key.name, job_type] = got
        return got

    def _add(self, mean_key: MetaKey, count_key: MetaKey, job_type: str,
             seconds: float) -> tuple[float, int, float]:
        """(the new mean, its samples, the sample as counted: an outlier clipped)."""
        mean, n = self._get(mean_key, count_key, job_type)
        if n >= OUTLIER_AFTER and mean > 0:      # (a sample of a loaded moment)
            seconds = min(seconds, OUTLIER_RATIO * mean)
        mean = (n * mean + seconds) / (n + 1)
        self._means[mean_key.name, job_type] = (mean, n + 1)
        return mean, n + 1, seconds

    def _measured_types(self) -> set[str]:
        """The job types with a start-up recorded, in this process or before it (read from
        the store once, then kept up to date by ``record``)."""
        if self._measured is None:
            stored = self._store.meta_family(STARTUP_N.name)
            self._measured = {t for t, n in stored.items() if int(n or 0) > 0}
        return self._measured

    def expected_startup(self, job_type: str) -> float:
        """The start-up a fresh run of ``job_type`` is expected to take: its type's mean,
        or before its first, the mean over the types measured (0 before any)."""
        mean, n = self.mean(job_type)
        if n:
            return mean
        means = [m for m, n in (self.mean(t) for t in sorted(self._measured_types())) if n]
        return sum(means) / len(means) if means else 0.0

    def expected_exit(self, job_type: str) -> float:
        """How long a run of ``job_type`` is expected to take from its last commit (its
        last step, or its save) to its exit: its type's mean, or before its first, its
        expected start-up times the share an exit is of a start-up (``_exit_share``)."""
        mean, n = self._get(EXIT_S, EXIT_N, job_type)
        return mean if n else self._exit_share() * self.expected_startup(job_type)

    def _exit_share(self) -> float:
        """Exit over start-up, the mean over the types with both timed; before any,
        ``EXIT_PRIOR_SHARE``."""
        shares = []
        for job_type in sorted(self._measured_types()):
            exit_s, exits = self._get(EXIT_S, EXIT_N, job_type)
            startup_s = self.mean(job_type)[0]
            if exits and startup_s > 0:
                shares.append(exit_s / startup_s)
        return sum(shares) / len(shares) if shares else EXIT_PRIOR_SHARE

    def mean(self, job_type: str) -> tuple[float, int]:
        """(mean start-up seconds, fresh runs) recorded for ``job_type``; (0, 0) before the
        first."""
        return self._get(STARTUP_S, STARTUP_N, job_type)

    def record(self, job_type: str, seconds: float, wave: int = 1) -> None:
        """A fresh run of ``job_type`` started up in ``seconds``, one of ``wave`` processes
        its round started at once on its machine (a refill: 1)."""
        mean, n, seconds = self._add(STARTUP_S, STARTUP_N, job_type, seconds)
        self.first_measured += n == 1
        self._measured_types().add(job_type)
        waves = self._wave_samples()
        number = waves[-1][3] + 1 if waves else 0
        sample = [job_type, max(1, int(wave)), round(seconds, 4), number]
        self._waves, self._fit = [*waves, sample][-WAVE_WINDOW:], None
        self._store.set_meta_later({STARTUP_S.key(job_type): f"{mean:.3f}",
                              STARTUP_N.key(job_type): n,
                              STARTUP_WAVE.key(number % WAVE_WINDOW): json.dumps(sample)})

    def _wave_samples(self) -> list[list]:
        """The start-ups kept with their waves, oldest first (read from the store once)."""
        if self._waves is None:
            stored = self._store.meta_family(STARTUP_WAVE.name).values()
            self._waves = sorted((json.loads(v) for v in stored), key=lambda w: w[3])
        return self._waves

    def wave_slope(self) -> float:
        """How much a start-up grows with each process started beside it on its machine,
        as a share of its start-up alone (``core/waves.py``; 0 until measured)."""
        return self._waves_fit()[0]

    def expected_alone(self, job_type: str) -> float:
        """The start-up a fresh run of ``job_type`` is expected to take alone on its
        machine (``core/waves.py``); before its first, the mean over the types measured
        (0 before any)."""
        alone = self._waves_fit()[1]
        if job_type in alone:
            return alone[job_type]
        if not alone:
            return self.expected_startup(job_type)
        return sum(alone.values()) / len(alone)

    def _waves_fit(self) -> tuple[float, dict[str, float]]:
        if self._fit is None:
            self._fit = fit_waves([tuple(w[:3]) for w in self._wave_samples()])
        return self._fit

    def record_save(self, job_type: str, seconds: float) -> None:
        """A run of ``job_type`` saved and exited ``seconds`` after its lease ended."""
        mean, n, _ = self._add(SAVE_S, SAVE_N, job_type, seconds)
        self._store.set_meta_later({SAVE_S.key(job_type): f"{mean:.3f}", SAVE_N.key(job_type): n})

    def record_exit(self, job_type: str, seconds: float) -> None:
        """A finished run of ``job_type`` exited ``seconds`` after its last step."""
        mean, n, _ = self._add(EXIT_S, EXIT_N, job_type, seconds)
        self._store.set_meta_later({EXIT_S.key(job_type): f"{mean:.3f}", EXIT_N.key(job_type): n})

    def restart_s(self, job_type: str) -> float:
        """What a restart costs a job of ``job_type``, as the core weighs it: its mean
        start-up and save, once they move by more than ``RESTART_BAND`` from the cost
        weighed so far; before its first start-up, the mean over the types measured (0
        before any)."""
        if not (self.mean(job_type)[1] or self._get(SAVE_S, SAVE_N, job_type)[1]):
            # nothing measured for it yet: the mean of the types measured
            costs = [self.restart_s(t) for t in sorted(self._measured_types())]
            return sum(costs) / len(costs) if costs else 0.0
        weighed = self._weighed.get(job_type)
        if weighed is None:
            weighed = float(self._store.get_meta(RESTART_S.key(job_type), "0") or 0.0)
        measured = round(self.mean(job_type)[0] + self._get(SAVE_S, SAVE_N, job_type)[0], 3)
        if abs(measured - weighed) > RESTART_BAND * weighed:
            weighed = measured
            self._store.set_meta_later({RESTART_S.key(job_type): f"{measured:.3f}"})
        self._weighed[job_type] = weighed
        return weighed
