"""End to end: the controller suspends idle nodes and wakes them for pending work.

Against a live placement over HTTP, with the ``command`` power driver
running real programs (shell scripts that keep each node's power in a file,
as an operator's IPMI wrappers would). Nodes asked to power off are left out
of the candidates placement gives the scheduler; a pending request that the
nodes on cannot hold wakes an off node; a driver that fails leaves the node
waking (never schedulable) and is asked again.
"""

import os
import stat

from joule import placement_client
from joule.placement_client import url_path
from powerpolicy import conf as conf_mod
from powerpolicy import controller as controller_mod
from powerpolicy import metrics as metrics_mod
from tests.conftest import new_uuid
from tests.functional.power import power_nodes


def _script(path, body):
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def _programs(tmp_path):
    bmc = tmp_path / "bmc"
    bmc.mkdir()
    return bmc, {
        "suspend_program": _script(tmp_path / "off.sh", f'echo off > "{bmc}/$1"'),
        "resume_program": _script(
            tmp_path / "on.sh",
            f'[ -e "{bmc}/broken" ] && {{ echo "BMC timed out" >&2; exit 1; }}\n'
            f'echo on > "{bmc}/$1"',
        ),
        "state_program": _script(tmp_path / "state.sh", f'cat "{bmc}/$1" 2>/dev/null || echo on'),
    }


def test_idle_nodes_sleep_and_wake_for_pending_work(live_server, db, tmp_path):
    api = placement_client.PlacementClient.for_endpoint(live_server.url)
    rps = {name: power_nodes.register(api, db, name) for name in ("cn-1", "cn-2", "cn-3", "cn-4")}
    bmc, programs = _programs(tmp_path)
    now = [1000.0]
    conf = power_nodes.suspend_conf(0.25, 1, **programs)
    metrics = metrics_mod.Metrics()
    ctl = controller_mod.Controller(conf, api, metrics, clock=lambda: now[0])

    # A consumer runs on cn-2 (standard work): it is never suspended.
    busy = new_uuid()
    api.put_allocations(busy, {"allocations": {rps["cn-2"]: {"resources": {"VCPU": 4}}}}, "p", "u")

    # First tick: profiles written, idleness starts counting; nobody sleeps yet.
    first = ctl.tick()
    assert first.power_transitions == []
    assert set(power_nodes.states(api).values()) == {None}

    # Past suspend_after: of the idle eco nodes (cn-3, cn-4: cn-1 is the
    # family's one performance node, cn-2 is busy) one stays on as the spare.
    now[0] += 120
    second = ctl.tick()
    asleep = [t.name for t in second.power_transitions]
    assert len(asleep) == 1 and asleep[0] in ("cn-3", "cn-4")
    sleeper = asleep[0]
    assert power_nodes.states(api)[sleeper] == "suspending"
    assert (bmc / sleeper).read_text().strip() == "off"  # the driver was asked
    traits = api.request("GET", url_path("resource_providers", rps[sleeper], "traits")).json()
    assert "CUSTOM_POWER_STATE_SUSPENDING" in traits["traits"]
    # The scheduler's query leaves it out from now on.
    assert rps[sleeper] not in power_nodes.awake_roots(api)
    assert len(power_nodes.awake_roots(api)) == 3

    # The BMC reads it off: the twin follows.
    now[0] += 60
    third = ctl.tick()
    assert [(t.name, t.after) for t in third.power_transitions] == [(sleeper, "off")]
    assert metrics.value("joulie_power_nodes", state="off") == 1
    assert metrics.value("joulie_power_nodes", state="on") == 3

    # Three whole-node instances wait (pending build requests): the spare
    # and the performance node (standard work may use it) take two, the
    # sleeper must wake for the third. Its BMC fails first.
    (bmc / "broken").write_text("")
    power_nodes.pending(api, "req-big", 3, {"VCPU": 64, "MEMORY_MB": 1024})
    now[0] += 60
    fourth = ctl.tick()
    assert [(t.name, t.after) for t in fourth.power_transitions] == [(sleeper, "waking")]
    assert "wak" in fourth.power_transitions[0].reason
    assert power_nodes.states(api)[sleeper] == "waking"
    assert metrics.value("joulie_power_driver_failures_total") == 1
    assert rps[sleeper] not in power_nodes.awake_roots(api)  # waking is not schedulable

    # Still failing: the node stays waking and the wake is asked again.
    now[0] += 60
    assert ctl.tick().power_transitions == []
    assert metrics.value("joulie_power_driver_failures_total") == 2
    assert power_nodes.states(api)[sleeper] == "waking"

    # The BMC answers again: the wake goes through, then the node is on.
    os.unlink(bmc / "broken")
    now[0] += 60
    ctl.tick()
    assert (bmc / sleeper).read_text().strip() == "on"
    now[0] += 60
    fifth = ctl.tick()
    assert (sleeper, "on") in [(t.name, t.after) for t in fifth.power_transitions]
    assert power_nodes.states(api)[sleeper] == "on"
    assert rps[sleeper] in power_nodes.awake_roots(api)
    assert metrics.value("joulie_power_transitions_total", from_state="waking", to_state="on") == 1


def test_suspend_off_by_default_writes_no_power_state(live_server, db):
    api = placement_client.PlacementClient.for_endpoint(live_server.url)
    for name in ("cn-1", "cn-2"):
        power_nodes.register(api, db, name)
    ctl = controller_mod.Controller(conf_mod.make_conf(), api, clock=lambda: 1e9)
    for _ in range(3):
        assert ctl.tick().power_transitions == []
    assert all("power_state" not in n["twin"] for n in api.list_nodes())
