"""``SchedulerDaemon``: a config in, a running scheduler out (thesis §5.6). It opens the
store, builds the policy and the core inside a ``DaemonExecutor``, serves the gRPC services
(token and TLS through ``gavelsched.rpc.security.serve``), the Prometheus endpoint and the
web dashboard (``dashboard``), and runs the executor on its own thread. It refuses to listen beyond loopback without
``auth_token_file`` unless made with ``insecure=True`` (``gavelsched scheduler
--insecure``; docs/design.md, Safety rules)."""

from __future__ import annotations

import logging
import socket
import threading

from policies import get_policy, policy_options
from traces import default_table, load_table

from ..rpc.security import exposure, host_of, read_token, serve
from .config import DaemonConfig
from .dashboard import Dashboard
from .dispatch import Dispatcher
from .executor import DaemonExecutor
from .metrics import DaemonMetrics
from .service import health_servicer, registrations
from .store import Store

log = logging.getLogger(__name__)

# gRPC handler threads: RenewLease answers wait for the next plan, one per running job.
HANDLER_THREADS = 128


class SchedulerDaemon:
    """Start with ``start()``, stop with ``stop()``; ``port``, ``metrics_port`` and
    ``dashboard_port`` are the bound ports (useful with port 0). ``insecure``: may listen beyond loopback without a
    token (else ``SecurityError``, before anything is opened)."""

    def __init__(self, config: DaemonConfig, *, insecure: bool = False) -> None:
        self.config = config
        self.insecure = insecure or config.insecure
        self.token = read_token(config.auth_token_file)
        self._exposure(config.listen)
        self.table = load_table(config.throughputs) if config.throughputs else default_table()
        seeded = "seed" in policy_options(config.policy)
        policy = get_policy(config.policy, **({"seed": config.seed} if seeded else {}))
        self.store = Store(config.state_dir)
        config.checkpoints.mkdir(parents=True, exist_ok=True)
        self.metrics = DaemonMetrics()
        # Workers serve plain gRPC with the cluster's token unless ``workers_tls``.
        ca = config.tls.ca if config.workers_tls and config.tls is not None else None
        self.dispatcher = Dispatcher(token=self.token, ca=ca)
        self.executor = DaemonExecutor(config, self.store, policy, self.table,
                                       self.dispatcher, self.metrics)
        self.health = health_servicer()
        self.server = None
        self.port = 0
        self.metrics_port: int | None = None
        self.dashboard = Dashboard(lambda: self.executor.snapshot, self.token,
                                   config.state_dir / "utilisation.jsonl")
        self.dashboard_port: int | None = None
        self._thread: threading.Thread | None = None

    def _exposure(self, listen: str) -> str | None:
        """``security.exposure`` for the scheduler: raises ``SecurityError`` beyond
        loopback without a token unless ``insecure``; else the line to log (or None)."""
        return exposure(listen, self.token, insecure=self.insecure, what="the scheduler",
                        harm="submit jobs and run commands on its workers",
                        fix="set auth_token_file: token in the config (and --token-file "
                            "token on workers and clients)")

    def start(self) -> SchedulerDaemon:
        self.server, self.port = serve(self.config.listen,
                                       registrations(self.executor, self.health,
                                                     self.dispatcher.read_logs),
                                       token=self.token, tls=self.config.tls,
                                       max_workers=HANDLER_THREADS)
        host = host_of(self.config.listen)
        notice = self._exposure(f"{host}:{self.port}")
        if notice:
            log.warning("%s", notice)
        if host in ("", "0.0.0.0", "::"):
            host = socket.gethostname()
        self.executor.runs.scheduler_address = f"{host}:{self.port}"
        if self.config.metrics_listen:
            self.metrics_port = self.metrics.serve(self.config.metrics_listen)
        if self.config.dashboard_listen:
            self.dashboard_port = self.dashboard.serve(self.config.dashboard_listen)
            log.info("dashboard on http://%s:%d/", host_of(self.config.dashboard_listen),
                     self.dashboard_port)
        self._thread = threading.Thread(target=self.executor.run, name="gavelsched-core",
                                        daemon=True)
        self._thread.start()
        log.info("scheduler listening on %s (policy %s, rounds of %.0fs)",
                 self.executor.runs.scheduler_address, self.config.policy,
                 self.config.round_seconds)
        return self

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
