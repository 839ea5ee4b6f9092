"""The scheduler daemon (thesis §5.6): the scheduler core run on real time, over gRPC.

The round recipe is the simulator's (``gavelsched.core.driver.RoundDriver``); what is the
daemon's own lives in rooms of one job each (docs/architecture.md lists them):
``executor`` (the one thread that owns the core) and its ``inbox``, ``clock`` (when
boundaries come), ``jobs`` (job states: a transition table, the only place a state changes),
``runs`` (how tasks run: processes on workers), ``progress``, ``servers``, ``health``,
``retries``, ``startups``, ``view`` (what ``snapshot`` and ``metrics`` read), ``publish``
(when it is republished), ``leases``, ``mixed``,
``dispatch``, ``store``, ``submissions``, ``config``, ``priors`` (a
worker's measured profile as its type's priors), ``logs``, ``service``,
``server`` (wiring: ``SchedulerDaemon``) and ``local`` (a loopback cluster).
"""
