"""Prometheus metrics of the scheduler daemon (prometheus-client), all named
``gavelsched_*``:

- ``gavelsched_jobs{state}``: jobs in the scheduler's memory by state (queued, running,
  preempted, held, done, failed, cancelled: ``jobs.STATES``; an ended job leaves it
  ``ended_jobs_kept_s`` after its end, ``retired``);
- ``gavelsched_jobs_ended_total{state}``: the jobs that ended since this scheduler started,
  by final state (``rate()`` of it: the jobs the cluster finishes, fails and cancels);
- ``gavelsched_round_duration_seconds``: histogram of the time between round starts;
- ``gavelsched_policy_solve_seconds``: histogram of policy solve times;
- ``gavelsched_plans_waited_total``: rounds planned on the allocation in force because
  their re-solve was still running at the boundary (``solver``: it is installed later);
- ``gavelsched_solve_start_time_seconds``: when the re-solve running off the executor began,
  as a Unix time (0: none running): ``time() - gavelsched_solve_start_time_seconds`` is how
  long it has run, for an alert on a solve that outlasts the rounds;
- ``gavelsched_dispatch_seconds``: histogram of the time from a round's plan to the last
  of the plan's RunJobs answered by its worker (``dispatch.RoundDispatch``);
- ``gavelsched_rpcs_total{method}``: the gRPC calls the scheduler has served;
- ``gavelsched_calls_refused_total{method}``: the calls refused as busy, every seat of
  their kind taken (``service.ExecutorWaits``; the scheduler's log says which calls held
  the seats);
- ``gavelsched_calls_limited_total{method}``: the calls refused over their caller's budget:
  a job's RenewLease and ReportSteps, a user's client calls, and a user's ``/api/status``
  on the dashboard (``method="dashboard"``) (``budgets``; the log names the callers);
- ``gavelsched_renewals_total{answer}``: the RenewLeases answered from the last plan's book
  (``book``), by the executor (``executor``: at once, or once the plan it waited for was
  made), or told to ask again because that plan came later than it could wait
  (``ask_again``; ``renewals``);
- ``gavelsched_init_jobs_total{answer}``: the InitJobs answered from the book of the runs
  launched (``book``: on the handler's thread, ``launches``) or by the executor
  (``executor``), or refused by it: the run is not the job's current one (``stale``), the job
  is not known (``unknown``), or, after a restart, its server has not registered again
  (``ask_again``); ``why`` the book did not answer (``launches.Launches.why_not``:
  ``other_generation``, ``run_ended``, ``lease_changed``, ``executor_started``,
  ``never_booked``; empty for the book's answers);
- ``gavelsched_heartbeat_delay_seconds``: histogram of how late each heartbeat reached the
  scheduler against its server's fastest (``health.intake_delay``: that much more silence
  is granted to every server before it is failed);
- ``gavelsched_gc_seconds``: histogram of the full garbage collections, once a round
  (``collector``), each stopping every thread of the scheduler while it runs;
- ``gavelsched_job_series_omitted``: the jobs left out of the per-job series below
  (``job_series``, the cluster YAML's ``metrics_job_series``);
- ``gavelsched_job_allocation{job,worker_type}``: X, the time fraction the policy gives
  each active job on each type (thesis §5.5);
- ``gavelsched_job_received_share{job,worker_type}``: the fraction it received since the
  last re-solve;
- ``gavelsched_job_gpus{job,worker_type}``: GPUs each job's live run holds, labelled with
  the worker type it runs on, or its configuration's name for a job on several types
  (e.g. ``k80:1+v100:1``; VirtualFlow §6.5.2); a run waiting for GPUs that the run before
  it still holds (saving its checkpoint) holds none yet, so a server never shows more GPUs
  held than it has (``holding``, read through the view's ``RunView.gpus``);
- ``gavelsched_job_eta_start_timestamp_seconds{job}`` and
  ``gavelsched_job_eta_finish_timestamp_seconds{job}``: the scheduler's predicted start (of
  a job not started) and finish of each unfinished job, as Unix times (``forecast``);
  ``gavelsched_eta_computed_timestamp_seconds``: when the picture they replay was taken;
  ``gavelsched_eta_replay_seconds``: histogram of the replay's wall time;
- ``gavelsched_jobs_slo{status}``: the jobs with an SLO by where they stand against its
  deadline (``statusjson.slo_status``: ``missed``, ``at_risk`` by the ETA, ``unknown``,
  ``on_track``, ``met``), as at the latest view; an alert on ``at_risk`` warns before a
  deadline passes;
- ``gavelsched_workers{worker_type,alive}``: GPUs registered;
- ``gavelsched_workers_drained{worker_type}``: GPUs out of service (``gavelsched drain``);
- ``gavelsched_rounds_total``: rounds started;
- ``gavelsched_state_dir_free_bytes``: the bytes free on the state_dir's disk, read when
  Prometheus scrapes; below ``state_dir_min_free_mb`` submissions are refused (``room``);
- ``gavelsched_launches_not_made_total{reason}``: jobs a round's plan placed that were not
  launched, their GPUs idle to the round's end, by why (``runs.NOT_LAUNCHED``): their
  servers failed or were drained since the plan (``servers_down``), a killed run's back-off
  (``backing_off``), or a placement that waited for its job's last run to save and then had
  less of the round left than its start-up (``too_late``: the log line of each names it);
- ``gavelsched_gpu_seconds_total{entity,user,type}`` and
  ``gavelsched_cost_dollars_total{entity,user}``: GPU-seconds and dollars (at the price per
  GPU-hour in force when each ran) of the jobs' ended runs, what ``gavelsched usage``
  reports from the store (``accounting``; ``-`` for no entity, user or type). A run counts
  when it ends (``on_usage``); at start, ``restore_usage`` sets the counters to the sum
  over the store's runs, so that a restarted scheduler goes on from its totals instead of
  from zero (a scrape sees a counter reset only if the store lost rows).

The per-job series (allocation, received share, GPUs held, ETAs) cover at most
``job_series`` jobs (the cluster YAML's ``metrics_job_series``, default 5,000): those
holding GPUs first, then the others in submission order. At 100,000 jobs every scrape wrote
a line per job and type, for the scheduler to build (holding the GIL) and Prometheus to
keep (issue #30); ``gavelsched status`` shows every job.

Each daemon has its own registry (several can share a process in tests); the executor
thread writes it, and the publisher's thread (``publish``: ``on_state``) and the gRPC
handlers (``on_call``) through prometheus-client's thread-safe metrics.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import MetricsHandler

from .accounting import UsageRun
from .config import METRICS_JOB_SERIES
from .forecast import Forecast
from .httpserve import bounded_server
from .jobs import FINAL, STATES
from .statusjson import SLO_STATUSES, slo_status
from .view import DaemonView

ROUND_BUCKETS = (0.5, 1, 2, 5, 10, 30, 60, 120, 360, 720, 1800)
SOLVE_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60)
HEARTBEAT_BUCKETS = (0.01, 0.1, 0.5, 1, 2, 5, 10, 30)


class DaemonMetrics:
    """The daemon's series (module docstring); ``job_series``: the most jobs with series of
    their own."""

    def __init__(self, job_series: int = METRICS_JOB_SERIES) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.jobs = Gauge("gavelsched_jobs", "Jobs by state", ["state"], registry=r)
        self.round_duration = Histogram("gavelsched_round_duration_seconds",
                                        "Time between round starts", buckets=ROUND_BUCKETS,
                                        registry=r)
        self.solve = Histogram("gavelsched_policy_solve_seconds", "Policy solve time",
                               buckets=SOLVE_BUCKETS, registry=r)
        self.plans_waited = Counter("gavelsched_plans_waited", "Rounds planned on the "
                                    "allocation in force, their re-solve still running",
                                    registry=r)
        self.solve_start = Gauge("gavelsched_solve_start_time_seconds", "When the re-solve "
                                 "running began, as a Unix time (0: none running)", registry=r)
        self.dispatch = Histogram("gavelsched_dispatch_seconds", "Time from a round's plan "
                                  "to the last of the plan's RunJobs answered",
                                  buckets=ROUND_BUCKETS, registry=r)
        self.rpcs = Counter("gavelsched_rpcs", "gRPC calls served", ["method"], registry=r)
        self.refused = Counter("gavelsched_calls_refused", "gRPC calls refused as busy",
                               ["method"], registry=r)
        self.limited = Counter("gavelsched_calls_limited", "Calls refused over their "
                               "caller's budget (a job's, a user's)", ["method"], registry=r)
        self.renewals = Counter("gavelsched_renewals", "RenewLease answers, by who gave them",
                                ["answer"], registry=r)
        self.init_jobs = Counter("gavelsched_init_jobs", "InitJob answers, by who gave them "
                                 "and why the book did not", ["answer", "why"], registry=r)
        self.heartbeat_delay = Histogram(
            "gavelsched_heartbeat_delay_seconds", "How late each heartbeat reached the "
            "scheduler against its server's fastest", buckets=HEARTBEAT_BUCKETS, registry=r)
        self.gc = Histogram("gavelsched_gc_seconds", "Full garbage collections (every "
                            "thread stopped)", buckets=SOLVE_BUCKETS, registry=r)
        self.workers = Gauge("gavelsched_workers", "GPUs registered", ["worker_type", "alive"],
                             registry=r)
        self.drained = Gauge("gavelsched_workers_drained",
                             "GPUs out of service (gavelsched drain)", ["worker_type"],
                             registry=r)
        # Per job: read from the latest views when Prometheus scrapes (_JobsCollector);
        # setting a gauge per job and type took seconds a round at 20,000 jobs (issue #30).
        self._jobs = _JobsCollector(job_series)
        r.register(self._jobs)
        self._slo = _SloCollector()
        r.register(self._slo)
        self.omitted = Gauge("gavelsched_job_series_omitted", "Jobs left out of the per-job "
                             "series (metrics_job_series)", registry=r)
        self.rounds = Counter("gavelsched_rounds", "Rounds started", registry=r)
        self.ended = Counter("gavelsched_jobs_ended", "Jobs that ended since this scheduler "
                             "started, by final state", ["state"], registry=r)
        for state in FINAL:
            self.ended.labels(state=state)
        self.gpu_seconds = Counter("gavelsched_gpu_seconds",
                                   "GPU-seconds of the jobs' ended runs",
                                   ["entity", "user", "type"], registry=r)
        self.cost = Counter("gavelsched_cost_dollars", "Dollars of the jobs' ended runs, at "
                            "the price per GPU-hour in force when each ran",
                            ["entity", "user"], registry=r)
        self.eta_replay = Histogram("gavelsched_eta_replay_seconds",
                                    "Wall time of the scheduler's ETA replay",
                                    buckets=SOLVE_BUCKETS, registry=r)
        for state in STATES:
            self.jobs.labels(state=state).set(0)
        self._server = None

    def serve(self, address: str) -> int:
        """Serve ``/metrics`` on ``host:port`` (port 0: a free one), no peer able to hold
        many of the scheduler's threads (``httpserve``); returns the port."""
        self._server = bounded_server(address, MetricsHandler.factory(self.registry),
                                      "/metrics", default_host="0.0.0.0")
        threading.Thread(target=self._server.serve_forever, name="gavelsched-metrics",
                         daemon=True).start()
        return int(self._server.server_address[1])

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def on_solve(self, seconds: float) -> None:
        self.solve.observe(seconds)

    def on_plan_waited(self) -> None:
        self.plans_waited.inc()

    def on_dispatch(self, seconds: float) -> None:
        self.dispatch.observe(seconds)

    def on_heartbeat(self, delay_s: float) -> None:
        """A heartbeat arrived ``delay_s`` later than its server's fastest (any handler
        thread)."""
        self.heartbeat_delay.observe(delay_s)

    def on_call(self, method: str) -> None:
        """A gRPC call served (any handler thread: prometheus counters are thread-safe)."""
        self.rpcs.labels(method=method).inc()

    def on_refused(self, method: str) -> None:
        """A call refused as busy (any handler thread)."""
        self.refused.labels(method=method).inc()

    def on_limited(self, method: str) -> None:
        """A call refused over its caller's budget (any handler thread)."""
        self.limited.labels(method=method).inc()

    def on_answer(self, method: str, answer: str, why: str = "") -> None:
        """A RenewLease or an InitJob (``method``) answered (``book``, ``executor``,
        ``ask_again``) or an InitJob refused (``stale``, ``unknown``), with ``why`` the
        book did not answer an InitJob (``launches.Launches.why_not``; any handler
        thread)."""
        if method == "InitJob":
            self.init_jobs.labels(answer=answer, why=why).inc()
        else:
            self.renewals.labels(answer=answer).inc()

    def on_gc(self, seconds: float) -> None:
        self.gc.observe(seconds)

    def on_round(self, seconds: float) -> None:
        self.round_duration.observe(seconds)

    def on_state(self, view: DaemonView) -> None:
        """Jobs by state, allocation against received share (thesis §5.5), the GPUs each
        run holds, and workers, after a change (the publisher's thread)."""
        counts = dict.fromkeys(STATES, 0)
        for job in view.jobs:
            counts[job.state] += 1
        for state, n in counts.items():
            self.jobs.labels(state=state).set(n)
        self._jobs.runs, self._jobs.shares = view.runs, view.shares
        self._slo.view = view
        self.solve_start.set(0.0 if view.solving_since_s < 0
                             else view.epoch_unix + view.solving_since_s)
        self.omitted.set(max(0, len(view.shares) - self._jobs.limit))
        self.workers.clear()
        self.drained.clear()
        for s in view.servers:
            self.workers.labels(worker_type=s.row.worker_type,
                                alive=str(s.alive).lower()).inc(len(s.row.workers))
            self.drained.labels(worker_type=s.row.worker_type).inc(   # 0 when none is
                len(s.row.workers) if s.drained else 0)

    def on_plan(self) -> None:
        """A round started (executor thread)."""
        self.rounds.inc()

    def watch_forecasts(self, latest: Callable[[], Forecast | None],
                        epoch_unix: float) -> None:
        """The ETA gauges, read from ``latest()`` (an immutable ``Forecast``) when
        Prometheus scrapes: setting a gauge per job on the executor thread took 0.2 s at
        10,000 jobs (BENCHMARKS.md, "The scheduler's ETA replay")."""
        self.registry.register(_ForecastCollector(latest, epoch_unix, self._jobs.shown))

    def watch_launches(self, not_launched: Callable[[], Mapping[str, int]]) -> None:
        """The launches not made, read from ``not_launched()`` (the run table's tally by
        reason, which the executor thread counts up) when Prometheus scrapes."""
        self.registry.register(_NotLaunchedCollector(not_launched))

    def watch_room(self, free_bytes: Callable[[], float]) -> None:
        """The state_dir's free bytes, read from ``free_bytes()`` when Prometheus scrapes."""
        Gauge("gavelsched_state_dir_free_bytes", "Bytes free on the disk of the state_dir",
              registry=self.registry).set_function(free_bytes)

    def on_forecast(self, forecast: Forecast) -> None:
        """A replay answered (executor thread)."""
        self.eta_replay.observe(forecast.replay_s)

    def on_job_ended(self, state: str) -> None:
        """A job became final, in ``state`` (executor thread)."""
        self.ended.labels(state=state).inc()

    def on_usage(self, run: UsageRun) -> None:
        """A run that ended: its GPU-seconds and cost (executor thread)."""
        entity, user = run.key("entity"), run.key("user")
        self.gpu_seconds.labels(entity=entity, user=user, type=run.key("type")).inc(
            run.gpu_seconds())
        self.cost.labels(entity=entity, user=user).inc(run.cost())

    def restore_usage(self, runs: Iterable[UsageRun]) -> None:
        """At start: the usage counters become the sum over ``runs`` (the store's), whatever
        they held before (so a second call does not count twice)."""
        self.gpu_seconds.clear()
        self.cost.clear()
        for run in runs:
            self.on_usage(run)


class _JobsCollector:
    """The per-job gauges, built at each scrape from the latest views' runs and shares
    (each view is immutable; the executor thread only swaps the reference), for the jobs
    ``shown`` picks."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.runs: Mapping = {}
        self.shares: Mapping = {}

    def shown(self, job_ids: Iterable[str]) -> Iterable[str]:
        """``job_ids`` (every unfinished job, in submission order), cut to ``limit``: the
        ones with a live run first."""
        job_ids = list(job_ids)
        if len(job_ids) <= self.limit:
            return job_ids
        runs = self.runs
        keep = dict.fromkeys([j for j in job_ids if j in runs][:self.limit])
        for job_id in job_ids:
            if len(keep) >= self.limit:
                break
            keep[job_id] = None
        return [j for j in job_ids if j in keep]

    def collect(self):
        allocation = GaugeMetricFamily(
            "gavelsched_job_allocation",
            "Time fraction the allocation gives a job on a worker type",
            labels=["job", "worker_type"])
        received = GaugeMetricFamily(
            "gavelsched_job_received_share",
            "Time fraction a job received on a worker type since the last re-solve",
            labels=["job", "worker_type"])
        gpus = GaugeMetricFamily(
            "gavelsched_job_gpus",
            "GPUs a job's live run holds, by the worker type (or configuration) it runs on",
            labels=["job", "worker_type"])
        shares, runs = self.shares, self.runs
        for job_id in self.shown(shares):
            x, got = shares[job_id]
            for t, v in x.items():
                allocation.add_metric([job_id, t], v)
            for t, v in got.items():
                received.add_metric([job_id, t], v)
        for job_id in self.shown(runs):
            run = runs[job_id]
            if not run.orphan:
                gpus.add_metric([job_id, run.worker_type], run.gpus)
        return [allocation, received, gpus]


class _SloCollector:
    """``gavelsched_jobs_slo{status}``, counted at each scrape from the latest view (its
    jobs, its ETAs and its time)."""

    view: DaemonView | None = None

    def collect(self):
        family = GaugeMetricFamily("gavelsched_jobs_slo", "Jobs with an SLO by where they "
                                   "stand against its deadline", labels=["status"])
        counts = dict.fromkeys(SLO_STATUSES, 0)
        view = self.view
        if view is not None:
            finish = view.forecast.finish_s if view.forecast is not None else {}
            for job in view.jobs:
                if job.spec.slo_s:
                    status = slo_status(job.state, job.arrival_s + job.spec.slo_s,
                                        job.completion_s, finish.get(job.id), view.now_s)
                    if status is not None:
                        counts[status] += 1
        for status, n in counts.items():
            family.add_metric([status], n)
        return [family]


class _ForecastCollector:
    """The scheduler's latest ETAs as Unix times, built at each scrape."""

    def __init__(self, latest: Callable[[], Forecast | None], epoch_unix: float,
                 shown: Callable[[Iterable[str]], Iterable[str]]) -> None:
        self._latest, self._epoch, self._shown = latest, epoch_unix, shown

    def collect(self):
        forecast = self._latest()
        start = GaugeMetricFamily("gavelsched_job_eta_start_timestamp_seconds",
                                  "Predicted start of a job not started (Unix time)",
                                  labels=["job"])
        finish = GaugeMetricFamily("gavelsched_job_eta_finish_timestamp_seconds",
                                   "Predicted finish of an unfinished job (Unix time)",
                                   labels=["job"])
        computed = GaugeMetricFamily("gavelsched_eta_computed_timestamp_seconds",
                                     "When the picture the ETAs replay was taken (Unix time)")
        if forecast is not None:
            for job_id in self._shown(forecast.start_s):
                start.add_metric([job_id], self._epoch + forecast.start_s[job_id])
            for job_id in self._shown(forecast.finish_s):
                finish.add_metric([job_id], self._epoch + forecast.finish_s[job_id])
            computed.add_metric([], self._epoch + forecast.computed_s)
        return [start, finish, computed]


class _NotLaunchedCollector:
    """``gavelsched_launches_not_made_total{reason}``, built at each scrape."""

    def __init__(self, tally: Callable[[], Mapping[str, int]]) -> None:
        self._tally = tally

    def collect(self):
        family = CounterMetricFamily("gavelsched_launches_not_made", "Placements of a round's "
                                     "plan not launched, by why", labels=["reason"])
        for reason, count in dict(self._tally()).items():
            family.add_metric([reason], count)
        return [family]
