"""A restarted scheduler's runs found going on (docs/runtime.md, "The runs going on are
kept"; thesis §5.6: a lease is extended when the next round keeps a job on its workers).

A worker lists its runs, each with its generation and GPUs, when it registers and in every
heartbeat. A process of the job's newest generation that this scheduler did not start (it
restarted while the process ran) is adopted as an *orphan* run on those GPUs, so the job
is not launched elsewhere while it may still write its checkpoint, and the core is told
where it runs (``SchedulerCore.adopt_run``): the next plan keeps it there when it gives
the job a round, as it keeps any job that ran last round (two orphans on exactly the same
GPUs ran as a co-located pair, thesis §5.3.1: the plan keeps them when it gives the pair a
round, ``_pair_up``). Until that plan the orphan's RenewLease waits for it
(``RunTable.unplanned``), and so does its InitJob if its process starts up only now
(``processes.ProcessCalls.init_job``). Kept, the orphan becomes an ordinary run, extended
by the plan (``at_plan``); its lease is set on its first renewal (or that InitJob) from
its process's own count and clock (``leases.rebased_lease``), which this scheduler never
saw; its throughput is sampled from there on. Not kept, its lease is over at its next
RenewLease: it checkpoints and exits, and the job goes where the plan put it. A process of
an older generation, or of a job that has ended, is told to stop. An orphan run ends when
its exit is reported or its workers stop listing it. A process whose exit its server
reported is not listed again but by a heartbeat sent before that report (the worker lists
and reports from two threads): such a listing changes nothing (``Fences.gone``).

Runs on the executor thread, as the run table it adds to.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from policies import pair_key

from ..core import MicroTask, Round
from ..rpc import pb
from .dispatch import PLANNED
from .jobs import RUNNING
from .leases import extended_lease, stop_lease
from .runs import RunTable

log = logging.getLogger(__name__)


class Orphans:
    """The orphan runs of a run table (module docstring)."""

    def __init__(self, table: RunTable) -> None:
        self.table = table
        self._adopted: set[str] = set()     # jobs adopted as orphans (some may have ended)

    def at_plan(self, rnd: Round, index: int, now: float) -> None:
        """The plan of ``rnd`` (round ``index``, at ``now``): the runs it keeps in place are
        extended (``RunTable.extend_continuing``), the orphans among them too (``keep``),
        but those of a job that has ended since it was credited last (its last step
        committed: the plan still holds it); it has judged every orphan; the renewals are
        answered (``Renewals.at_plan``)."""
        t = self.table
        t.extend_continuing(rnd, index)
        if t.unplanned:           # (only after a restart: not a walk over every plan's tasks)
            kept = 0
            for task in rnd.tasks:
                members = task.job_ids
                if task.extended and all(
                        job_id in t.unplanned and (run := t.get(job_id)) is not None
                        and run.workers == task.workers and not t.jobs[job_id].final
                        for job_id in members):
                    for m in range(len(members)):
                        self.keep(task, m, index, rnd.round_seconds, now)
                    kept += len(members)
            log.info("round %d: %d of the %d runs found going on kept on their GPUs; the "
                     "others end at their next renewal", index, kept, len(t.unplanned))
            t.unplanned.clear()
        t.renewals.at_plan(index)

    def adopt(self, server_id: int, worker_type: str, running: Mapping[str, int], mono: float,
              gpus: Mapping[str, Sequence[int]] | None = None) -> None:
        """Reconcile what ``server_id`` lists (``running``: job -> run generation; ``gpus``:
        job -> the server's GPUs, local indices, its processes use) with the table."""
        t = self.table
        server = t.health.servers[server_id].row
        placed: dict[tuple[int, ...], str] = {}     # this listing's orphans by their GPUs
        for job_id, generation in running.items():
            if t.fences.gone(job_id, generation, server_id):
                continue            # (listed before its exit, which the server reported)
            job = t.jobs.get(job_id)
            run = t.get(job_id)
            if job is None or job.final or generation != t.fences.current(job_id):
                if run is None or run.generation != generation:
                    self._stop(job_id, generation, server_id)
                continue
            if run is None:
                run = t.hold(job, worker_type, generation, mono)
                self._adopted.add(job_id)
                t.unplanned.add(job_id)
            elif not (run.orphan and server_id not in run.servers):
                continue            # (a run of ours, or a server of this orphan already)
            run.servers[server_id] = pb.RunJobRequest()
            run.left.add(server_id)
            run.workers += _workers(server.workers, (gpus or {}).get(job_id, ()), job_id,
                                    server_id)
            if run.workers:
                t.core.adopt_run(job_id, run.workers)
                if (other := placed.setdefault(run.workers, job_id)) != job_id:
                    self._pair_up(other, job_id, run.workers)
        for job_id in list(self._adopted):     # (not every run: a heartbeat comes often)
            run = t.get(job_id)
            if run is None or not run.orphan:
                self._adopted.discard(job_id)
                t.unplanned.discard(job_id)
            elif server_id in run.left and job_id not in running:
                t.exited(job_id, server_id)

    def _stop(self, job_id: str, generation: int, server_id: int) -> None:
        """Tell ``server_id`` to stop its listed process of run ``generation``: a stale run
        (an older generation than the job's newest), or the last run of a job that has
        ended (its exit may be on its way: the worker lists and reports from two threads;
        a KillJob of an exited process changes nothing)."""
        stale = generation != self.table.fences.current(job_id)
        if stale:
            log.warning("job %s: run generation %d on server %d is stale; stopping it",
                        job_id, generation, server_id)
        else:
            log.info("job %s has ended: stopping its run (generation %d) on server %d, if "
                     "it has not exited yet", job_id, generation, server_id)
        self.table.dispatcher.kill_job(self.table.health.address(server_id), job_id,
                                       "stale run generation" if stale else "job ended",
                                       generation)

    def _pair_up(self, a: str, b: str, workers: tuple[int, ...]) -> None:
        """Orphans ``a`` and ``b``, listed by one server on exactly the same GPUs, ran as a
        co-located pair (thesis §5.3.1): the core is told the pair runs there, under the
        key its allocation gives the pair time by (none: the pair has no time, and is not
        kept as one), so that its next plan can keep the pair in place."""
        t = self.table
        given = t.core.allocation.allocation if t.core.allocation is not None else {}
        for key in (pair_key(a, b), pair_key(b, a)):
            if key in given:
                t.core.adopt_run(key, workers)

    def keep(self, task: MicroTask, m: int, index: int, R: float, now: float) -> None:
        """The plan of round ``index`` (at ``now``) keeps an orphan, member ``m`` of
        ``task`` (a pair keeps both), on its GPUs: an extension, as
        ``RunTable.extend_continuing`` makes, with its RunJobs made whole from the job's
        row (the scheduler that launched it is gone) and its lease set at its next renewal
        (``RunTable.renewed``); its job runs again."""
        t = self.table
        job_id = task.job_ids[m]
        run, job = t.get(job_id), t.jobs[job_id]
        run.orphan, run.rebase, run.round = False, True, index
        run.ends = t.planned_end(R)
        run.round_start, run.task_key = run.ends - R, task.key
        run.steps_per_s = float(task.throughputs[m])
        run.lease = extended_lease(stop_lease(job.steps_done), index, task.steps[m],
                                   job.spec.total_steps, run.ends - run.started)
        requests = t.requests(task, m, job, run.lease, index, run.generation)
        run.servers = {}
        t.hosts.add(job_id, requests)
        if job.state != RUNNING:
            t.jobs.start(job_id, now, run.worker_type)
        for server_id, request in requests.items():
            t.send(job_id, server_id, request, PLANNED)
        t.held[task.key] = R
        log.info("job %s: its run found going on (generation %d) is kept on its GPUs in "
                 "round %d", job_id, run.generation, index)


def _workers(ids: Sequence[int], gpus: Sequence[int], job_id: str,
             server_id: int) -> tuple[int, ...]:
    """The core's worker ids of the server's GPUs ``gpus`` (local indices); none when a
    worker sent GPUs this server does not have (the run is then never kept)."""
    if len(set(gpus)) == len(gpus) and all(0 <= g < len(ids) for g in gpus):
        return tuple(ids[g] for g in gpus)
    log.warning("job %s: server %d lists its run on GPUs %s, not GPUs of that server "
                "(%d); the run is not kept", job_id, server_id, list(gpus), len(ids))
    return ()
