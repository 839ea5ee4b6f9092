"""``gavelsched scheduler --config CLUSTER.yaml``: run the scheduler daemon (thesis §5.6).

The YAML keys are listed in ``gavelsched.daemon.config``; a bad file or key exits with
code 2 naming the key. A ``listen`` beyond loopback without ``auth_token_file``, or a
``metrics_listen`` beyond loopback (``/metrics`` has no auth), exits with code 2 too, unless
``--insecure`` or the key ``insecure: true`` (then a warning; docs/design.md, Safety rules).
With ``health_listen``, the standard gRPC health service is also served there without
token or TLS, for probes that can send neither (Kubernetes' ``grpc:`` probe). The daemon
runs until SIGINT or SIGTERM; SIGHUP re-reads the file's entities, policy options, prices
and users (as ``gavelsched reload`` does; a file that does not load is logged and ignored).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from . import InputError

log = logging.getLogger(__name__)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "scheduler", help="run the scheduler daemon",
        description="Run the scheduler daemon: rounds on real time, jobs dispatched over "
                    "gRPC to worker daemons (gavelsched worker). The config YAML has "
                    "listen, policy, round_seconds, state_dir and optionally "
                    "auth_token_file, tls {cert, key, ca}, metrics_listen, throughputs, "
                    "expected_workers, checkpoint_dir, checkpoint_retention_s, ended_jobs_kept_s, "
                    "ended_jobs_stored_s, "
                    "state_dir_min_free_mb, health_listen, heartbeat_seconds, "
                    "plan_lead_seconds, resolve, min_resolve_interval_s, seed, workers_tls, "
                    "insecure, refill_freed, restart_rule, pair_partners, eta, "
                    "metrics_job_series, dashboard_listen, gil_switch_ms, "
                    "job_calls_per_round, user_calls_per_second, entities, "
                    "policy_options, prices and users_file (docs/runtime.md). SIGHUP "
                    "re-reads entities, policy_options, prices, users_file and the two "
                    "budgets of calls.")
    p.add_argument("--config", required=True, metavar="CLUSTER.yaml",
                   help="the cluster YAML file")
    p.add_argument("--insecure", action="store_true",
                   help="allow a listen address beyond loopback without auth_token_file: "
                        "anyone who can reach the scheduler can submit jobs and run "
                        "commands on its workers (warns at start), and a metrics_listen "
                        "beyond loopback (/metrics has no auth); the config key "
                        "'insecure: true' does the same. Make a token with: "
                        "(umask 077; head -c 32 /dev/urandom | base64 > token)")
    p.set_defaults(func=run, log_level=logging.INFO)   # a daemon: its main events


def run(args: argparse.Namespace) -> int:
    from ..daemon.config import ConfigError, load_config
    from ..daemon.server import ListenError, SchedulerDaemon
    from ..daemon.statelock import StateInUse
    from ..daemon.store import StoreError
    from ..rpc.limits import connection_cap, raise_open_files
    from ..rpc.security import SecurityError

    files = raise_open_files()      # (a connection from every job process: thousands)
    try:
        config = load_config(args.config, insecure=args.insecure)
        # this process serves the daemon's threads: its GIL changes hands more often
        sys.setswitchinterval(config.gil_switch_ms / 1000.0)
        daemon = SchedulerDaemon(config, insecure=config.insecure,
                                 config_path=args.config).start()
    except (ConfigError, SecurityError, ListenError, StateInUse, StoreError) as err:
        raise InputError(str(err)) from None
    log.info("%d open files: at most %d connections are taken", files, connection_cap(files))
    if config.metrics_exposed:
        log.warning("insecure: /metrics on %s has no auth: anyone who can reach it can read "
                    "the cluster's jobs and workers", config.metrics_listen)
    health = None
    if config.health_listen:
        try:
            health = serve_health(daemon, config.health_listen)
        except (SecurityError, RuntimeError) as err:   # RuntimeError: grpc could not bind
            daemon.stop()
            raise InputError(f"health_listen: {err}") from None
    done, hangup = threading.Event(), threading.Event()

    def stop(signum, frame) -> None:
        done.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGHUP, lambda signum, frame: hangup.set())
    print(f"scheduler listening on port {daemon.port}", flush=True)
    # Wake up now and then: a signal the kernel hands to one of gRPC's threads only sets
    # Python's flag, and a main thread blocked in an untimed wait would never run the
    # handler (a SIGTERM'd scheduler then lived on: seen in the test suite).
    while not done.wait(0.5) and daemon.crashed is None:
        if hangup.is_set():
            hangup.clear()
            try:
                daemon.reload("SIGHUP")
            except ConfigError:
                pass                  # (logged: the settings in force stay)
    if health is not None:
        health.stop(0)
    daemon.stop()
    if daemon.crashed is not None:
        then = f"{daemon.crash_fix}, then start it again" if daemon.crash_fix else "start it again"
        print(f"gavelsched scheduler: its core stopped ({daemon.crashed}); the jobs are "
              f"in its state_dir: {then}", file=sys.stderr)
        return 1
    return 0


def serve_health(daemon, address: str):
    """The daemon's health service alone on ``address``, plain gRPC without a token: it
    tells only whether the scheduler serves. Returns the started server."""
    from grpc_health.v1 import health_pb2_grpc

    from ..rpc.security import serve

    server, port = serve(address, [
        lambda s: health_pb2_grpc.add_HealthServicer_to_server(daemon.health, s)], max_workers=2)
    log.info("health service (no auth) on %s:%d", address.rpartition(":")[0], port)
    return server
