"""The cluster YAML's scheduling settings (``gavelsched/daemon/settings.py``): ``entities``,
``policy_options`` and ``prices`` as ``simulate --entities/--option/--prices/--price-trace``
take them. Every refusal is one ``SettingsError`` line naming the key; the settings reach
the policy (a budget, prices, entities); any YAML value raises nothing else."""

from __future__ import annotations

import json
import logging
import math

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gavelsched.daemon.settings import (SETTINGS_KEYS, ClusterSettings, SettingsError,
                                        parse_settings)
from policies import Entity, Problem, policy_names

WF = "max_min_fairness_water_filling_perf"
BUDGET = "min_makespan_with_budget"
COST = "max_sum_throughput_normalized_by_cost_perf"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A folder of price trace files, good and bad."""
    folder = tmp_path_factory.mktemp("prices")
    (folder / "spot.json").write_text(json.dumps({"v100": [[0, 1.0], [3600, 10.0]]}))
    (folder / "spot.yaml").write_text("v100:\n  - [0, 1.0]\n  - [3600, 10.0]\n")
    (folder / "nan.json").write_text('{"v100": [[0, NaN]]}')
    (folder / "inf.yaml").write_text("v100: [[0, .inf]]\n")
    (folder / "negative.json").write_text('{"v100": [[0, -1]]}')
    (folder / "latin1.json").write_bytes(b'{"v100": [[0, 1.0]], "caf\xe9": [[0, 1]]}')
    (folder / "bad.yaml").write_text("v100: [[0, 1.0]\n")
    (folder / "bad.json").write_text('{"v100": [[0, 1.0]')
    (folder / "twice.json").write_text('{"v100": [[0, 1.0], [0, 2.0]]}')
    (folder / "shape.json").write_text('{"v100": [1, 2]}')
    return folder


def parse(data, policy=WF, base=None):
    return parse_settings(data, policy=policy, base=base or ".", name="cluster.yaml")


@pytest.mark.parametrize("policy, data, key", [
    # entities
    (WF, {"entities": ["team-a"]}, "entities"),
    (WF, {"entities": "team-a"}, "entities"),
    (WF, {"entities": {"team-a": {"weight": math.nan}}}, "entities.team-a.weight"),
    (WF, {"entities": {"team-a": {"weight": math.inf}}}, "entities.team-a.weight"),
    (WF, {"entities": {"team-a": {"weight": -1}}}, "entities.team-a.weight"),
    (WF, {"entities": {"team-a": {"weight": 0}}}, "entities.team-a.weight"),
    (WF, {"entities": {"team-a": 0}}, "entities.team-a.weight"),
    (WF, {"entities": {"team-a": math.nan}}, "entities.team-a.weight"),
    (WF, {"entities": {"team-a": {"weight": "heavy"}}}, "entities.team-a.weight"),
    (WF, {"entities": {"team-a": {"weight": 1e9}}}, "entities.team-a.weight"),
    (WF, {"entities": {"team-a": True}}, "entities.team-a"),
    (WF, {"entities": {"team-a": None}}, "entities.team-a"),
    (WF, {"entities": {"team-a": [1]}}, "entities.team-a"),
    (WF, {"entities": {"team-a": {"policy": "lottery"}}}, "entities.team-a.policy"),
    (WF, {"entities": {"team-a": {"policy": ["fifo"]}}}, "entities.team-a.policy"),
    (WF, {"entities": {"team-a": {"max_gpus": 0}}}, "entities.team-a.max_gpus"),
    (WF, {"entities": {"team-a": {"max_gpus": -2}}}, "entities.team-a.max_gpus"),
    (WF, {"entities": {"team-a": {"max_gpus": 1.5}}}, "entities.team-a.max_gpus"),
    (WF, {"entities": {"team-a": {"max_gpus": 2.0}}}, "entities.team-a.max_gpus"),
    (WF, {"entities": {"team-a": {"max_gpus": True}}}, "entities.team-a.max_gpus"),
    (WF, {"entities": {"team-a": {"max_gpus": "4"}}}, "entities.team-a.max_gpus"),
    (WF, {"entities": {"team-a": {"max_gpus": 2**70}}}, "entities.team-a.max_gpus"),
    (WF, {"entities": {"team-a": {"weigth": 2}}}, "entities.team-a"),
    (WF, {"entities": {"": 1}}, "entities"),
    (WF, {"entities": {"a\nb": 1}}, "entities"),
    (WF, {"entities": {7: 1}}, "entities"),
    # policy options
    (WF, {"policy_options": ["budget=5"]}, "policy_options"),
    ("max_min_fairness_perf", {"policy_options": {"budget": 5}}, "policy_options.budget"),
    (BUDGET, {}, "policy_options.budget"),
    (BUDGET, {"policy_options": {"budget": -1}}, "policy_options.budget"),
    (BUDGET, {"policy_options": {"budget": 0}}, "policy_options.budget"),
    (BUDGET, {"policy_options": {"budget": math.nan}}, "policy_options.budget"),
    (BUDGET, {"policy_options": {"budget": "lots"}}, "policy_options.budget"),
    (BUDGET, {"policy_options": {"budget": [5]}}, "policy_options.budget"),
    (BUDGET, {"policy_options": {"search": "exact", "budget": -1}}, "policy_options.budget"),
    (BUDGET, {"policy_options": {"search": "guess", "budget": 5}}, "policy_options.search"),
    ("max_min_fairness_perf", {"policy_options": {"solver": "NO_SUCH_SOLVER"}},
     "policy_options.solver"),
    ("max_min_fairness_perf", {"policy_options": {"solver": 5}}, "policy_options.solver"),
    (WF, {"policy_options": {"max_iterations": "many"}}, "policy_options.max_iterations"),
    (WF, {"policy_options": {"prune": "yes"}}, "policy_options.prune"),
    (WF, {"policy_options": {"partitions": "two"}}, "policy_options.partitions"),
    (WF, {"policy_options": {"partitions": 2, "processes": 0}}, "policy_options.processes"),
    ("fifo", {"policy_options": {"type_choice": "dice"}}, "policy_options.type_choice"),
    ("fifo", {"policy_options": {"seed": -1}}, "policy_options.seed"),
    ("fifo", {"policy_options": {"seed": "x"}}, "policy_options.seed"),
    (COST, {"policy_options": {"cost_unit": "gpu"}}, "policy_options.cost_unit"),
    # prices
    (COST, {"prices": 5}, "prices"),
    (COST, {"prices": ["v100=1"]}, "prices"),
    (COST, {"prices": {"v100": -1}}, "prices.v100"),
    (COST, {"prices": {"v100": math.nan}}, "prices.v100"),
    (COST, {"prices": {"v100": math.inf}}, "prices.v100"),
    (COST, {"prices": {"v100": 1e308}}, "prices.v100"),          # (a run's cost: inf)
    (COST, {"prices": {"v100": "cheap"}}, "prices.v100"),
    (COST, {"prices": {"v100": True}}, "prices.v100"),
    (COST, {"prices": {"": 1.0}}, "prices"),
    (COST, {"prices": "missing.json"}, "prices.trace"),
    (COST, {"prices": ""}, "prices.trace"),
    (COST, {"prices": "."}, "prices.trace"),
    (COST, {"prices": "nan.json"}, "prices.trace"),
    (COST, {"prices": "inf.yaml"}, "prices.trace"),
    (COST, {"prices": "negative.json"}, "prices.trace"),
    (COST, {"prices": "latin1.json"}, "prices.trace"),
    (COST, {"prices": "bad.yaml"}, "prices.trace"),
    (COST, {"prices": "bad.json"}, "prices.trace"),
    (COST, {"prices": "twice.json"}, "prices.trace"),
    (COST, {"prices": "shape.json"}, "prices.trace"),
    (COST, {"prices": {"trace": "nan.json", "k80": 1.0}}, "prices.trace"),
    # the policy itself
    ("no_such_policy", {}, "policy"),
])
def test_every_refusal_is_one_line_naming_the_key(files, policy, data, key):
    with pytest.raises(SettingsError) as err:
        parse(data, policy, base=files)
    line = str(err.value)
    assert "\n" not in line and line.startswith("cluster.yaml: ")
    named = line.removeprefix("cluster.yaml: ")
    assert named.startswith(key) and named[len(key)] in ": ", line


def test_nothing_given_is_nothing_set():
    got = parse({"listen": "127.0.0.1:0"}, "max_min_fairness_perf")
    assert got == ClusterSettings()
    assert got.entity_names == () and got.prices_at(0.0) == {} and got.price_trace is None
    assert SETTINGS_KEYS == ("entities", "policy_options", "prices")


def test_entities_in_both_forms_reach_the_policy():
    got = parse({"entities": {"team-a": {"weight": 2, "policy": "fifo", "max_gpus": 4},
                              "team-b": 1.5, "team-c": {}}})
    assert dict(got.entities) == {"team-a": Entity("team-a", 2.0, "fifo", 4),
                                  "team-b": Entity("team-b", 1.5),
                                  "team-c": Entity("team-c")}
    assert got.entity_names == ("team-a", "team-b", "team-c")
    assert got.entity_caps == {"team-a": 4}
    with pytest.raises(TypeError):
        got.entities["team-d"] = Entity("team-d")   # read-only


def test_entities_a_policy_ignores_are_kept_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="gavelsched.daemon.settings"):
        got = parse({"entities": {"team-a": {"max_gpus": 2}}}, "max_min_fairness_perf")
    assert got.entity_caps == {"team-a": 2}
    assert "does not read entities" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="gavelsched.daemon.settings"):
        parse({"entities": {"team-a": 1}}, WF)
    assert caplog.text == ""


def test_a_budget_reaches_min_makespan_with_budget():
    got = parse({"policy_options": {"budget": 250}}, BUDGET)
    assert dict(got.policy_options) == {"budget": 250}
    assert got.policy(BUDGET).budget == 250


def test_the_seed_goes_where_the_policy_declares_it():
    fifo = parse({}, "fifo")
    assert fifo.policy("fifo", seed=7).seed == 7
    assert parse({"policy_options": {"seed": 3}}, "fifo").policy("fifo", seed=7).seed == 3
    assert parse({}, WF).policy(WF, seed=7).name == WF   # no seed option: none given


def cheapest_type(settings_: ClusterSettings, t: float) -> str:
    """The type the cost policy (throughput per dollar, chapter 6) gives a job that runs
    twice as fast on a v100 as on a k80, at the prices in force at ``t``."""
    problem = Problem.from_dict({
        "cluster": {"v100": 1, "k80": 1}, "prices": settings_.prices_at(t),
        "jobs": [{"id": "0", "throughputs": {"v100": 2.0, "k80": 1.0}}]})
    row = settings_.policy(COST).solve(problem).allocation["0"]
    return max(row, key=row.get)


@pytest.mark.parametrize("prices", [
    "spot.json", "spot.yaml", {"trace": "spot.json", "k80": 1.0}])
def test_prices_and_their_trace_reach_a_cost_policy(files, prices):
    """The v100 costs $1/h, then $10/h from t = 3600 s: the cost policy moves the job from
    the v100 (2 steps per dollar) to the k80 (1 step per dollar, against 0.2)."""
    if not isinstance(prices, dict):
        prices = {"trace": prices, "k80": 1.0}
    got = parse({"prices": prices}, COST, base=files)
    assert got.price_trace_path == files / prices["trace"]
    assert got.prices_at(0.0) == {"v100": 1.0, "k80": 1.0}
    assert got.prices_at(4000.0) == {"v100": 10.0, "k80": 1.0}
    assert got.next_price_change_after(0.0) == 3600.0
    assert cheapest_type(got, 0.0) == "v100"
    assert cheapest_type(got, 4000.0) == "k80"


def test_a_trace_alone_and_static_prices_alone(files):
    alone = parse({"prices": "spot.json"}, COST, base=files)
    assert dict(alone.prices) == {} and alone.prices_at(0.0) == {"v100": 1.0}
    static = parse({"prices": {"v100": 2.5, "k80": 0}}, COST)
    assert static.prices_at(1e9) == {"v100": 2.5, "k80": 0.0}
    assert static.price_trace is None and static.next_price_change_after(0.0) is None


def test_a_yaml_file_reads_as_the_simulator_flags_do(files):
    text = f"""
        policy: {BUDGET}
        entities:
          research: {{weight: 2, policy: fifo, max_gpus: 8}}
          prod: 1
        policy_options: {{budget: 500}}
        prices: {{trace: spot.yaml, k80: 0.9}}
    """
    data = yaml.safe_load(text)
    got = parse(data, data["policy"], base=files)
    assert got.entity_caps == {"research": 8} and got.policy(BUDGET).budget == 500
    assert got.prices_at(0.0) == {"v100": 1.0, "k80": 0.9}


# ---- fuzz: whatever the YAML holds, SettingsError or settings ------------------------------

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(),
    st.text(alphabet=st.characters(blacklist_characters="/\\"), max_size=12),
    st.sampled_from(["fifo", "fairness", "exact", "bisection", "spot.json", "nan.json",
                     "budget", "weight", "max_gpus", "policy", "trace", "v100"]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.one_of(SCALARS, st.sampled_from(
        ["weight", "policy", "max_gpus", "budget", "search", "solver", "seed", "trace",
         "v100", "k80", "team-a", "prune", "partitions", "type_choice"])), inner,
        max_size=4)), max_leaves=12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.dictionaries(st.sampled_from(SETTINGS_KEYS), VALUES, max_size=3),
       policy=st.sampled_from(policy_names()))
def test_any_value_raises_only_settings_error(files, data, policy):
    try:
        got = parse(data, policy, base=files)
    except SettingsError as err:
        assert "\n" not in str(err)
        return
    assert isinstance(got, ClusterSettings)
    got.policy(policy)
    got.prices_at(0.0)
