"""Fault injection on separate network hosts (issue #17): a scheduler and two workers, each
in its own network namespace, with link, process, network-quality and checkpoint faults
injected while a float64 training job runs (``job``); ``netns`` is the harness."""
