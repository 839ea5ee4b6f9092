"""Teams, users and job control wired together for the executor (issue #28): the settings
in force (entities, policy options, prices: ``settings``), each job's history (``audit``),
holds, dependencies and arrays (``control``), the usage each run meters and the time
limits it enforces (``meter``), and the calls clients make (``calls``). The executor owns
the thread; this room owns what a tenant sees of it, and is told when a job or a run ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from policies import Policy, is_pair_key

from ..core import SchedulerCore
from .accounting import PAIR_SHARE
from .audit import SCHEDULER, Audit
from .calls import ClientCalls
from .control import JobControl
from .jobs import JobRow, Jobs
from .meter import Meter, UsageSink
from .retired import Retired
from .run import Run
from .settings import ClusterSettings
from .store import EVERY, Store, Where
from .view import control_inputs


class Tenancy:
    """``cancel(job_id, reason)`` and ``fail(job_id, reason)`` end a job (the executor's
    paths); ``post(fn)`` runs ``fn`` on the executor's thread once the change in hand is
    over; ``running(job_id)`` says whether the job has a live run; ``woken()`` is told a
    job arrived."""

    def __init__(self, settings: ClusterSettings, store: Store, jobs: Jobs,
                 core: SchedulerCore, sink: UsageSink | None, epoch_unix: float, *,
                 now: Callable[[], float], post: Callable[[Callable[[], object]], object],
                 cancel: Callable[[str, str], None], fail: Callable[[str, str], None],
                 running: Callable[[str], bool], woken: Callable[[], None],
                 in_memory: Where = EVERY) -> None:
        """``in_memory``: the store's jobs in memory (``retired.live``)."""
        self.settings, self.jobs, self.core = settings, jobs, core
        self._now, self._post, self._fail, self._sink = now, post, fail, sink
        self.audit = Audit(store)
        retired = Retired(store)      # (the jobs that ended long ago: in the store alone)
        self.control = JobControl(jobs, core, cancel=cancel, running=running,
                                  retired=retired.rows)
        self.meter = Meter(store, settings.prices_at, settings.next_price_change_after,
                           epoch_unix, sink=sink, jobs=in_memory)
        self.calls = ClientCalls(jobs, core, self.control, self.audit, store, retired, now=now,
                                 end_job=cancel, woken=woken)

    def restore(self) -> None:
        """At start, once the executor can end jobs: the store's jobs enter the core
        (``JobControl.enter``: held ones and those waiting on dependencies stay out)."""
        for row in list(self.jobs.values()):
            self.control.enter(row, row.arrival_s)

    def job_ended(self, row: JobRow) -> None:
        """A job became final: its history says so, and its dependants are seen to
        (``control``) once the change that ended it is over."""
        self.audit.record(SCHEDULER, row.state, [row.id], row.reason or "")
        if self._sink is not None:
            self._sink.on_job_ended(row.state)
        self._post(lambda: self.control.ended(row, self._now()))

    def forget(self, job_ids: list[str]) -> None:
        """Jobs that left memory (``retired``): their arrays' copies and run seconds."""
        self.control.forget(job_ids)
        self.meter.forget(job_ids)

    def run_ended(self, run: Run, mono: float) -> None:
        """A run's processes are gone (at ``mono``, the executor's clock): its usage is
        metered (a co-located pair's run: half its GPUs' time, ``PAIR_SHARE``), and a job
        that has run to its time limit ends (its last checkpoint is counted: it came
        before its exit)."""
        job = self.jobs.get(run.job_id)
        if job is None:
            return
        now = self._now()
        why = self.meter.ended(job, run.generation, run.worker_type,
                               len(run.workers) or job.spec.scale_factor,
                               now - max(0.0, mono - run.started), now,
                               PAIR_SHARE if is_pair_key(run.task_key) else 1.0)
        if why is not None:
            self._post(lambda: self._fail(job.id, why))

    def view_inputs(self, runs: Iterable, mono: float) -> dict:
        """Job control and accounting for the executor's view (``view.control_inputs``)."""
        return control_inputs(self.jobs.values(), runs, self.meter.run_s(),
                              self.control.waiting_reason, self.settings.entities.values(),
                              mono)

    def reload(self, settings: ClusterSettings, policy: Policy) -> None:
        """New entities, policy options and prices (``SIGHUP``, ``gavelsched reload``): the
        next round is planned under them; running jobs keep running."""
        self.settings = settings
        self.meter.reprice(settings.prices_at, settings.next_price_change_after)
        self.core.reconfigure(self._now(), policy=policy, entities=settings.entities,
                              prices=settings.policy_prices_at(self._now()))
