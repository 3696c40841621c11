"""The packing ceiling: the idle floor of awake nodes beyond the fewest the work needs."""

import pytest

from simulator import ceiling

NODE = {"VCPU": 64, "MEMORY_MB": 512 * 1024, "PGPU": 4}
IDLE, OFF = 300.0, 10.0


def _family(nodes=4):
    c = ceiling.PackingCeiling(off_watts=OFF)
    for _ in range(nodes):
        c.add_node("gpu:x", NODE, IDLE)
    return c


def _work(vcpus=0, memory_mb=0, gpus=0):
    return {"VCPU": vcpus, "MEMORY_MB": memory_mb, "PGPU": gpus}


def test_every_awake_node_is_sleepable_while_no_work_runs():
    c = _family()
    assert c.watts == pytest.approx(4 * (IDLE - OFF))


def test_the_work_needs_the_fewest_nodes_its_largest_resource_class_fills():
    c = _family()
    # 70 cores need two nodes of 64, however they are spread.
    c.allocate("gpu:x", _work(vcpus=70))
    assert c.watts == pytest.approx(2 * (IDLE - OFF))
    # Memory binds once it needs more nodes than the cores: just over two nodes' worth.
    c.allocate("gpu:x", _work(memory_mb=2 * 512 * 1024 + 1))
    assert c.watts == pytest.approx(1 * (IDLE - OFF))
    # Whole-node GPU work: four boards are one node's, sixteen all four.
    c.allocate("gpu:x", _work(gpus=16))
    assert c.watts == pytest.approx(0.0)
    c.allocate("gpu:x", _work(vcpus=70, memory_mb=2 * 512 * 1024 + 1, gpus=16), sign=-1)
    assert c.watts == pytest.approx(4 * (IDLE - OFF))


def test_a_node_already_off_is_not_counted_again():
    c = _family()
    c.allocate("gpu:x", _work(gpus=4))
    c.power_changed("gpu:x", was_off=False, is_off=True)
    assert c.watts == pytest.approx(2 * (IDLE - OFF))
    # Suspending and waking nodes still draw their idle floor: only off counts.
    c.power_changed("gpu:x", was_off=True, is_off=True)
    assert c.watts == pytest.approx(2 * (IDLE - OFF))
    c.power_changed("gpu:x", was_off=True, is_off=False)
    assert c.watts == pytest.approx(3 * (IDLE - OFF))


def test_families_are_bounded_apart():
    # Free cores on one family never make room for another's work.
    c = _family(nodes=2)
    c.add_node("cpu:y", {"VCPU": 192, "MEMORY_MB": 1536 * 1024, "PGPU": 0}, 140.0)
    c.allocate("gpu:x", _work(vcpus=100))
    assert c.watts == pytest.approx(140.0 - OFF)


def test_energy_and_held_share_are_integrated_over_time():
    c = _family(nodes=2)
    c.advance(600)  # both sleepable
    c.allocate("gpu:x", _work(vcpus=32, gpus=4))
    c.advance(1800)  # one needed
    c.allocate("gpu:x", _work(vcpus=32, gpus=4), sign=-1)
    c.advance(0)  # no time, no energy
    assert c.energy_j == pytest.approx((2 * 600 + 1800) * (IDLE - OFF))
    share = c.held_share()
    # A quarter of the cores and half the boards for three quarters of the time.
    assert share["VCPU"] == pytest.approx(0.25 * 0.75)
    assert share["PGPU"] == pytest.approx(0.5 * 0.75)
    assert share["MEMORY_MB"] == 0.0


def test_no_time_no_share():
    assert ceiling.PackingCeiling(OFF).held_share() == {"VCPU": 0.0, "MEMORY_MB": 0.0, "PGPU": 0.0}
