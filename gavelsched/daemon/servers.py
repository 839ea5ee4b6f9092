"""Worker servers joining, beating and going silent (thesis §5.6).

A worker daemon registers its GPUs of one type; a server that registers again (a restart)
keeps its id and GPUs, and its old processes are gone (a worker daemon saves its id and
sends it again when it restarts, and kills what its predecessor left running). A heartbeat
lists the runs the server hosts, with their generations and GPUs, as its registration does
(a scheduler that restarted adopts the newest ones as orphan runs, and keeps those its next
plan keeps in place; older ones are told to stop: ``orphans``). A server
silent for ``health.HEARTBEAT_MISSES`` heartbeats is failed in the core, and its runs end
(their jobs go on from their last checkpoint). A worker may bring a profile of its type
(``RegisterWorkerRequest.profile``): ``priors.Priors`` learns it before the core first
sees the type's workers, and the core serves the type's queue in its place, fastest first
over the priors (thesis §5.5; before, a type learned after the start came after every type
the table had, a K80's queue served before an H200's). The collaborators are handed in;
this room runs on the executor thread.

An operator takes a server out of service for maintenance with ``gavelsched drain``
(``drain``): its workers leave the core's view, so nothing new is planned on them, while
the runs on them go on to the end of their leases and checkpoint there as at any round's
end (their jobs resume elsewhere, as after a preemption). A drained server stays out of
service when it registers again and across scheduler restarts (the store's ``drained/<id>``
meta rows) until it is put back. A worker daemon that is stopping (SIGTERM) drains itself
the same way (``heartbeat``'s ``leaving``); that drain ends when it registers again.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence

from traces.profiles import Profile

from ..core import SchedulerCore
from ..core.type_order import fastest_first
from ..rpc import pb
from .audit import SCHEDULER, Audit
from .config import DaemonConfig
from .health import DEAF_LIMIT, Health
from .meta import DRAINED
from .orphans import Orphans
from .priors import Priors
from .runs import RunTable
from .store import ServerRow, Store

log = logging.getLogger(__name__)

# who took a server out of service (meta ``DRAINED``), or "0": ``gavelsched drain``; its own
# worker, stopping; its worker's disk, short of room (``workers/daemon/room.py``)
BY_OPERATOR, BY_WORKER, BY_ROOM = "1", "2", "3"
WHY = {BY_OPERATOR: "", BY_WORKER: " (its worker is stopping)",
       BY_ROOM: " (its worker's disk is short of room)"}


class Servers:
    def __init__(self, config: DaemonConfig, core: SchedulerCore, store: Store,
                 health: Health, runs: RunTable, priors: Priors, *,
                 now: Callable[[], float], changed: Callable[[], None], audit: Audit) -> None:
        """``changed``: told when what ``status`` shows of the servers changes (a drain);
        ``audit``: where an operator's drain is recorded."""
        self.config, self.core, self.store = config, core, store
        self.health, self.runs, self.priors, self._now = health, runs, priors, now
        self.orphans = Orphans(runs)           # (what a restarted scheduler finds running)
        self._changed, self._audit = changed, audit
        self.drained: dict[int, str] = {}    # server id -> who drained it (``WHY``)
        self.short: dict[int, str] = {}      # server id -> why its worker takes no new run
        self._deaf = False                   # (``fail_silent``: said once)
        for i in health.servers:
            by = store.get_meta(DRAINED.key(i))
            if by in WHY:
                self.drained[i] = by

    def _priced(self, worker_type: str) -> None:
        """Under a policy that reads prices (chapter 6), a server of a type priced nowhere
        (the cluster YAML, its price trace, the catalog) is refused: every re-solve would
        fail for want of its price, and no job would be planned."""
        policy = self.core.policy
        if "prices" in policy.traits.reads and not self.core.prices.get(worker_type, 0.0) > 0:
            raise ValueError(f"worker_type {worker_type} has no price > 0, and the policy "
                             f"{policy.name} prices every GPU: add prices: {{{worker_type}: "
                             f"USD_PER_GPU_HOUR}} to the cluster YAML")

    def register(self, request: pb.RegisterWorkerRequest, mono: float,
                 profile: Profile | None = None) -> pb.RegisterWorkerResponse:
        """``profile``: the worker's own, checked at the door (``service``), or None."""
        self._priced(request.worker_type)
        table = self.priors.table
        learned = self.priors.learn(request.worker_type, profile,
                                    served=request.worker_type in self.core.worker_types)
        if self.priors.table is not table:      # a type learned: served in its place
            self.core.order_types(fastest_first(self.priors.table, self.priors.worker_types))
        previous = self.health.servers.get(request.previous_server_id)
        if (previous is not None and previous.row.worker_type == request.worker_type
                and len(previous.row.workers) == request.gpus):
            row = ServerRow(previous.row.id, request.worker_type, previous.row.workers,
                            request.address, request.hostname)
            back = self.drained.get(row.id) == BY_WORKER     # from its own stop: in service
            if back:
                self._mark(row.id, None)
            if previous.alive:  # it restarted before we noticed: its processes are gone
                self.runs.lost_server(previous.row.id, "worker restarted")
            if (back or not previous.alive) and row.id not in self.drained:
                # a server back after this scheduler's restart does not change the cluster
                # of the period it took on (``period``); any other return does
                self.core.restore_workers(row.workers, self._now(), reset=self.health.back(mono))
        else:
            if request.gpus < 1:
                raise ValueError(f"gpus must be >= 1, got {request.gpus}")
            if not request.worker_type:
                raise ValueError("worker_type is empty")
            view = self.core.add_workers(request.worker_type, request.gpus, self._now(),
                                         gpus_per_server=request.gpus)
            server = view.servers[-1]
            row = ServerRow(server.id, server.worker_type, server.workers, request.address,
                            request.hostname)
        self.store.put_server(row)
        registration = secrets.randbits(63) or 1
        self.health.up(row, mono, registration)
        if request.running:     # (a scheduler restart: its runs are adopted before a plan)
            running, gpus = running_of(request.running)
            self.orphans.adopt(row.id, row.worker_type, running, mono, gpus)
        log.info("worker %d (%s x%d) at %s registered", row.id, row.worker_type,
                 len(row.workers), row.address)
        self._log_priors(row, profile, learned)
        return pb.RegisterWorkerResponse(server_id=row.id, worker_ids=list(row.workers),
                                         round_seconds=self.config.round_seconds,
                                         heartbeat_seconds=self.config.heartbeat_seconds,
                                         registration=registration)

    def drain(self, server_id: int, undo: bool = False,
              user: str = SCHEDULER) -> pb.DrainResponse:
        """Take server ``server_id`` out of service, or (``undo``) put it back (module
        docstring), as ``user`` asked (the audit log says so); ``LookupError`` for a
        server never registered."""
        self._changed()
        server = self.health.servers.get(server_id)
        if server is None:
            raise LookupError(f"no worker server {server_id}")
        self._audit.record(user, "undrain" if undo else "drain", detail=f"server {server_id}")
        if undo:
            self._undrain(server_id)
        elif self.drained.get(server_id) != BY_OPERATOR:
            self._drain(server_id, BY_OPERATOR)
        runs, by = self.runs.on_server(server_id), self.drained.get(server_id)
        what = self._name(server_id)
        if by is None:
            message = f"{what} is in service"
        elif runs:
            message = f"{what} is draining{WHY[by]}: {runs} run{'s' if runs != 1 else ''} left"
        else:
            message = f"{what} is drained: no job runs on it"
        return pb.DrainResponse(drained=by is not None, runs=runs, message=message)

    def _drain(self, server_id: int, by: str) -> None:
        """Out of service (``by`` whom): its workers leave the core's view; its runs go on."""
        first = server_id not in self.drained
        self._mark(server_id, by)
        if first:
            self.core.fail_workers(self.health.servers[server_id].row.workers, self._now())
        log.info("%s draining%s: nothing new is planned on it; its runs end with their "
                 "leases", self._name(server_id), WHY[by])

    def _undrain(self, server_id: int) -> None:
        if server_id not in self.drained:
            return
        self._mark(server_id, None)
        server = self.health.servers[server_id]
        if server.alive:
            self.core.restore_workers(server.row.workers, self._now())
        log.info("%s back in service", self._name(server_id))

    def _mark(self, server_id: int, by: str | None) -> None:
        """Who drained the server (None: in service), in memory and in the store."""
        if by is None:
            self.drained.pop(server_id, None)
        else:
            self.drained[server_id] = by
        self.store.set_meta({DRAINED.key(server_id): by or 0})

    def _name(self, server_id: int) -> str:
        row = self.health.servers[server_id].row
        return f"worker {server_id} ({row.worker_type} x{len(row.workers)})"

    def _log_priors(self, row: ServerRow, profile: Profile | None, learned: str | None) -> None:
        what = f"worker {row.id} ({row.worker_type} x{len(row.workers)})"
        if profile is not None:
            log.info("%s brought a profile of %s: %s", what, profile.describe(), learned)
            if profile.reduced:
                log.warning("%s: its profile was measured at reduced sizes (--profile-reduced"
                            "): its rates are the tool's, not the type's", what)
        elif learned is not None:
            log.info("%s brought no profile: %s", what, learned)
        elif row.worker_type not in self.priors.worker_types:
            log.warning("%s brought no profile, and the throughput table has no %s: no job "
                        "runs on it until a worker of its type brings one (gavelsched worker "
                        "--profile)", what, row.worker_type)

    def heartbeat(self, server_id: int, mono: float, running: Mapping[str, int],
                  leaving: bool = False, registration: int = 0,
                  gpus: Mapping[str, Sequence[int]] | None = None,
                  short_of_room: str = "") -> bool:
        """What a heartbeat tells the executor, on its thread (after ``Health.seen`` took
        its arrival on the handler's): ``running``: job -> run generation of the processes
        the server hosts, ``gpus``: job -> their GPUs (orphans are adopted: ``orphans``).
        False when the server is unknown or was failed (it registers again). ``leaving``:
        its worker is stopping, so it is drained (module docstring), if ``registration`` is
        the server's newest one. A heartbeat of an older registration (a late message of a
        worker daemon that has registered again since) is ignored whole: the processes it
        lists died with that daemon, and the new registration ended their runs; adopted,
        they would hold their jobs as orphans until the next heartbeat. (0: a caller that
        gives no registration; its listing counts.) ``short_of_room``: why its worker
        takes no new run (its disk; "": it has room): drained while it says so
        (``workers/daemon/room.py``)."""
        server = self.health.seen(server_id, mono)
        if server is None:
            return False
        if registration and registration != server.registration:
            log.warning("worker %d: a heartbeat of an older registration ignored (sent "
                        "before the worker registered again)", server_id)
            return True
        if leaving:
            self._changed()             # status shows the drain
        self.orphans.adopt(server_id, server.row.worker_type, running, mono, gpus)
        if leaving and server_id not in self.drained:
            if registration == server.registration:
                self._drain(server_id, BY_WORKER)
            else:
                log.warning("worker %d: a leaving heartbeat without its registration "
                            "ignored", server_id)
        self._room(server_id, short_of_room)
        return True

    def _room(self, server_id: int, short: str) -> None:
        """Its worker's disk is short of room (``short``: why) or has room again: drained
        while short (unless drained for another reason), back in service after."""
        was = self.short.get(server_id, "")
        if short:
            self.short[server_id] = short
        else:
            self.short.pop(server_id, None)
        if short and not was:           # (its words, the MiB free, change: said once)
            log.warning("%s: %s", self._name(server_id), short)
        drain = bool(short) and server_id not in self.drained
        undrain = not short and self.drained.get(server_id) == BY_ROOM   # (after a restart too)
        if drain:
            self._drain(server_id, BY_ROOM)
        elif undrain:
            self._undrain(server_id)
        if bool(short) != bool(was) or drain or undrain:
            self._changed()             # (status: the drain, the notices)

    def notices(self) -> list[str]:
        """A line for each live server whose worker takes no new run for want of room."""
        return [f"{self._name(i)} takes no new run: {why}; its runs go on, and it is back "
                f"in service once space is freed" for i, why in sorted(self.short.items())
                if self.health.alive(i)]

    def back(self, mono: float) -> bool:
        """Whether a restarted scheduler may plan (``Health.back``). The servers not back
        by then are failed in the core: the cluster changed (its next plan re-solves)."""
        if not self.health.back(mono):
            return False
        ids = sorted(self.health.take_missing())
        if ids:
            self.core.fail_workers([w for i in ids for w in self.health.servers[i].row.workers],
                                   self._now())
            log.warning("workers %s did not register again after this scheduler's restart; "
                        "planning without them", ", ".join(map(str, ids)))
        return True

    def fail_silent(self, mono: float) -> bool:
        """Fail the servers that missed their heartbeats; whether there was any."""
        deaf = self.health.deaf(mono)
        if deaf and not self._deaf:
            log.warning("no worker heard for %.1f s: taken as this scheduler's own silence "
                        "(too busy, or cut off); none is failed for up to %.0f s", deaf,
                        DEAF_LIMIT * self.health.limit)
        self._deaf = bool(deaf)
        dead = self.health.newly_dead(mono)
        late = self.health.intake_delay(mono) if dead else 0.0
        granted = f" (with {late:.1f} s more: heartbeats reach here that late)" if late else ""
        for server in dead:
            self.core.fail_workers(server.row.workers, self._now())
            log.warning("worker %d (%s) missed heartbeats: failed%s", server.row.id,
                        server.row.address, granted)
            self.runs.lost_server(server.row.id, f"worker {server.row.id} failed")
        return bool(dead)


def running_of(runs: Iterable[pb.RunningJob]
               ) -> tuple[dict[str, int], dict[str, tuple[int, ...]]]:
    """What a worker lists of its runs: (job -> run generation, job -> its GPUs here)."""
    runs = list(runs)
    return ({r.job_id: int(r.generation) for r in runs},
            {r.job_id: tuple(r.gpus) for r in runs})
