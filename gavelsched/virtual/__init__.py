"""The torch-free half of virtual nodes (VirtualFlow §3-5), which the scheduler core prices
with and the daemon launches with; the torch side lives in ``workers/virtual``.

- ``layout``: node sizes and the node-to-process mapping (``2x4``, ``6:2``; §3, §4.1);
- ``split``: the heterogeneous split solver (§5.1.2), a pure function the core calls to
  price a job on a mix of types;
- ``envspec``: the ``GAVEL_VN_*`` environment a mixed job's processes read (§5.1.2).
"""
