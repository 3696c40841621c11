"""static_partition, queue_aware_v1, rule_swap_v1."""

import dataclasses

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from powerpolicy import conf as conf_mod
from powerpolicy import policies
from powerpolicy.selection import Candidate


def _nodes(sizes):
    return [Candidate(f"{f}-{i:03d}", f) for f, size in sizes.items() for i in range(size)]


def test_static_partition_rounds_half_away_and_keeps_family_floor():
    nodes = _nodes({"cpu:a": 5})
    assert policies.static_partition(nodes, 0.5).hp_count == 3  # 2.5 -> 3
    assert policies.static_partition(nodes, 0.0).hp_count == 1  # family floor
    assert policies.static_partition([], 0.5).hp_count == 0
    two = _nodes({"cpu:a": 2, "gpu:b": 2})
    plan = policies.static_partition(two, 0.25)  # round(1) raised to 2 families
    assert plan.requested_hp_count == 1 and plan.hp_count == 2
    assert plan.profiles == {
        "cpu:a-000": "performance",
        "cpu:a-001": "eco",
        "gpu:b-000": "performance",
        "gpu:b-001": "eco",
    }


def test_queue_aware_uses_the_larger_of_base_and_need():
    nodes = _nodes({"cpu:x": 5})
    # base round(5 * 0.6) = 3; 20 consumers / 10 per node = 2 -> 3.
    assert policies.queue_aware_v1(nodes, 20, 0.6, 1, 100, 10).hp_count == 3
    # 50 consumers -> need 5.
    assert policies.queue_aware_v1(nodes, 50, 0.6, 1, 100, 10).hp_count == 5
    # 41 consumers -> ceil(4.1) = 5.
    assert policies.queue_aware_v1(nodes, 41, 0.0, 0, 100, 10).hp_count == 5
    # Bounded by hp_max ...
    assert policies.queue_aware_v1(nodes, 50, 0.6, 1, 4, 10).hp_count == 4
    # ... and hp_min, except for the one node per family floor.
    assert policies.queue_aware_v1(nodes, 0, 0.0, 2, 4, 10).hp_count == 2
    three = _nodes({"a": 2, "b": 2, "c": 2})
    assert policies.queue_aware_v1(three, 0, 0.0, 0, 1, 10).hp_count == 3


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 30), min_size=1, max_size=5),
    p=st.integers(0, 400),
    base=st.floats(0, 1),
    hp_min=st.integers(0, 40),
    hp_max=st.integers(1, 80),
    per_node=st.integers(1, 12),
)
def test_queue_aware_is_monotonic_in_p_and_bounded(sizes, p, base, hp_min, hp_max, per_node):
    nodes = _nodes({f"cpu:{i}": s for i, s in enumerate(sizes)})
    now = policies.queue_aware_v1(nodes, p, base, hp_min, hp_max, per_node)
    more = policies.queue_aware_v1(nodes, p + 1, base, hp_min, hp_max, per_node)
    assert now.performance <= more.performance  # more pressure never removes a node
    families, n = len(sizes), len(nodes)
    upper = max(families, min(max(hp_max, hp_min), n))
    lower = min(max(hp_min, families), n)
    assert lower <= now.hp_count <= upper


def test_rule_swap_alternates_the_first_two_nodes_by_name():
    nodes = [Candidate(name, "cpu:x") for name in ("c", "b", "a")]
    first = policies.rule_swap_v1(nodes, 60, now=0)
    second = policies.rule_swap_v1(nodes, 60, now=60)
    assert first.profiles == {"a": "eco", "b": "performance", "c": "performance"}
    assert second.profiles == {"a": "performance", "b": "eco", "c": "performance"}
    lone = [Candidate("solo", "cpu:x")]
    assert policies.rule_swap_v1(lone, 60, now=0).profiles == {"solo": "eco"}
    assert policies.rule_swap_v1(lone, 60, now=61).profiles == {"solo": "performance"}


def test_unknown_policy_is_refused():
    options = policies.PolicyOptions.from_conf(conf_mod.make_conf().power)
    try:
        policies.build_plan(dataclasses.replace(options, policy="greedy"), [])
    except ValueError as exc:
        assert "greedy" in str(exc)
    else:
        raise AssertionError("no error")


def test_policy_options_come_from_the_power_group_as_one_object():
    conf = conf_mod.make_conf(
        overrides={"policy": "queue_aware_v1", "queue_hp_max": 8, "queue_perf_per_hp_node": 2}
    )
    options = policies.PolicyOptions.from_conf(conf.power)
    overridden = (options.policy, options.queue_hp_max, options.queue_perf_per_hp_node)
    assert overridden == ("queue_aware_v1", 8, 2)
    defaults = (options.static_hp_frac, options.queue_hp_base_frac, options.queue_hp_min)
    assert defaults + (options.reconcile_interval,) == (0.5, 0.6, 1, 60)
    nodes = _nodes({"cpu:x": 10})
    # Base round(10 * 0.6) = 6 beats ceil(7 / 2) = 4; queue_hp_max bounds 30 / 2 = 15.
    assert policies.build_plan(options, nodes, demand=7).hp_count == 6
    assert policies.build_plan(options, nodes, demand=30).hp_count == 8
    swap = dataclasses.replace(options, policy="rule_swap_v1")
    assert policies.build_plan(swap, nodes, now=0) == policies.rule_swap_v1(nodes, 60, now=0)
