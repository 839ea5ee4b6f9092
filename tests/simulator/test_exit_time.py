"""``SimConfig.exit_s``: a finished job's process exits its type's seconds after its last
step, as on the daemon (a torch process takes half a second). Its GPUs are refilled at the
last step, as the daemon refills them, and the refill's run starts up once the process has
exited (issue #29)."""

from __future__ import annotations

import pytest

from gavelsched.core.driver import config_for
from policies import get_policy
from simulator import SimConfig, simulate
from traces import TraceJob, default_table

R = 60.0
KIND = "ResNet-18 (batch size 32)"
TABLE = default_table()
RATE = TABLE.get("v100", KIND)


def finishes(exit_s: dict[str, float]) -> list[float]:
    """Max-min fairness on one V100 (X = 1/2 each), refills in the first 70% of each 60-s
    round (to 42 s): a job of 40 s runs first, then one of 10,000 s. Each job's finish."""
    policy = get_policy("max_min_fairness_perf")
    config = config_for(policy, TABLE, ("v100",), round_seconds=R, refill_freed=True,
                        refill_until=0.7, resolve="responsive", min_resolve_interval_s=R)
    jobs = [TraceJob(job_type=KIND, scale_factor=1, total_steps=int(s * RATE), arrival_s=0.0)
            for s in (40.0, 10_000.0)]
    result = simulate(jobs, TABLE, {"v100": 1}, policy, core_config=config,
                      sim=SimConfig(round_ends_at_last_finish=False, exit_s=exit_s))
    return [j.completion_s for j in result.jobs]


@pytest.mark.parametrize("exit_s,later", [
    ({KIND: 1.5}, 1.5),         # refilled at 40 s, started when the process exits at 41.5
    ({KIND: 3.0}, 3.0),         # (at 43 s, past the refills' cut-off: placed before it)
    ({KIND: 25.0}, 20.0),       # gone by the round's end: the next round, at 60 s
    ({"another type": 3.0}, 0.0),
])
def test_a_refill_starts_once_the_finished_job_s_process_exits(exit_s, later):
    gavel = finishes({})        # freed at the last step, at 40 s, and started at once
    assert gavel[1] == pytest.approx(40.0 + 10_000.0, abs=2.5)     # (whole-step leases)
    got = finishes(exit_s)
    assert got[0] == pytest.approx(gavel[0])
    assert got[1] - gavel[1] == pytest.approx(later, abs=0.1)


@pytest.mark.parametrize("seconds", [-1.0, float("nan"), float("inf")])
def test_an_exit_time_that_is_not_finite_and_non_negative_is_refused(seconds):
    with pytest.raises(ValueError, match="exit time"):
        SimConfig(exit_s={KIND: seconds})
