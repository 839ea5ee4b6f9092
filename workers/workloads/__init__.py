"""Reference training workloads (thesis Table 5.2's families), one module each, run as
``python -m workers.workloads.<name>``: synthetic data, data parallel through
torch.distributed, GavelIterator for leases and checkpoints. ``steps`` imports no torch.
The job type -> workload table is ``traces.workloads``."""
