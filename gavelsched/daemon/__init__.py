"""The scheduler daemon (thesis §5.6): the scheduler core run on real time, over gRPC.

- ``config``: the cluster YAML (``gavelsched scheduler --config CLUSTER.yaml``);
- ``store``: SQLite state (jobs, servers, throughputs, round counter), for restarts;
- ``executor``: ``DaemonExecutor``, the one thread that owns the ``SchedulerCore``;
- ``leases``: what a RunJob / lease carries, from a planned micro-task;
- ``throughputs``: online per-job throughputs from round reports (thesis §5.3.3);
- ``service``: the gRPC servicers (workers, iterators, clients, health);
- ``metrics``: Prometheus series ``gavelsched_*``;
- ``server``: wires them together (``run_scheduler``).
"""
