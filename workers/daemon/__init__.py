"""The worker daemon (thesis §5.6): registration and heartbeats (``worker``), one process per
rank under leases (``launcher``), and GPU-type emulation on CPU-only machines
(``emulation``)."""
