"""The redfish power driver against sushy-tools' Redfish emulator, a real HTTP peer.

One ``sushy-emulator`` process (its fake driver) serves ten emulated
systems, one per node; like a real BMC it applies a power change a few
seconds after it was asked. The controller, over a live placement, powers
the idle nodes off through it, wakes one for pending work, and leaves a
node waking (never schedulable) while its BMC does not answer.
"""

from joule import placement_client
from powerpolicy import controller as controller_mod
from powerpolicy import metrics as metrics_mod
from tests import processes
from tests.conftest import new_uuid
from tests.functional.power import power_nodes
from tests.functional.power import redfish_emulator
from tests.functional.power.redfish_emulator import NODES


def test_the_controller_sleeps_and_wakes_nodes_through_their_bmcs(
    live_server, db, tmp_path, emulator, caplog
):
    api = placement_client.PlacementClient.for_endpoint(live_server.url)
    rps = {name: power_nodes.register(api, db, name) for name in NODES}
    password = "s3cret-" + new_uuid()[:8]
    bmc_file = redfish_emulator.bmc_file(tmp_path, emulator, password)
    now = [1000.0]
    conf = power_nodes.suspend_conf(0.1, 2, **redfish_emulator.driver_options(bmc_file))
    metrics = metrics_mod.Metrics()
    ctl = controller_mod.Controller(conf, api, metrics, clock=lambda: now[0])

    ctl.tick()
    now[0] += 120
    # 1 performance node (kept: the family's one), 9 eco: 2 stay as spares.
    asleep = {t.name for t in ctl.tick().power_transitions}
    assert len(asleep) == 7
    assert all(power_nodes.states(api)[n] == "suspending" for n in asleep)
    assert not {rps[n] for n in asleep} & power_nodes.awake_roots(api)

    # The emulated BMCs apply the power-off a few seconds later; the twins follow.
    def all_off():
        now[0] += redfish_emulator.WAIT_STEP
        ctl.tick()
        return all(power_nodes.states(api)[n] == "off" for n in asleep)

    processes.until("the BMCs to read off", all_off, timeout=90, every=1.0)
    for i, name in enumerate(NODES, 1):
        assert emulator.power(i) == ("Off" if name in asleep else "On")

    # Five whole-node instances wait: the two spares and the performance
    # node (standard work may use it) take three, two off nodes must wake.
    power_nodes.pending(api, "req-wake", 5, {"VCPU": 64})
    # The BMC does not answer while the wake is asked: the nodes stay
    # waking, never schedulable, and the failure is counted.
    emulator.stop()
    now[0] += 60
    woken = [t.name for t in ctl.tick().power_transitions if t.after == "waking"]
    assert len(woken) == 2
    assert metrics.value("joulie_power_driver_failures_total") >= 2
    assert all(power_nodes.states(api)[n] == "waking" for n in woken)
    assert not {rps[n] for n in woken} & power_nodes.awake_roots(api)
    assert password not in caplog.text  # credentials never logged

    # The BMC is back: the wake is asked again, then the nodes are on.
    emulator.start()

    def woken_on():
        now[0] += redfish_emulator.WAIT_STEP
        ctl.tick()
        return all(power_nodes.states(api)[n] == "on" for n in woken)

    processes.until("the woken nodes to be on", woken_on, timeout=90, every=1.0)
    assert {rps[n] for n in woken} <= power_nodes.awake_roots(api)
    for i, name in enumerate(NODES, 1):
        if name in woken:
            assert emulator.power(i) == "On"
    assert password not in caplog.text
    # Nothing else woke: the rest are still off.
    assert sum(s == "off" for s in power_nodes.states(api).values()) == 5
    # The emulator kept its state across the restart (its state dir): the
    # nodes still off read Off, so their twins are not stale.
    assert sum(emulator.power(i) == "Off" for i in range(1, 11)) == 5
