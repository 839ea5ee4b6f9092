"""The scheduler's clients: ``submit JOB.yaml``, ``status``, ``history``, ``cancel ID``,
``drain ID`` (a worker server out of service for maintenance, and back with ``--undo``;
docs/runtime.md, "Draining a worker") and ``logs``, in its own module.

``status`` shows the jobs not finished (``--all``: every job), as Slurm's ``squeue`` does;
``history`` every job with its times, as ``sacct`` does (``jobviews``). Both filter with
``--state S[,S]``, ``--type T`` and ``--entity E`` (the scheduler filters) and print
``--json``.

All take ``--scheduler HOST:PORT`` (default ``$GAVEL_SCHEDULER`` or 127.0.0.1:50051),
``--token-file F`` and ``--tls-ca F``. A refused token, an unreachable scheduler and a
refused submission each end with one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from ..jobenv import SCHEDULER_VAR
from . import InputError
from .jobviews import history_table, status_dict, status_table

JOB_KEYS = ("workload", "command", "job_type", "scale_factor", "total_steps",
            "priority_weight", "slo_s", "entity", "mixed", "min_scale_factor")
DEFAULT_SCHEDULER = "127.0.0.1:50051"
TIMEOUT_S = 30.0
DRAIN_POLL_S = 1.0      # drain --wait: how often it asks whether jobs still run there
STATES_HELP = "queued, running, preempted, done, failed, cancelled"


def connection_flags() -> argparse.ArgumentParser:
    """The flags every client takes (a parent parser)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--scheduler", metavar="HOST:PORT",
                        default=os.environ.get(SCHEDULER_VAR, DEFAULT_SCHEDULER),
                        help="the scheduler's address (default: $GAVEL_SCHEDULER or "
                             f"{DEFAULT_SCHEDULER})")
    common.add_argument("--token-file", metavar="F", help="file holding the cluster's token")
    common.add_argument("--tls-ca", metavar="F", help="CA certificate to verify the "
                                                      "scheduler's TLS certificate")
    return common


def register(subparsers) -> None:
    common = connection_flags()
    p = subparsers.add_parser("submit", parents=[common], help="submit a job",
                              description="Submit a job; prints its id. JOB.yaml keys: "
                                          "job_type, total_steps, scale_factor (default 1), "
                                          "workload or command (neither: the job type's "
                                          "reference workload), priority_weight, slo_s, "
                                          "entity, mixed (true: the job may run on "
                                          "several GPU types at once, split with virtual "
                                          "nodes, under a *_mixed policy), "
                                          "min_scale_factor (an elastic job: it may also "
                                          "run on fewer GPUs of one type, down to this "
                                          "many, under a *_mixed policy).")
    p.add_argument("job", metavar="JOB.yaml")
    p.set_defaults(func=submit)
    filters = argparse.ArgumentParser(add_help=False)
    filters.add_argument("--state", metavar="S[,S...]", action="append", default=[],
                         help=f"only jobs in these states ({STATES_HELP})")
    filters.add_argument("--type", metavar="JOB_TYPE", default="",
                         help="only jobs of this job type (ResNet-50: all its batch sizes)")
    filters.add_argument("--entity", metavar="E", default="", help="only jobs of this entity")
    filters.add_argument("--json", action="store_true",
                         help="print JSON (docs/design.md contract, plus times and shares)")
    p = subparsers.add_parser("status", parents=[common, filters],
                              help="show the jobs not finished, and the workers",
                              description="A table of the jobs not finished (type, state, "
                                          "progress, GPUs, worker type, time since the first "
                                          "start, allocation vs received share, why it "
                                          "waits) and the workers; --all or --state "
                                          "show finished jobs too.")
    p.add_argument("--all", action="store_true", help="finished jobs too")
    p.add_argument("--eta", action="store_true",
                   help="also each unfinished job's predicted start and finish: the live "
                        "state replayed in the simulator here, in this process")
    p.set_defaults(func=status)
    p = subparsers.add_parser("predict", parents=[common],
                              help="if I submit this job now, when does it finish?",
                              description="Replay the scheduler's live state in the "
                                          "simulator with JOB.yaml added (arriving now, "
                                          "the catalog's throughputs), without submitting "
                                          "it: its predicted start and finish, and how "
                                          "much later (or earlier) each other job "
                                          "finishes.")
    p.add_argument("job", metavar="JOB.yaml")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=predict)
    p = subparsers.add_parser("history", parents=[common, filters],
                              help="show every job with its times",
                              description="A table of every job, finished ones included: "
                                          "entity, state, when it was submitted, first "
                                          "started and ended, elapsed time (first start "
                                          "to end, or now), JCT (submission to completion) "
                                          "and steps.")
    p.set_defaults(func=history)
    p = subparsers.add_parser("cancel", parents=[common], help="cancel a job",
                              description="Cancel a queued or running job.")
    p.add_argument("id", help="the job id")
    p.set_defaults(func=cancel)
    p = subparsers.add_parser(
        "drain", parents=[common], help="take a worker server out of service, or put it back",
        description="Take a worker server (its id in `gavelsched status`) out of service for "
                    "maintenance: nothing new is planned on it from the next round's plan, "
                    "and the jobs on it go on to the end of their leases, checkpoint there "
                    "as at any round's end and resume elsewhere. Stop the worker once it is "
                    "drained (no job runs on it; --wait waits for that). It stays out of "
                    "service when it registers again and across scheduler restarts, until "
                    "--undo.")
    p.add_argument("id", type=int, help="the worker server's id")
    p.add_argument("--undo", action="store_true", help="put the server back in service")
    p.add_argument("--wait", action="store_true",
                   help="wait until no job runs on it (at most --timeout seconds)")
    p.add_argument("--timeout", type=float, default=600.0, metavar="S",
                   help="how long --wait waits (exit 1 if jobs still run on it then)")
    p.set_defaults(func=drain)


def stub(args: argparse.Namespace):
    """A ``ClientToScheduler`` stub on a channel with the flags' token and CA."""
    from ..rpc import pb_grpc
    from ..rpc.security import SecurityError, channel, read_token
    try:
        token = read_token(args.token_file)
        chan = channel(args.scheduler, token=token, ca=args.tls_ca)
    except SecurityError as err:
        raise InputError(str(err)) from None
    return pb_grpc.ClientToSchedulerStub(chan)


def _call(args: argparse.Namespace, method: str, request):
    import grpc
    try:
        return getattr(stub(args), method)(request, timeout=TIMEOUT_S)
    except grpc.RpcError as err:
        raise InputError(rpc_error_line(args.scheduler, err)) from None


def rpc_error_line(address: str, err) -> str:
    """One line for a failed call: refused token, unreachable scheduler, bad request."""
    import grpc

    from ..rpc.codes import UNREACHED
    code, details = err.code(), (err.details() or "").splitlines()[0:1]
    details = details[0] if details else ""
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return (f"the scheduler at {address} refused the call: UNAUTHENTICATED (missing or "
                f"wrong --token-file)")
    if code in UNREACHED:
        return f"cannot reach the scheduler at {address} ({code.name})"
    return f"{code.name}: {details}"


def read_job(path: str | Path):
    """A ``JobRequest`` from a job YAML file (keys ``JOB_KEYS``), every field checked here,
    at the door (``job_fields``): a bad file raises ``InputError``, one line naming it."""
    import yaml

    from traces.checks import BadValue, NotUtf8, shown, utf8

    from ..rpc import pb
    try:
        raw = Path(path).read_bytes()
    except OSError as err:
        raise InputError(f"{path}: {err.strerror}") from None
    try:
        data = yaml.safe_load(utf8(raw))
    except NotUtf8 as err:
        raise InputError(f"{path}: not UTF-8 text at {err}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise InputError(f"{path}: bad YAML{where}") from None
    except RecursionError:
        raise InputError(f"{path}: bad YAML: nested too deeply") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of job keys")
    try:
        return pb.JobRequest(**job_fields(data))
    except BadValue as err:
        if not err.show:
            raise InputError(f"{path}: {err.need}") from None
        raise InputError(f"{path}: {err.field} has a bad value {shown(err.value)} "
                         f"({err.need})") from None


def job_fields(data: dict) -> dict:
    """The ``JobRequest`` fields of a parsed job YAML mapping (docs/design.md, Safety rules: every
    field checked once, at the door). A key left out or null takes its default; an explicit
    value must be good: ``scale_factor: 0`` is refused, not read as 1 (in the request 0
    means unset, as proto3 has it). Raises ``BadValue`` naming the first bad field."""
    from traces import checks
    from traces.checks import BadValue, shown
    from traces.workloads import UnknownWorkload, check_workload

    for key in data:
        if key not in JOB_KEYS:
            raise BadValue(shown(key), f"unknown key {shown(key)}; known: "
                                       f"{', '.join(JOB_KEYS)}", show=False)
    for key in ("job_type", "total_steps"):
        if data.get(key) is None:
            raise BadValue(key, f"missing key {key!r}", show=False)
    value = {k: v for k, v in data.items() if v is not None}
    sf = checks.integer(value.get("scale_factor", 1), "scale_factor", low=1,
                        high=checks.INT32_MAX)
    out = {"job_type": checks.text(value["job_type"], "job_type", empty=False),
           "total_steps": checks.integer(value["total_steps"], "total_steps", low=1),
           "scale_factor": sf}
    if "priority_weight" in value:
        out["priority_weight"] = checks.number(
            value["priority_weight"], "priority_weight", low=checks.PRIORITY_WEIGHT_MIN,
            high=checks.PRIORITY_WEIGHT_MAX)
    if "slo_s" in value:
        if not checks.number(value["slo_s"], "slo_s") > 0:
            raise BadValue("slo_s", "must be > 0 (or null: none)", value["slo_s"])
        out["slo_s"] = float(value["slo_s"])
    for key in ("entity", "workload", "command"):
        if key in value:
            out[key] = checks.text(value[key], key, one_line=key != "command")
    if out.get("workload"):
        try:
            check_workload(out["workload"])
        except UnknownWorkload as err:
            raise BadValue("workload", f"workload: {err}", show=False) from None
    if "mixed" in value:
        if not isinstance(value["mixed"], bool):
            raise BadValue("mixed", "must be true or false", value["mixed"])
        out["mixed"] = value["mixed"]
    if "min_scale_factor" in value:
        out["min_scale_factor"] = checks.integer(value["min_scale_factor"],
                                                 "min_scale_factor", low=1, high=sf)
    return out


def submit(args: argparse.Namespace) -> int:
    reply = _call(args, "Submit", read_job(args.job))
    print(reply.job_id)
    return 0


def cancel(args: argparse.Namespace) -> int:
    from ..rpc import pb
    ack = _call(args, "Cancel", pb.CancelRequest(job_id=args.id))
    if not ack.ok:
        raise InputError(ack.message)
    print(f"cancelled {args.id}")
    return 0


def drain(args: argparse.Namespace) -> int:
    from ..rpc import pb
    if not 0 <= args.id < 2**63:
        raise InputError(f"id: a worker server's id is a non-negative integer, got {args.id}")
    if args.wait and not args.timeout > 0:
        raise InputError(f"--timeout: must be > 0 seconds, got {args.timeout}")
    reply = _call(args, "Drain", pb.DrainRequest(server_id=args.id, undo=args.undo))
    print(reply.message, flush=True)
    if not (args.wait and reply.drained and reply.runs):
        return 0
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        time.sleep(DRAIN_POLL_S)
        # (the workers come with every answer; asking only for done jobs keeps it short)
        answer = _call(args, "Status", pb.StatusRequest(states=["done"]))
        server = next((w for w in answer.workers if w.id == str(args.id)), None)
        if server is None or not server.drained:
            print(f"worker {args.id} is no longer drained (put back by someone else?)",
                  file=sys.stderr)
            return 1
        if server.runs == 0:
            print(f"worker {args.id} is drained: no job runs on it")
            return 0
    print(f"worker {args.id} still has jobs running after {args.timeout:g} s", file=sys.stderr)
    return 1


def _jobs(args: argparse.Namespace, *, active: bool):
    """The scheduler's ``Status``, filtered by the flags (``active``: only jobs not
    finished, unless states are named)."""
    from ..rpc import pb
    states = [s.strip() for flag in args.state for s in flag.split(",") if s.strip()]
    return _call(args, "Status", pb.StatusRequest(
        states=states, job_type=args.type, entity=args.entity, active=active and not states))


def _show(args: argparse.Namespace, reply, table) -> int:
    if args.json:   # (dumps: the C encoder; dump would encode in Python)
        print(json.dumps(status_dict(reply)))
    else:
        print("\n".join(table(reply)))
    return 0


def status(args: argparse.Namespace) -> int:
    reply = _jobs(args, active=not args.all)
    if not args.eta:
        return _show(args, reply, status_table)
    from . import eta
    from ..rpc import pb
    # The replay needs every unfinished job, whatever the filters show.
    everything = reply if not (args.state or args.type or args.entity) else \
        _call(args, "Status", pb.StatusRequest(active=True))
    state = eta.state_of(everything)
    etas, why = _replay(lambda: eta.replay(state))
    if args.json:
        out = status_dict(reply)
        predicted = eta.eta_dict(state, etas)
        for job in out["jobs"]:
            job["eta"] = predicted.get(job["id"])
        print(json.dumps(out))
        return 0
    lines = status_table(reply)
    lines.extend([f"predicted: unavailable ({why})"] if why else eta.eta_lines(state, etas))
    print("\n".join(lines))
    return 0


def _replay(run):
    """(ETAs, None), or ({}, why) when the live state cannot be replayed."""
    from simulator import SimulationError
    try:
        return run(), None
    except (SimulationError, ValueError) as err:
        return {}, str(err).splitlines()[0] if str(err) else type(err).__name__


def predict(args: argparse.Namespace) -> int:
    """``predict JOB.yaml``: the job's predicted start and finish if submitted now, and
    the change in every other job's finish; submits nothing."""
    from . import eta
    from ..rpc import pb
    request = read_job(args.job)
    state = eta.state_of(_call(args, "Status", pb.StatusRequest(active=True)))
    if not state.workers:
        raise InputError("the scheduler has no alive workers: nothing to predict on")
    new = eta.hypothetical(request, state)
    if not any(r > 0 for r in new.steps_per_s.values()):
        raise InputError(f"{args.job}: job type {request.job_type!r} has no throughput in "
                         f"the catalog on the cluster's types {sorted(state.workers)}")
    got, why = _replay(lambda: eta.predict(state, new))
    if why:
        raise InputError(f"cannot replay the scheduler's state: {why}")
    before, after = got
    mine = after[eta.NEW_ID]
    delays = {j.id: (None if after[j.id].finish_s is None or before[j.id].finish_s is None
                     else after[j.id].finish_s - before[j.id].finish_s) for j in state.jobs}
    if args.json:
        print(json.dumps({"job": eta.eta_dict(state, {eta.NEW_ID: mine})[eta.NEW_ID],
                          "others": {j.id: {**eta.eta_dict(state, {j.id: after[j.id]})[j.id],
                                            "delay_s": delays[j.id]} for j in state.jobs}}))
        return 0
    print(f"start  {eta.wall(state, mine.start_s)}")
    print(f"finish {eta.wall(state, mine.finish_s)}")
    if state.jobs:
        w = max(2, *(len(j.id) for j in state.jobs))
        print(f"{'id':>{w}} {'finish with it':<32} delay")
        for j in state.jobs:
            d = delays[j.id]
            print(f"{j.id:>{w}} {eta.wall(state, after[j.id].finish_s):<32} "
                  f"{'-' if d is None else f'{d:+.0f}s'}")
    return 0


def history(args: argparse.Namespace) -> int:
    return _show(args, _jobs(args, active=False), history_table)
