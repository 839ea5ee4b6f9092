"""A heterogeneous plan run for real (VirtualFlow §5): the split solver's layout and mapping
(uneven node sizes on two emulated GPU types) trained by gloo processes stays on the
trajectory of one process running all nodes."""

from __future__ import annotations

from workers.virtual.check import run_check
from workers.virtual.reference import ReferenceJob
from gavelsched.virtual.split import parse_profiles, plan_split


def test_solver_plan_trains_on_the_one_process_trajectory():
    sizes = [2, 3, 4, 6, 8, 12, 16]
    profiles = parse_profiles({
        "v100": {"memory_gb": 16, "comm_s": 0.0, "step_s": {str(b): 0.25 * b for b in sizes}},
        "p100": {"memory_gb": 16, "comm_s": 0.0, "step_s": {str(b): 1.0 * b for b in sizes}}})
    plan = plan_split(profiles, 48, {"v100": 1, "p100": 1})
    layout, mapping, types = plan.assignment()
    # max(0.25 b_v, b_p) with b_v + b_p = 48 is smallest at b_v = 39 (9.75 s): one P100
    # node of 9 samples, three V100 nodes of 13
    assert types == ("p100", "v100") and layout.sizes == (9, 13, 13, 13)
    assert [sum(layout.sizes[n] for n in r) for r in mapping.ranks] == [9, 39]
    job = ReferenceJob(nodes=layout.nodes, node_sizes=layout.sizes, dataset_size=120)
    (result,) = run_check(job, [mapping], steps=4)
    assert result.max_abs_diff <= 1e-9
