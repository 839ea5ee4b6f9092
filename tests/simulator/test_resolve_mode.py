"""``simulate --resolve gavel|responsive`` (issue #18): Gavel's interval stays the simulator's
default, so replays still match Gavel; ``responsive`` is the daemon's rule. (The flags'
readers are tested with the CLI's, ``tests/cli/test_simulate_flags.py``.)"""

from __future__ import annotations

import json

import pytest

from gavelsched.cli import main
from gavelsched.core import CoreConfig
from gavelsched.core.resolving import RESOLVE_MODES
from policies import Traits
from policies.base import Policy, Solution

ARGS = ["simulate", "--jobs", "30", "--rate", "20", "--multi-gpu", "--cluster", "8:8:8",
        "--quiet", "--json", "-"]


def run(capsys, *extra) -> dict:
    assert main([*ARGS, *extra]) == 0
    data = json.loads(capsys.readouterr().out)
    data.pop("wall_s"), data.pop("solve_s")        # measured, not simulated
    return data


def test_gavel_is_the_default_and_responsive_re_solves_more(capsys):
    default = run(capsys)
    assert run(capsys, "--resolve", "gavel") == default
    responsive = run(capsys, "--resolve", "responsive")
    assert responsive["resolves"] > default["resolves"]
    assert len(responsive["jobs"]) == len(default["jobs"]) == 30


def test_refill_is_one_flag_away_and_off_by_default(capsys):
    default = run(capsys)
    refill = run(capsys, "--refill")
    assert len(refill["jobs"]) == len(default["jobs"]) == 30
    assert refill["jobs"] != default["jobs"]     # freed GPUs went to waiting jobs


def test_a_bad_mode_exits_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*ARGS, "--resolve", "sometimes"])
    assert exit_.value.code == 2


def test_a_new_job_runs_at_the_next_boundary_instead_of_holding_its_worker():
    """``test_engine``'s Gavel quirk: job 2 arrives at 400 s and, until 360 + 1920 s, holds
    a free worker idle. Responsive, it is allocated at the boundary after its arrival."""
    from .test_engine import run, tj

    jobs = [tj(steps=10**6), tj(steps=10**6, arrival=10.0), tj(steps=100, arrival=400.0)]
    gavel = run(jobs, cluster={"v100": 3})
    assert gavel.jobs[2].completion_s == pytest.approx(2520.0 + 10.0)
    responsive = run(jobs, cluster={"v100": 3},
                     core_config=CoreConfig(resolve="responsive", type_order=("v100",)))
    assert responsive.jobs[2].completion_s == pytest.approx(720.0 + 10.0)


class Nobody(Policy):
    """Gives no job any time, and declares no backfill: nothing is ever placed."""

    name = "nobody"
    TRAITS = Traits(backfill=False)

    def _solve(self, problem):
        return Solution({j.id: {"v100": 0.0} for j in problem.jobs}, None, None)

    def evaluate(self, problem, allocation):
        return None


@pytest.mark.parametrize("mode", RESOLVE_MODES)
def test_an_idle_cluster_waits_for_the_next_arrival_when_a_resolve_had_its_chance(mode):
    """Without Gavel's jump to the next arrival (``SimConfig.idle_jumps_to_arrival``), an
    empty round whose re-solve was already allowed waits for the arrival (it used to step
    the clock by 1e-9 s at a time), and the run ends as 'can never be placed'."""
    from simulator import SimConfig, SimulationError

    from .test_engine import run, tj

    jobs = [tj(steps=100), tj(steps=100, arrival=3600.0)]
    config = CoreConfig.for_traits(Nobody.TRAITS, resolve=mode, min_resolve_interval_s=0)
    with pytest.raises(SimulationError, match="can never be placed"):
        run(jobs, cluster={"v100": 1}, policy=Nobody(), core_config=config,
            sim=SimConfig(idle_jumps_to_arrival=False))
