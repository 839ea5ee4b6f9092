"""Refused at the door (issue #17), on the policy side.

- The Problem JSON door (``problem_json.py``) refuses NaN, ±inf and integers beyond 64 bits,
  naming the field.
- Behind it, ``build_columns`` refuses a non-finite number that reaches a policy some other
  way (the scheduler core builds ``Problem``s itself) with a ``ProblemError`` naming the
  job, for every policy, so that one bad job never fails every re-solve as a solver's
  numerical error.
- ``gavelsched solve`` fuzzed with random Problem JSON: no traceback, and either an
  allocation or exit 2 with one line naming the field.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gavelsched.cli import main
from policies import REGISTRY, Job, Pair, Problem, ProblemError, get_policy
from policies.jobs import Configuration

from .test_problem import GOOD

FUZZ = settings(max_examples=int(os.environ.get("GAVEL_FUZZ_EXAMPLES", "50")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


# ----------------------------------------------------------------------------- the JSON door

def _job(**fields) -> dict:
    return {**GOOD["jobs"][0], **fields}


DOOR_CASES = [
    (json.dumps(dict(GOOD, jobs=[_job(weight=math.nan)])), "jobs[0].weight"),
    (json.dumps(dict(GOOD, jobs=[_job(throughputs={"v100": math.inf})])),
     "jobs[0].throughputs.v100"),
    (json.dumps(dict(GOOD, jobs=[_job(remaining_steps=-math.inf)])), "jobs[0].remaining_steps"),
    (json.dumps(dict(GOOD, jobs=[_job(slo_s=math.nan)])), "jobs[0].slo_s"),
    (json.dumps(dict(GOOD, jobs=[_job(scale_factor=10**30)])), "jobs[0].scale_factor"),
    (json.dumps(dict(GOOD, jobs=[_job(elapsed_s=10**400)])), "jobs[0].elapsed_s"),
    (json.dumps(dict(GOOD, cluster={**GOOD["cluster"], "v100": 2**63})), "cluster.v100"),
    (json.dumps(dict(GOOD, prices={"v100": math.nan})), "prices.v100"),
    (json.dumps(dict(GOOD, jobs=[_job(configurations=[
        {"gpus": {"v100": 1, "k80": 1}, "throughput": math.inf}])])),
     "jobs[0].configurations[0].throughput"),
    (json.dumps(dict(GOOD, pairs=5)), "pairs"),
]


@pytest.mark.parametrize("text, field", DOOR_CASES, ids=[f for _, f in DOOR_CASES])
def test_json_door_refuses_non_finite_and_huge_numbers(text, field):
    with pytest.raises(ProblemError) as err:
        Problem.from_dict(json.loads(text))
    message = str(err.value)
    assert message.startswith(f"{field}: ") and "\n" not in message and len(message) < 200


# ----------------------------------------------------------------------------- behind the door

def _problem(bad: Job, **kw) -> Problem:
    good = [Job(id="a", throughputs={"v100": 10.0, "k80": 2.0}, remaining_steps=100.0),
            Job(id="b", throughputs={"v100": 5.0, "k80": 3.0}, remaining_steps=100.0)]
    return Problem(cluster={"v100": 2, "k80": 2}, jobs=(good[0], bad, good[1]), **kw)


BAD_JOBS = [
    (Job(id="x", throughputs={"v100": 1.0}, weight=math.nan), "weight"),
    (Job(id="x", throughputs={"v100": math.inf}), "throughputs.v100"),
    (Job(id="x", throughputs={"v100": 1.0, "k80": math.nan}), "throughputs.k80"),
    (Job(id="x", throughputs={"v100": 1.0}, remaining_steps=math.nan), "remaining_steps"),
    (Job(id="x", throughputs={"v100": 1.0}, elapsed_s=math.inf), "elapsed_s"),
    (Job(id="x", throughputs={"v100": 1.0}, isolated_elapsed_s=math.nan),
     "isolated_elapsed_s"),
    (Job(id="x", throughputs={"v100": 1.0}, slo_s=math.nan), "slo_s"),
]


@pytest.mark.parametrize("policy", sorted(REGISTRY))
@pytest.mark.parametrize("bad, field", BAD_JOBS, ids=[f for _, f in BAD_JOBS])
def test_every_policy_names_the_non_finite_job(policy, bad, field):
    problem = _problem(bad, prices={"v100": 3.0, "k80": 1.0})
    with pytest.raises(ProblemError) as err:
        get_policy(policy, **({"budget": 100.0} if "budget" in policy else {})).solve(problem)
    assert f"jobs[1] (job 'x').{field}: must be finite" in str(err.value)


@pytest.mark.parametrize("cluster, prices, words", [
    ({"v100": math.nan, "k80": 2}, {}, "cluster.v100: must be finite, got nan"),
    ({"v100": 2, "k80": 2}, {"k80": math.inf}, "prices.k80: must be finite, got inf"),
])
def test_non_finite_cluster_or_price_is_named(cluster, prices, words):
    problem = Problem(cluster=cluster, prices=prices,
                      jobs=(Job(id="a", throughputs={"v100": 1.0}),))
    with pytest.raises(ProblemError, match=re.escape(words)):
        get_policy("max_min_fairness_perf").solve(problem)


def test_non_finite_pair_and_configuration_are_named():
    a = Job(id="a", throughputs={"v100": 2.0, "k80": 1.0})
    b = Job(id="b", throughputs={"v100": 2.0, "k80": 1.0},
            configurations=(Configuration({"v100": 1, "k80": 1}, math.nan),))
    pair = Problem(cluster={"v100": 1, "k80": 1}, jobs=(a, b),
                   pairs=(Pair(("a", "b"), {"v100": (math.nan, 1.0)}),))
    with pytest.raises(ProblemError, match=r"pairs\[0\] \(pair 'a\+b'\)"):
        get_policy("max_min_fairness_packed").solve(pair)
    mixed = Problem(cluster={"v100": 1, "k80": 1}, jobs=(a, b))
    with pytest.raises(ProblemError, match="job 'b': a configuration's throughput"):
        get_policy("max_min_fairness_mixed").solve(mixed)


def test_good_jobs_still_solve():
    problem = _problem(Job(id="x", throughputs={"v100": 1.0}, weight=2.0))
    allocation = get_policy("max_min_fairness_perf").solve(problem)
    assert set(allocation.allocation) >= {"a", "x", "b"}


@pytest.mark.filterwarnings("error")
def test_a_subnormal_rate_has_an_endless_isolated_time_without_overflow():
    """Finish-time fairness: remaining steps over a subnormal isolated rate overflow to an
    endless isolated time, whose ρ is 0 (its limit); no warning, the other job planned."""
    problem = Problem(cluster={"v100": 1}, jobs=(
        Job(id="slow", throughputs={"v100": 1e-310}, remaining_steps=1e10),
        Job(id="x", throughputs={"v100": 1.0}, remaining_steps=100)))
    allocation = get_policy("finish_time_fairness_perf").solve(problem)
    assert allocation.allocation["x"]["v100"] > 0.99


@pytest.mark.filterwarnings("error")
def test_an_isolated_rate_that_underflows_to_zero_is_an_endless_isolated_time():
    """The same when the rate times its 1/3 share of the cluster underflows to 0 (found by
    the fuzz below): a divide by zero, no warning."""
    problem = Problem(cluster={"v100": 1, "k80": 1}, jobs=(
        Job(id="slow", throughputs={"v100": 5e-324}, remaining_steps=100),
        *(Job(id=i, throughputs={"v100": 1.0, "k80": 1.0}, remaining_steps=10) for i in "xy")))
    allocation = get_policy("finish_time_fairness_perf").solve(problem)
    assert allocation.allocation["slow"] == {"v100": 0.0, "k80": 0.0}


@pytest.mark.filterwarnings("error")
def test_an_isolated_time_of_yoctoseconds_is_weighed_as_a_ratio_or_refused_by_job():
    """Finish-time fairness: weight over an isolated time of 5e-324 s overflows. A job done
    in that time has ρ = elapsed / isolated = 1; one with 10 s elapsed has a ρ no float
    holds, and the policy names it (the core plans the others without it). Before, the
    first solve got NaN and infinite terms, warned, and its solver failed."""
    done = Job(id="done", throughputs={"v100": 1.0}, remaining_steps=0, elapsed_s=5e-324,
               isolated_elapsed_s=5e-324)
    x = Job(id="x", throughputs={"v100": 2.0}, remaining_steps=100, elapsed_s=10.0)
    policy = get_policy("finish_time_fairness_perf")
    allocation = policy.solve(Problem(cluster={"v100": 1}, jobs=(done, x)))
    assert allocation.objective == pytest.approx(1.0, rel=1e-6)
    late = replace(done, elapsed_s=10.0)
    with pytest.raises(ProblemError, match="^job done: an isolated time of 4.94e-324 s is too"
                                           " short") as caught:
        policy.solve(Problem(cluster={"v100": 1}, jobs=(late, x)))
    assert caught.value.job_id == "done"


# ----------------------------------------------------------------------------- fuzz `solve`

EDGES = st.sampled_from([0, -1, 1, 2, 2**63 - 1, 2**63, 10**30, 10**400, 0.5, -0.0, 1e308,
                         math.nan, math.inf, -math.inf, "", "v100", "1", None, True, [], {}])
VALUES = st.one_of(EDGES, st.integers(), st.floats(), st.text(max_size=6))
TYPES = ("v100", "k80")
GOOD_JOBS = st.fixed_dictionaries(
    {"id": st.text("abc123", min_size=1, max_size=3),
     "throughputs": st.dictionaries(st.sampled_from(TYPES), st.floats(0, 50), min_size=1)},
    optional={"scale_factor": st.integers(1, 2), "weight": st.floats(0.1, 10),
              "remaining_steps": st.floats(0, 1e6), "elapsed_s": st.floats(0, 1e6),
              "slo_s": st.floats(1, 1e6) | st.none()})
JOBS = st.one_of(GOOD_JOBS, st.tuples(GOOD_JOBS, st.sampled_from(
    ["id", "throughputs", "scale_factor", "weight", "remaining_steps", "elapsed_s", "slo_s",
     "entity", "isolated_elapsed_s", "configurations"]) | st.text(max_size=4), VALUES).map(
    lambda t: {**t[0], t[1]: t[2]}))
GOOD_PROBLEMS = st.fixed_dictionaries(
    {"cluster": st.fixed_dictionaries({"v100": st.integers(1, 3), "k80": st.integers(0, 3)}),
     "jobs": st.lists(GOOD_JOBS, max_size=4, unique_by=lambda job: job["id"])},
    optional={"prices": st.dictionaries(st.sampled_from(TYPES), st.floats(0, 5))})
PROBLEMS = st.one_of(
    GOOD_PROBLEMS,
    st.tuples(GOOD_PROBLEMS, JOBS).map(lambda t: {**t[0], "jobs": [*t[0]["jobs"], t[1]]}),
    st.tuples(GOOD_PROBLEMS, st.sampled_from(["cluster", "jobs", "prices", "previous",
                                              "entities", "pairs", "policy_state"]),
              VALUES).map(lambda t: {**t[0], t[1]: t[2]}))
POLICIES = ("max_min_fairness_perf", "max_min_fairness", "fifo", "isolated", "gandiva",
            "max_sum_throughput_perf", "finish_time_fairness_perf")


def _text(problem) -> str:
    try:
        return json.dumps(problem)
    except ValueError:   # an int of more than 4300 digits: write one by hand
        return '{"cluster": {"v100": ' + "9" * 5000 + "}}"


@FUZZ
@given(problem=PROBLEMS, policy=st.sampled_from(POLICIES))
@example(problem={"cluster": {"v100": 1}, "jobs": [{"id": "0", "throughputs": {"v100": 1},
                                                    "weight": math.nan}]},
         policy="max_min_fairness_perf")
@example(problem={"cluster": {"v100": 10**400}, "jobs": []}, policy="fifo")
@example(problem={"cluster": {"v100": 1}, "jobs": [], "pairs": 3}, policy="fifo")
def test_solve_fuzz(problem, policy, capsys, tmp_path_factory):
    path = tmp_path_factory.getbasetemp() / "problem.json"
    path.write_text(_text(problem))
    code = main(["solve", str(path), "--policy", policy])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and code in (0, 2), err
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert str(path) in lines[0] or policy in lines[0], err
    else:
        rows = json.loads(out)["allocation"]
        assert all(math.isfinite(x) and x >= 0 for row in rows.values() for x in row.values())


@pytest.mark.parametrize("raw", [b'{"cluster": {"v\xff": 1}}', b"[" * 100000,
                                 b'{"cluster": {"v100": ' + b"9" * 5000 + b"}}"])
def test_solve_refuses_bytes_json_cannot_read(raw, tmp_path, capsys):
    path = tmp_path / "problem.json"
    path.write_bytes(raw)
    assert main(["solve", str(path), "--policy", "fifo"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


_RNG = [3, list(random.Random(7).getstate()[1]), None]
_BAD_RNGS = st.sampled_from([[3, _RNG[1][:10], None], [3, [-1, *_RNG[1][1:]], None],
                             [3, [2**40, *_RNG[1][1:]], None], [3, ["a"] * 625, None],
                             [3, _RNG[1]], "rng", {"a": 1, "b": 2, "c": 3}])
_PAIRS = st.lists(st.lists(st.sampled_from(["0", "1", "2"]), min_size=2, max_size=2))
STATES = st.dictionaries(st.sampled_from(["rng", "pairs", "other"]),
                         st.one_of(st.just(_RNG), _BAD_RNGS, _PAIRS, VALUES), max_size=3)


@FUZZ
@given(state=STATES, policy=st.sampled_from(["fifo", "gandiva", "max_min_fairness_perf"]))
def test_a_policy_accepts_a_saved_state_exactly_when_its_solve_can_read_it(state, policy):
    """``Policy.check_state`` is the door for a state saved with a period (a restart's, a
    forecast's): what it refuses (in one line) the solve refuses too, what it accepts the
    solve reads, and the state a solve hands back passes it."""
    made = get_policy(policy)
    problem = Problem.from_dict({**GOOD, "policy_state": state})
    try:
        made.check_state(state)
    except ProblemError as err:
        assert "\n" not in str(err)
        with pytest.raises(ProblemError):
            made.solve(problem)
        return
    made.check_state(made.solve(problem).policy_state)
