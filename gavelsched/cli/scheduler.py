"""``gavelsched scheduler --config CLUSTER.yaml``: run the scheduler daemon (thesis §5.6).

The YAML keys are listed in ``gavelsched.daemon.config``; a bad file or key exits with
code 2 naming the key. A ``listen`` beyond loopback without ``auth_token_file`` exits with
code 2 too, unless ``--insecure`` (then a warning). The daemon runs until SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import threading

from . import InputError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "scheduler", help="run the scheduler daemon",
        description="Run the scheduler daemon: rounds on real time, jobs dispatched over "
                    "gRPC to worker daemons (gavelsched worker). The config YAML has "
                    "listen, policy, round_seconds, state_dir and optionally "
                    "auth_token_file, tls {cert, key, ca}, metrics_listen, throughputs, "
                    "expected_workers, checkpoint_dir, heartbeat_seconds, plan_lead_seconds, "
                    "min_resolve_interval_s, seed (docs/runtime.md).")
    p.add_argument("--config", required=True, metavar="CLUSTER.yaml",
                   help="the cluster YAML file")
    p.add_argument("--insecure", action="store_true",
                   help="allow a listen address beyond loopback without auth_token_file: "
                        "anyone who can reach the scheduler can submit jobs and run "
                        "commands on its workers (warns at start). Make a token with: "
                        "(umask 077; head -c 32 /dev/urandom | base64 > token)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..daemon.config import ConfigError, load_config
    from ..daemon.server import SchedulerDaemon
    from ..rpc.security import SecurityError

    try:
        config = load_config(args.config)
        daemon = SchedulerDaemon(config, insecure=args.insecure).start()
    except (ConfigError, SecurityError) as err:
        raise InputError(str(err)) from None
    done = threading.Event()

    def stop(signum, frame) -> None:
        done.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"scheduler listening on port {daemon.port}", flush=True)
    done.wait()
    daemon.stop()
    return 0
