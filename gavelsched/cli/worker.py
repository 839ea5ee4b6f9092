"""``gavelsched worker``: run a worker daemon on a GPU server (thesis §5.6), or emulate a GPU
type on a CPU-only machine (docs/runtime.md, "Emulation").

With ``--profile`` it first measures this machine's throughputs (``gavelsched profile``, in
a subprocess: the worker daemon never imports torch) and sends them at registration, so
that the scheduler has priors for a type its table lacks (thesis §5.3.3; docs/runtime.md,
"Profiling a new GPU type"); ``--profile-file`` sends one measured earlier.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from pathlib import Path

from workers.daemon.logfiles import LOG_RETENTION_S
from workers.daemon.room import MIN_FREE_MB

from . import InputError

# Hollow workers in one process: each serves on its own port with its own threads (256 of
# them drive 2,048 GPUs in BENCHMARKS.md); far more would exhaust the process first.
MAX_HOLLOW = 4096
MAX_MIN_FREE_MB = 1 << 30   # (a PiB)

log = logging.getLogger(__name__)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "worker", formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        help="run a worker daemon: register GPUs with a scheduler and run its jobs",
        description="Register this server's GPUs of one type with a gavelsched scheduler, "
                    "send heartbeats, and launch the jobs the scheduler places here (one "
                    "process per GPU, killed when they outlive their lease). On a machine "
                    "without NVIDIA GPUs the named type is emulated: each job's steps are "
                    "paced to that type's speed from the throughput table, times "
                    "--emulation-speed.")
    p.add_argument("--scheduler", required=True, metavar="HOST:PORT",
                   help="the scheduler's address")
    p.add_argument("--type", required=True, dest="worker_type", metavar="TYPE",
                   help="this server's GPU type, e.g. v100, p100, k80 (with --hollow, a "
                        "comma list such as k80,p100,v100 deals the workers to the types "
                        "in turn)")
    p.add_argument("--gpus", required=True, type=int, metavar="N",
                   help="GPUs on this server (with --hollow: on each hollow worker)")
    p.add_argument("--hollow", type=int, metavar="N", default=0,
                   help="for testing the scheduler's control plane at scale (kubemark-"
                        "style): run N hollow worker daemons in this one process. Each is "
                        "the real worker (registers, heartbeats, takes RunJob and KillJob, "
                        "enforces tokens, leases and fencing) serving on its own port of "
                        "--listen's host, with its work directory WORK_DIR/hollow-I; only "
                        "its jobs are emulated: each rank is a thread stepping the real "
                        "GavelIterator at the type's emulated rate (always paced; no job "
                        "process, no torch, no GPU). Jobs' own commands and workloads are "
                        "not run. Per-job log lines are left out (warnings only)")
    p.add_argument("--token-file", metavar="F",
                   help="file holding the cluster's auth token (the scheduler's "
                        "auth_token_file); required to listen beyond loopback. Make one "
                        "with: (umask 077; head -c 32 /dev/urandom | base64 > token)")
    p.add_argument("--insecure", action="store_true",
                   help="allow listening beyond loopback without --token-file: anyone who "
                        "can reach this worker can run commands on it (warns at start)")
    p.add_argument("--tls-ca", metavar="F", help="CA certificate that signed the scheduler's")
    p.add_argument("--tls-cert", metavar="F", help="this worker's own server certificate")
    p.add_argument("--tls-key", metavar="F", help="the key of --tls-cert")
    p.add_argument("--work-dir", default="gavel-worker", metavar="D",
                   help="job logs and (without shared storage) checkpoints")
    p.add_argument("--min-free-mb", type=_min_free, default=MIN_FREE_MB, metavar="MB",
                   help="below this much free on the disk of --work-dir, the worker takes no "
                        "new run: the scheduler drains it until space is freed, and its runs "
                        "go on (0: no reserve)")
    p.add_argument("--log-retention-s", type=_seconds, default=LOG_RETENTION_S, metavar="S",
                   help="the output of a job no process of which runs here is removed once "
                        "it was last written this long ago (0: kept for ever)")
    p.add_argument("--listen", default="127.0.0.1:0", metavar="HOST:PORT",
                   help="address of this worker's service (port 0: any free port), told to "
                        "the scheduler (with 0.0.0.0: this machine's hostname). The default "
                        "is loopback only: a scheduler on another host needs e.g. --listen "
                        "0.0.0.0:50061 and --token-file")
    p.add_argument("--throughputs", metavar="PATH",
                   help="throughput table for emulation (default: the built-in catalog)")
    p.add_argument("--emulation-speed", type=float, default=1.0, metavar="X",
                   help="time dilation of emulated speeds: each job runs at X times its "
                        "table steps/s")
    p.add_argument("--emulate", choices=("auto", "on", "off"), default="auto",
                   help="emulate the GPU type (auto: when the machine has no NVIDIA GPU)")
    p.add_argument("--grace", type=float, default=30.0, metavar="S",
                   help="seconds a job may outlive its lease (to save its checkpoint) "
                        "before it is killed")
    p.add_argument("--stop-timeout", type=float, default=argparse.SUPPRESS, metavar="S",
                   help="on SIGTERM or SIGINT the worker drains itself (the scheduler plans "
                        "nothing new on it) and waits for its jobs to end with their leases "
                        "and checkpoint, at most S seconds (default: two rounds plus "
                        "--grace), then kills what is left; a second signal stops it at once")
    p.add_argument("--profile", action="store_true",
                   help="before registering, measure this machine's steps/s for the "
                        "catalog's job types (gavelsched profile) and send them to the "
                        "scheduler: its priors for a type its table lacks. Kept in "
                        "WORK_DIR/profile-TYPE.json and reused at the next start (delete it "
                        "to measure again)")
    p.add_argument("--profile-reduced", action="store_true",
                   help="with --profile: a reduced measurement (gavelsched profile "
                        "--reduced: CPU machines, tests)")
    p.add_argument("--profile-file", metavar="F",
                   help="send this profile, made earlier by gavelsched profile --type TYPE "
                        "-o F, instead of measuring")
    p.set_defaults(func=run, log_level=logging.INFO)   # a daemon: its main events
    p.error = lambda message: p.exit(2, f"gavelsched worker: error: {message}\n")


def _min_free(value: str) -> int:
    """``--min-free-mb``: a whole number of MiB, 0 or more."""
    if not value.isdigit() or int(value) > MAX_MIN_FREE_MB:
        raise argparse.ArgumentTypeError(f"expected a whole number of MiB from 0 to "
                                         f"{MAX_MIN_FREE_MB}, got {value!r}")
    return int(value)


def _seconds(value: str) -> float:
    """A number of seconds, 0 or more (finite)."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0.0 <= seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {value!r}")
    return seconds


def _address(value: str, flag: str) -> str:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise InputError(f"{flag} {value!r}: expected HOST:PORT")
    return value


def _absolute(path: str | None) -> str | None:
    """A path flag made absolute against the working directory, once, as it is read
    (docs/design.md, Safety rules)."""
    return os.path.abspath(path) if path else None


def _profile(args: argparse.Namespace):
    """The profile this worker sends (``--profile-file``'s, or ``--profile``'s), or None."""
    from workers.daemon import selfprofile

    if args.profile_file:
        try:
            return selfprofile.from_file(args.profile_file, args.worker_type)
        except selfprofile.ProfileMismatch as err:
            raise InputError(f"--profile-file {err}") from None
    if args.profile:
        return selfprofile.measured(Path(args.work_dir), args.worker_type, args.profile_reduced)
    return None


def _hollow_types(args: argparse.Namespace) -> list[str]:
    """The type of each hollow worker: ``--type``'s list dealt in turn."""
    types = [t.strip() for t in args.worker_type.split(",")]
    if not all(types):
        raise InputError(f"--type {args.worker_type!r}: an empty type in the list")
    if not 0 <= args.hollow <= MAX_HOLLOW:
        raise InputError(f"--hollow must be between 0 (none) and {MAX_HOLLOW}, got "
                         f"{args.hollow}")
    if len(types) > 1 and not args.hollow:
        raise InputError(f"--type {args.worker_type!r}: a list of types needs --hollow")
    if args.hollow and (args.profile or args.profile_file):
        raise InputError("--hollow workers send no profile: leave out --profile and "
                         "--profile-file")
    if args.hollow and not args.listen.endswith(":0"):
        raise InputError(f"--listen {args.listen}: hollow workers take a free port each; "
                         "give port 0 (e.g. 127.0.0.1:0)")
    if args.hollow and args.emulate == "off":
        raise InputError("--hollow workers always emulate their type: leave out "
                         "--emulate off")
    return [types[i % len(types)] for i in range(max(1, args.hollow))]


def run(args: argparse.Namespace) -> int:
    from gavelsched.rpc.limits import raise_open_files
    from gavelsched.rpc.security import SecurityError, TlsFiles, read_token
    from traces.checks import MAX_GPUS_PER_SERVER, MAX_SECONDS
    from traces.errors import TraceError
    from workers.daemon.emulation import EmulationError, load_emulation, machine_has_gpus
    from workers.daemon.worker import Worker, WorkerConfig, WorkerError

    for name in ("token_file", "tls_ca", "tls_cert", "tls_key", "throughputs", "work_dir",
                 "profile_file"):
        setattr(args, name, _absolute(getattr(args, name)))
    _address(args.scheduler, "--scheduler")
    _address(args.listen, "--listen")
    if not 0 < args.gpus <= MAX_GPUS_PER_SERVER:
        raise InputError(f"--gpus must be between 1 and {MAX_GPUS_PER_SERVER}, got {args.gpus}")
    if not 0 <= args.grace <= MAX_SECONDS:
        raise InputError(f"--grace must be in [0, {MAX_SECONDS:g}] seconds, got {args.grace}")
    stop_timeout = getattr(args, "stop_timeout", None)    # None: two rounds plus --grace
    if stop_timeout is not None and not stop_timeout >= 0:
        raise InputError(f"--stop-timeout must be >= 0 seconds, got {stop_timeout}")
    if not args.worker_type.strip():
        raise InputError("--type is empty")
    if bool(args.tls_cert) != bool(args.tls_key):
        raise InputError("--tls-cert and --tls-key go together")
    if args.profile and args.profile_file:
        raise InputError("--profile measures, --profile-file reads one: give one of them")
    if args.profile_reduced and not args.profile:
        raise InputError("--profile-reduced goes with --profile")
    types = _hollow_types(args)
    raise_open_files()      # (its jobs' log files, its channels: hollow ones by the hundred)
    try:
        Path(args.work_dir).mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"--work-dir {args.work_dir}: cannot be this worker's folder "
                         f"({err.strerror})") from None
    emulate = args.hollow or args.emulate == "on" or (args.emulate == "auto"
                                                      and not machine_has_gpus())
    try:
        token = read_token(args.token_file)
        for flag, path in (("--tls-ca", args.tls_ca), ("--tls-cert", args.tls_cert),
                           ("--tls-key", args.tls_key)):
            if path and not Path(path).is_file():
                raise InputError(f"{flag} {path}: no such file")
        profile = _profile(args)
        emulations = {t: load_emulation(t, args.throughputs, args.emulation_speed, profile)
                      for t in dict.fromkeys(types)} if emulate else {}
    except (SecurityError, EmulationError, TraceError) as err:
        raise InputError(str(err)) from None
    tls = TlsFiles(cert=Path(args.tls_cert), key=Path(args.tls_key)) if args.tls_cert else None
    configs = [WorkerConfig(
        scheduler=args.scheduler, worker_type=t, gpus=args.gpus,
        work_dir=Path(args.work_dir) / f"hollow-{i}" if args.hollow else Path(args.work_dir),
        listen=args.listen, token=token, token_file=args.token_file, tls_ca=args.tls_ca,
        tls=tls, emulation=emulations.get(t), grace_s=args.grace, insecure=args.insecure,
        profile=profile, min_free_mb=args.min_free_mb, log_retention_s=args.log_retention_s)
        for i, t in enumerate(types)]
    if args.hollow:
        return _run_hollow(configs, stop_timeout)
    worker = Worker(configs[0])
    signals = []

    def stopping(signum, _frame) -> None:
        """The first signal drains the worker (``Worker.leave``); the next stops it now."""
        signals.append(signum)
        if len(signals) == 1:
            threading.Thread(target=worker.leave, args=(stop_timeout,),
                             name="worker-leave", daemon=True).start()
        else:
            worker.stop("worker received a second signal")

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stopping)
    try:
        worker.start()
    except WorkerError as err:
        raise InputError(str(err)) from None
    log.info("worker %d (%s x%d%s) serving on %s", worker.server_id, args.worker_type,
             args.gpus, ", emulated" if configs[0].emulation else "", worker.address)
    while not worker.wait(0.5):
        pass
    return 0


def _run_hollow(configs, stop_timeout: float | None) -> int:
    """``--hollow N``: start the hollow workers, serve until a signal (the first drains them
    all, as ``Worker.leave``; the next stops them at once) or until every one has stopped."""
    from workers.hollow import leave_fleet, start_fleet, stop_fleet
    from workers.daemon.worker import WorkerError

    for name in ("gavelsched.iterator", "workers.daemon.launcher"):
        logging.getLogger(name).setLevel(logging.WARNING)     # a line per job and lease
    signals: list[int] = []
    leaving = threading.Event()

    def stopping(signum, _frame) -> None:
        signals.append(signum)
        leaving.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stopping)
    try:
        fleet = start_fleet(configs)
    except WorkerError as err:
        raise InputError(str(err)) from None
    gpus = sum(c.gpus for c in configs)
    log.info("%d hollow workers (%d GPUs: %s) serving", len(fleet), gpus, ", ".join(
        f"{t} x{sum(c.worker_type == t for c in configs)}"
        for t in dict.fromkeys(c.worker_type for c in configs)))
    while not leaving.wait(0.5):
        if all(w.wait(0) for w in fleet):
            return 0
    drain = threading.Thread(target=leave_fleet, args=(fleet, stop_timeout), daemon=True)
    drain.start()
    while drain.is_alive() and len(signals) < 2:
        drain.join(0.5)
    if drain.is_alive():
        stop_fleet(fleet, "hollow workers received a second signal")
    return 0
