"""Throughput priors for worker types the table lacks (thesis §5.3.3, "Throughput
Estimator": a job's throughputs start from an initial estimate, and what its rounds really
make replaces it, ``core.online.OnlineThroughputs``).

``Priors`` is the ``ThroughputSource`` the core, the submission door and the online
throughputs read: the scheduler's throughput table, plus what the profiles of registering
workers (``gavelsched worker --profile``; ``traces.profiles``) add to it. ``table`` is the
current table, an immutable value that status reads.

Rules (``traces.profiles.with_profile``: the table wins, a profile fills only what the table
lacks):

- a type is learned before the core first sees its workers (``servers.Servers`` calls
  ``learn`` before ``core.add_workers``): the core caches its lookups until the worker
  types change, so a profile that comes for a type the core already serves is kept for the
  next start instead;
- the first profile of a type is kept; later ones are ignored (and logged);
- a worker of a type the table lacks that brings no profile gets the type's shipped
  measured row (``traces/data/measured``), if there is one;
- learned profiles are kept in the store (meta ``profile/<type>``) and learned again at the
  next start, before the core is built (``restore``), for the types of the stored servers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from traces.errors import TraceError
from traces.profiles import (Profile, profile_from_dict, profile_to_dict, shipped_profiles,
                             with_profile)
from traces.types import JobKey, ThroughputTable

from .meta import PROFILE

log = logging.getLogger(__name__)


class Meta(Protocol):
    """What priors keep in the store (``store.Store``'s meta rows)."""

    def get_meta(self, key: str, default: str | None = None) -> str | None: ...

    def set_meta(self, values: Mapping[str, object]) -> None: ...


class Priors:
    """The table, and the profiles learned on top of it (see the module docstring)."""

    def __init__(self, table: ThroughputTable, store: Meta, *,
                 shipped: Callable[[], Mapping[str, Profile]] = shipped_profiles) -> None:
        self.table = table
        self._store, self._shipped = store, shipped
        self._learned: dict[str, Profile] = {}    # the first profile of each type

    # ---- ThroughputSource ------------------------------------------------------------
    @property
    def worker_types(self) -> tuple[str, ...]:
        return self.table.worker_types

    def get(self, worker_type: str, job_type: str, scale_factor: int = 1) -> float:
        return self.table.get(worker_type, job_type, scale_factor)

    def pair(self, worker_type: str, a: JobKey, b: JobKey) -> tuple[float, float] | None:
        return self.table.pair(worker_type, a, b)

    # ---- learning ---------------------------------------------------------------------
    def restore(self, types: Iterable[str]) -> None:
        """At start, before the core is built: the profile kept for each of ``types`` (the
        stored servers' types), else the shipped row of a type the table lacks."""
        for worker_type in dict.fromkeys(types):
            profile = self._kept(worker_type)
            source = "profile kept from an earlier run"
            if profile is None and worker_type not in self.table.solo:
                profile, source = self._shipped_row(worker_type), "shipped measured row"
            if profile is not None:
                self._learned[worker_type] = profile
                self.table = with_profile(self.table, profile)
                log.info("priors of %s from its %s: %s", worker_type, source,
                         profile.describe())

    def learn(self, worker_type: str, profile: Profile | None, *, served: bool) -> str | None:
        """What a registering worker's ``profile`` (None: it brought none) does to the
        priors of ``worker_type``, in words for the log; None when there is nothing to
        say. ``served``: the core already has workers of that type."""
        kept = self._learned.get(worker_type)
        if kept is not None:
            if profile is None:
                return None
            return ("the same as the one learned" if profile == kept else
                    f"ignored: the first profile of {worker_type} is kept ({kept.describe()})")
        shipped = profile is None
        if shipped:
            if worker_type in self.table.solo or served:
                return None
            profile = self._shipped_row(worker_type)
            if profile is None:
                return None
        gaps = self._gaps(profile)
        if not gaps:
            return "ignored: the throughput table has every job type it measured"
        self._learned[worker_type] = profile
        if not shipped:    # (a shipped row is read again from the package at the next start)
            self._store.set_meta({PROFILE.key(worker_type):
                                  json.dumps(profile_to_dict(profile))})
        if served:
            return (f"kept for the next start: the scheduler already plans with "
                    f"{worker_type} without it")
        what = ("a type the table lacks" if worker_type not in self.table.solo else
                f"{gaps} job type{'s' if gaps != 1 else ''} the table lacks on {worker_type}")
        self.table = with_profile(self.table, profile)
        origin = f", from the shipped measured row of {profile.describe()}" if shipped else ""
        return f"priors for {what}{origin}"

    def _shipped_row(self, worker_type: str) -> Profile | None:
        """The shipped prior of ``worker_type``, or None (a bad shipped file is logged: a
        worker's registration does not fail on it)."""
        try:
            return self._shipped().get(worker_type)
        except TraceError as err:
            log.warning("shipped measured rows ignored: %s", str(err).splitlines()[0])
            return None

    def _gaps(self, profile: Profile) -> int:
        """How many of the profile's job types the table lacks on its type (at sf 1)."""
        have = self.table.solo.get(profile.worker_type, {})
        return sum((job, 1) not in have for job in profile.steps_per_s)

    def _kept(self, worker_type: str) -> Profile | None:
        """The profile the store kept for ``worker_type`` (checked again: it comes from
        outside), or None."""
        raw = self._store.get_meta(PROFILE.key(worker_type))
        if raw is None:
            return None
        where = f"store meta {PROFILE.key(worker_type)}"
        try:
            profile = profile_from_dict(json.loads(raw), where)
        except (TraceError, ValueError, RecursionError) as err:
            log.warning("%s ignored: %s", where, str(err).splitlines()[0])
            return None
        if profile.worker_type != worker_type:
            log.warning("%s ignored: it is a profile of %r", where, profile.worker_type)
            return None
        return profile
