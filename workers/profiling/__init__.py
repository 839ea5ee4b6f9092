"""Profiling a worker type: one training step of every catalog job type (thesis §5.7.1,
Table 5.2) timed on this machine's device, with each family's real architecture and batch
size on synthetic data (``architectures.py``), into the throughput row ``gavelsched
profile`` writes (``measure.py``)."""
