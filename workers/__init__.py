"""The job side of gavelsched: worker daemons, the job launcher, GPU-type emulation,
reference torch workloads, virtual nodes and pipeline-parallel execution (imports
gavelsched's iterator and protocol, and torch)."""
