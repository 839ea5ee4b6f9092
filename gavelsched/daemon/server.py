"""``SchedulerDaemon``: a config in, a running scheduler out (thesis §5.6). It opens the
store, builds the policy and the core inside a ``DaemonExecutor``, serves the gRPC services
(token and TLS through ``gavelsched.rpc.security.serve``), the Prometheus endpoint and the
web dashboard (``dashboard``), and runs the executor on its own thread. It refuses to
listen beyond loopback without ``auth_token_file`` unless made with ``insecure=True``
(``gavelsched scheduler --insecure``; docs/design.md, Safety rules).

Who may call is ``identities`` (``rpc.identity``): the daemon token, each user of the
``users_file`` and each job's own token. ``reload`` (SIGHUP, ``gavelsched reload``) reads
the config file again and puts its entities, policy options, prices and users in force for
the next round; a file that does not load is refused with its one line, and the settings in
force stay (issue #28)."""

from __future__ import annotations

import errno
import logging
import socket
import threading
from collections.abc import Callable
from pathlib import Path

from policies import PolicyError
from traces import default_table, load_table

from ..jobenv import scheduler_env
from ..rpc.identity import Identities, IdentityError
from ..rpc.security import IN_USE, SecurityError, exposure, host_of, read_token, serve
from .budgets import Budgets
from .collector import Collector
from .config import RELOADABLE, ConfigError, DaemonConfig, load_config
from .jobs import JobRow
from .users import UsersError, load_users
from .dashboard import Dashboard
from .dispatch import Dispatcher
from .executor import DaemonExecutor
from .metrics import DaemonMetrics
from .runs import RunTable
from .service import CountedCalls, ExecutorWaits, Refusals, health_servicer, registrations
from .room import disk_full, full_fix
from .statelock import StateLock
from .store import Store

log = logging.getLogger(__name__)

# gRPC handler threads: each waits on the executor thread, up to its caller's deadline (10 s
# for workers and jobs; RenewLease answers wait for the next plan): at 2,048 GPUs, ~150
# calls a second through executor stalls of seconds; 128 ran out, heartbeats went unserved.
# Calls that may wait hold at most SEATS of them at once, per kind (``service.ExecutorWaits``):
# the rest answer heartbeats however long a plan takes, and users' calls have seats of their
# own that a fleet's burst cannot take.
HANDLER_THREADS = 512
SEATS = {"fleet": 384, "client": 64}     # and 64 threads for heartbeats


def unseated(runs: RunTable) -> dict[str, Callable[[object], bool]]:
    """Per fleet method, whether a call will be answered without the executor: it takes no
    seat (``service.ExecutorWaits``): a renewal the last plan booked (``renewals``), a fresh
    run's InitJob (``launches``)."""
    return {"RenewLease": runs.renewals.answers, "InitJob": runs.launches.answers}


class ListenError(Exception):
    """An address in the config that could not be bound: one line naming its key, the
    address and why (``IN_USE`` when another process holds the port)."""


def _bound(key: str, address: str, bind):
    """``bind(address)``, a bind failure raised as a ``ListenError`` naming ``key``."""
    try:
        return bind(address)
    except (RuntimeError, OSError, SecurityError) as err:
        raise ListenError(f"{key}: cannot listen on {address}: {_why_not(address, err)}") \
            from None


def _why_not(address: str, err: BaseException) -> str:
    """Why ``address`` cannot be bound: ``IN_USE``, or the system's words (gRPC's own error
    says neither, so its address is tried once more with a plain socket)."""
    errno_ = getattr(err, "errno", None)
    if errno_ is None:
        host, _, port = address.rpartition(":")
        try:
            with socket.socket(socket.AF_INET6 if ":" in host.strip("[]") else
                               socket.AF_INET) as probe:
                probe.bind((host.strip("[]"), int(port)))
        except OSError as bind_err:
            errno_, err = bind_err.errno, bind_err
        except ValueError:
            return "not a host:port"
    if errno_ == errno.EADDRINUSE:
        return f"{IN_USE} (another process holds the port)"
    return getattr(err, "strerror", None) or str(err).splitlines()[0]


class SchedulerDaemon:
    """Start with ``start()``, stop with ``stop()``; ``port``, ``metrics_port`` and
    ``dashboard_port`` are the bound ports (useful with port 0). ``insecure``: may listen
    beyond loopback without a token (else ``SecurityError``, before anything is opened)."""

    def __init__(self, config: DaemonConfig, *, insecure: bool = False,
                 config_path: str | Path | None = None) -> None:
        """``config_path``: the file ``config`` was read from, which ``reload`` reads again
        (None: this daemon cannot reload)."""
        self.config, self.config_path = config, config_path
        self.insecure = insecure or config.insecure
        self.token = read_token(config.auth_token_file)
        self.identities = self._identities(config)
        self._exposure(config.listen)
        self.table = load_table(config.throughputs) if config.throughputs else default_table()
        policy = config.settings.policy(config.policy, config.seed)
        self.state_lock = StateLock(config.state_dir)     # (one scheduler per state_dir)
        self.store = Store(config.state_dir)
        config.checkpoints.mkdir(parents=True, exist_ok=True)
        self.metrics = DaemonMetrics(config.metrics_job_series)
        # Workers serve plain gRPC with the cluster's token unless ``workers_tls``.
        ca = config.tls.ca if config.workers_tls and config.tls is not None else None
        self.dispatcher = Dispatcher(token=self.token, ca=ca)
        self.collector = Collector(self.metrics.on_gc)     # (taken over while it runs)
        self.executor = DaemonExecutor(config, self.store, policy, self.table,
                                       self.dispatcher, self.metrics, job_env=self._job_env,
                                       collector=self.collector)
        self.metrics.watch_launches(lambda: self.executor.runs.not_launched)
        self.metrics.watch_room(self.executor.room.free_bytes)
        self.health = health_servicer()
        self.server = None
        self.port = 0
        self.metrics_port: int | None = None
        self.budgets = Budgets.made(config.job_calls_per_round, config.user_calls_per_second,
                                    config.round_seconds)
        self.dashboard = Dashboard(lambda: self.executor.snapshot, self.token,
                                   config.state_dir / "utilisation.jsonl",
                                   identities=lambda: self.identities,
                                   budget=self.budgets.users,
                                   on_limited=self.metrics.on_limited)
        self.dashboard_port: int | None = None
        self._thread: threading.Thread | None = None
        self.crashed: str | None = None     # why the core's thread stopped on an error
        self.crash_fix: str | None = None   # what the operator must do first (a full disk)

    def _identities(self, config: DaemonConfig) -> Identities:
        """Who may call under ``config``: its daemon token and the users of its users file
        (checked against its entities); ``ConfigError`` naming the file."""
        try:
            users = (None if config.users_file is None else
                     load_users(config.users_file, config.settings.entity_names or None))
            return Identities(self.token, users)
        except (UsersError, IdentityError) as err:
            raise ConfigError(f"users_file: {err}") from None

    def _job_env(self, job: JobRow) -> dict[str, str]:
        """A job's token (its processes act on it only) and its index in its array."""
        return scheduler_env(self.identities.job_token(job.id),
                             job.array_index if job.array_id else None)

    def reload(self, user: str = "SIGHUP") -> str:
        """Read the config file again and put its entities, weights, policy options, prices,
        users and budgets of calls in force (from the next round; running jobs keep
        running). Returns the one line it logs; ``ConfigError`` (one line naming the key)
        leaves all in force."""
        if self.config_path is None:
            raise ConfigError("this scheduler was not started from a config file")
        try:
            new = load_config(self.config_path, insecure=self.insecure)
            identities = self._identities(new)
            policy = new.settings.policy(self.config.policy, self.config.seed)
        except (ConfigError, PolicyError) as err:
            log.error("reload by %s refused, the settings in force stay: %s", user, err)
            raise ConfigError(str(err).splitlines()[0]) from None
        ignored = [k for k in new.changed_from(self.config) if k not in RELOADABLE]
        self.executor.call(lambda: self.executor.reload(new.settings, policy))
        self.budgets.set(new.job_calls_per_round, new.user_calls_per_second,
                         self.config.round_seconds)
        self.identities = identities
        self.config = new.with_fixed(self.config)
        users = "no users file" if new.users_file is None else \
            f"{len(identities.users or ())} users"
        line = (f"reloaded by {user}: {len(new.settings.entities)} entities, {users}, "
                f"policy options {dict(new.settings.policy_options) or 'none'}"
                + (f"; {', '.join(ignored)} change at a restart only" if ignored else ""))
        log.info("%s", line)
        return line

    def _exposure(self, listen: str) -> str | None:
        """``security.exposure`` for the scheduler: raises ``SecurityError`` beyond
        loopback without a token unless ``insecure``; else the line to log (or None)."""
        return exposure(listen, self.token, insecure=self.insecure, what="the scheduler",
                        harm="submit jobs and run commands on its workers",
                        fix="set auth_token_file: token in the config (and --token-file "
                            "token on workers and clients)")

    def start(self) -> SchedulerDaemon:
        """Bind the gRPC server, then the metrics and dashboard endpoints if configured, and
        start the core's thread. An address that cannot be bound (taken, or not this
        machine's) is a ``ListenError`` naming its key, with what was opened closed."""
        try:
            self.server, self.port = _bound("listen", self.config.listen, lambda a: serve(
                a, registrations(self.executor, self.health, self.dispatcher.read_logs,
                                 lambda: self.identities, self.reload, self.budgets),
                identities=lambda: self.identities, tls=self.config.tls,
                max_workers=HANDLER_THREADS,
                interceptors=[ExecutorWaits(SEATS, unseated(self.executor.runs),
                                            Refusals(self.metrics.on_refused)),
                              CountedCalls(self.metrics.on_call)]))
            host = host_of(self.config.listen)
            notice = self._exposure(f"{host}:{self.port}")
            if notice:
                log.warning("%s", notice)
            if host in ("", "0.0.0.0", "::"):
                host = socket.gethostname()
            self.executor.runs.scheduler_address = f"{host}:{self.port}"
            if self.config.metrics_listen:
                self.metrics_port = _bound("metrics_listen", self.config.metrics_listen,
                                           self.metrics.serve)
                log.info("metrics on http://%s:%d/metrics",
                         host_of(self.config.metrics_listen), self.metrics_port)
            if self.config.dashboard_listen:
                self.dashboard_port = _bound("dashboard_listen", self.config.dashboard_listen,
                                             self.dashboard.serve)
                log.info("dashboard on http://%s:%d/", host_of(self.config.dashboard_listen),
                         self.dashboard_port)
        except ListenError:
            self.stop(0)
            raise
        self.collector.take_over()
        self._thread = threading.Thread(target=self._run_core, name="gavelsched-core",
                                        daemon=True)
        self._thread.start()
        log.info("scheduler listening on %s (policy %s, rounds of %.0fs)",
                 self.executor.runs.scheduler_address, self.config.policy,
                 self.config.round_seconds)
        return self

    def _run_core(self) -> None:
        """The executor's loop. An error that escapes it leaves no one to plan a round or
        answer a call: it is logged with its traceback, the gRPC server stops (no call is
        answered from a picture that no longer moves), and then ``crashed`` says why
        (``gavelsched scheduler`` then exits 1; the store holds every accepted job for the
        next start). A write that found the disk full sets ``crash_fix`` (``room``)."""
        try:
            self.executor.run()
        except Exception as err:   # noqa: BLE001 - any error ends the core: say it, stop
            why = f"{type(err).__name__}: {err}"
            self.crash_fix = (full_fix(self.config.state_dir, self.config.checkpoints)
                              if disk_full(err) else None)
            log.critical("the scheduler's core stopped: %s%s", why,
                         f"; {self.crash_fix}" if self.crash_fix else "", exc_info=True)
            self.executor.stop()
            self.executor.inbox.refuse_pending()
            if self.server is not None:
                self.server.stop(0).wait()
            self.crashed = why      # last: whoever sees it finds the server already shut

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def stop(self, grace: float = 1.0) -> None:
        self.executor.stop()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self.server is not None:
            self.server.stop(grace).wait()
        self.dispatcher.close()
        self.metrics.close()
        self.dashboard.close()
        self.store.close()
        self.state_lock.release()
        self.collector.give_back()
