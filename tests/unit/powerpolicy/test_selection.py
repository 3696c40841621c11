"""performance_set: the per-family Sainte-Lague split and its promised properties."""

import functools
import hashlib
import pathlib
import random
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from joule import inventory
from powerpolicy import policies
from powerpolicy import selection
from powerpolicy.selection import Candidate

# The cluster inventories ship inside the package.
DATA = pathlib.Path(selection.__file__).parent / "data"
PACKAGED_41 = DATA / "cluster-nodes-41.yaml"
FAMILIES = ["cpu:A", "cpu:B", "gpu:X", "gpu:Y", "gpu:Z"]


@functools.cache
def _load_5k():
    path = DATA / "cluster-nodes-5k.yaml"
    return tuple(Candidate(n.name, n.family) for n in inventory.load(path))


def _by_family(nodes, chosen):
    out = {}
    for node in nodes:
        entry = out.setdefault(node.family, [0, 0])
        entry[0] += 1
        entry[1] += node.name in chosen
    return out


# Random inventories: up to 6 families, up to 40 nodes each, random current profiles.
@st.composite
def inventories(draw, max_family=40):
    sizes = draw(st.lists(st.integers(1, max_family), min_size=1, max_size=6))
    nodes = []
    for f, size in enumerate(sizes):
        for i in range(size):
            profile = draw(st.sampled_from([None, "performance", "eco"]))
            nodes.append(Candidate(f"n{f}-{i:03d}", FAMILIES[f % 5] + str(f), profile))
    return nodes


BOUNDED = settings(max_examples=60, deadline=None)


def test_5k_inventory_keeps_a_fifth_of_every_family():
    nodes = _load_5k()
    assert len(nodes) == 5000
    plan = policies.static_partition(nodes, 0.2)
    assert plan.requested_hp_count == 1000 and plan.hp_count == 1000
    assert plan.families(nodes) == {
        "cpu:AMD EPYC 9375F 32-Core Processor": {"nodes": 250, "performance": 50},
        "cpu:AMD EPYC 9655 96-Core Processor": {"nodes": 500, "performance": 100},
        "cpu:AMD EPYC 9965 192-Core Processor": {"nodes": 250, "performance": 50},
        "gpu:AMD Instinct MI300X": {"nodes": 240, "performance": 48},
        "gpu:AMD Radeon PRO W7900": {"nodes": 730, "performance": 146},
        "gpu:NVIDIA H100 80GB HBM3": {"nodes": 730, "performance": 146},
        "gpu:NVIDIA H100 NVL": {"nodes": 1450, "performance": 290},
        "gpu:NVIDIA L40S": {"nodes": 850, "performance": 170},
    }
    # With no current profiles, the first nodes by name of each family are picked.
    assert "kwok-h100-nvl-0" in plan.performance and "kwok-h100-nvl-99" not in plan.performance


# Joulie's exp02 inventories, byte for byte: a change to them changes every
# number measured on them (docs/benchmarks.md), so it must be deliberate.
EXP02_SHA256 = {
    "cluster-nodes-41.yaml": "2767f2a02e9492f652d87dfdb8285728dfcce05f70c1df413814e0f5b49762c1",
    "cluster-nodes-5k.yaml": "0612657c0ac839f260a584d9ddf9f01bca3112bc7065038978d55850609a8e6c",
}


@pytest.mark.parametrize("name", sorted(EXP02_SHA256))
def test_packaged_inventories_are_joulies_exp02_files(name):
    assert hashlib.sha256((DATA / name).read_bytes()).hexdigest() == EXP02_SHA256[name]


def test_packaged_41_node_inventory():
    nodes = [Candidate(n.name, n.family) for n in inventory.load(PACKAGED_41)]
    assert len(nodes) == 41 and len({n.family for n in nodes}) == 8


def test_round_is_half_away_from_zero():
    assert selection.round_half_away(2.5) == 3
    assert selection.round_half_away(3.5) == 4
    assert selection.round_half_away(2.4999) == 2
    assert selection.scaled_count(5, 0.5) == 3  # round() would give 2
    assert selection.scaled_count(41, 0.2) == 8


def test_family_never_gets_more_slots_than_nodes():
    nodes = [Candidate("big-0", "cpu:big")] + [Candidate(f"s-{i}", "cpu:small") for i in range(2)]
    slots = selection.family_slots({"cpu:big": 1, "cpu:small": 2}, 3)
    assert slots == {"cpu:big": 1, "cpu:small": 2}
    assert selection.performance_set(nodes, 99) == {"big-0", "s-0", "s-1"}


def test_ties_go_to_the_smaller_family_key():
    nodes = [Candidate(f"{f}-{i}", f) for f in ("cpu:b", "cpu:a") for i in range(3)]
    # 3 slots for two equal families: the third goes to cpu:a.
    assert selection.family_slots({"cpu:b": 3, "cpu:a": 3}, 3) == {"cpu:a": 2, "cpu:b": 1}
    assert selection.performance_set(nodes, 3) == {"cpu:a-0", "cpu:a-1", "cpu:b-0"}


@BOUNDED
@given(nodes=inventories(), hp=st.integers(0, 300))
def test_family_floor_and_sainte_lague_proportionality(nodes, hp):
    chosen = selection.performance_set(nodes, hp)
    counts = _by_family(nodes, chosen)
    n_families = len(counts)
    assert len(chosen) == min(max(hp, n_families), len(nodes))
    for size, slots in counts.values():
        assert 1 <= slots <= size
    # The divisor-method condition: no family that could take one more slot
    # deserves it more than any family above the floor deserved its last one.
    can_grow = [Fraction(size, 2 * slots + 1) for size, slots in counts.values() if slots < size]
    above_floor = [Fraction(size, 2 * slots - 1) for size, slots in counts.values() if slots > 1]
    if can_grow and above_floor:
        assert max(can_grow) <= min(above_floor)


@BOUNDED
@given(nodes=inventories(), data=st.data())
def test_house_monotone_one_more_slot_moves_exactly_one_node(nodes, data):
    families = len({n.family for n in nodes})
    if families == len(nodes):
        return
    hp = data.draw(st.integers(families, len(nodes) - 1))
    smaller = selection.performance_set(nodes, hp)
    larger = selection.performance_set(nodes, hp + 1)
    assert smaller < larger and len(larger - smaller) == 1


@BOUNDED
@given(nodes=inventories(), hp=st.integers(0, 300))
def test_second_tick_at_constant_demand_moves_nothing(nodes, hp):
    first = selection.performance_set(nodes, hp)
    relabelled = [
        Candidate(n.name, n.family, "performance" if n.name in first else "eco") for n in nodes
    ]
    assert selection.performance_set(relabelled, hp) == first


@BOUNDED
@given(nodes=inventories(), hp=st.integers(0, 300), seed=st.integers(0, 2**32))
def test_input_order_is_irrelevant(nodes, hp, seed):
    shuffled = list(nodes)
    random.Random(seed).shuffle(shuffled)
    assert selection.performance_set(shuffled, hp) == selection.performance_set(nodes, hp)


# --- where Joulie's own code falls short of the seed ---------------------------


def test_selection_follows_family_size_not_a_ranking():
    """Joulie gap: its selection ignored family size (whole slots to one family)."""
    nodes = [Candidate(f"gpu-{i:02d}", "gpu:H100") for i in range(30)]
    nodes += [Candidate(f"cpu-{i:02d}", "cpu:EPYC") for i in range(10)]
    counts = _by_family(nodes, selection.performance_set(nodes, 8))
    assert counts == {"gpu:H100": [30, 6], "cpu:EPYC": [10, 2]}


def test_selection_keeps_nodes_already_in_performance():
    """Joulie gap: its selection ignored the current profile labels."""
    nodes = [
        Candidate(f"n-{i}", "cpu:x", "performance" if i in (3, 7) else "eco") for i in range(10)
    ]
    assert selection.performance_set(nodes, 2) == {"n-3", "n-7"}
    # Growing by one adds the first remaining node by name, keeps the others.
    assert selection.performance_set(nodes, 3) == {"n-0", "n-3", "n-7"}


def test_selection_does_not_depend_on_input_order():
    """Joulie gap: its selection depended on the order of the node list."""
    nodes = _load_5k()
    reversed_nodes = list(reversed(nodes))
    assert selection.performance_set(nodes, 1000) == selection.performance_set(reversed_nodes, 1000)
