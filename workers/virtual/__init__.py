"""Virtual nodes (VirtualFlow, Or et al.): one job's global batch split into V virtual nodes
that any number and mix of processes run, with the same training trajectory.

- node sizes, the node-to-process mapping and the split solver are torch-free and live
  in ``gavelsched/virtual`` (the scheduler prices and launches with them);
- ``data``, ``rng``, ``batchnorm``: data, randomness and batch norm independent of it;
- ``engine``: one step (sequential nodes, weighted accumulation, one all-reduce);
- ``checkpoint``: resume on another mapping (elasticity);
- ``reference``, ``check``: the ``vn check`` self-test;
- ``profiler``: heterogeneous training (the per-type profiles the split solver reads).
"""
