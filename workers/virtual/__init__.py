"""Virtual nodes (VirtualFlow, Or et al.): one job's global batch split into V virtual nodes
that any number and mix of processes run, with the same training trajectory.

- ``layout``: node sizes and the node-to-process mapping (``2x4``, ``6:2``);
- ``data``, ``rng``, ``batchnorm``: data, randomness and batch norm independent of it;
- ``engine``: one step (sequential nodes, weighted accumulation, one all-reduce);
- ``checkpoint``: resume on another mapping (elasticity);
- ``reference``, ``check``: the ``vn check`` self-test;
- ``profiler``, ``split``: heterogeneous training (profiles and the split solver).
"""
