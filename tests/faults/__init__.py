"""Fault injection on separate network hosts (issue #17): a scheduler and two workers, each
in its own network namespace, with link, process, network-quality and checkpoint faults
injected while a float64 training job runs (``job``). The harness: ``network`` (the hosts'
namespaces and links), ``proxy`` (the test's path to the scheduler), ``cluster`` (the daemons
on those hosts), ``faults`` (the injectors and a scenario's run) and ``verdicts`` (what must
hold, and the recovery time)."""
