"""The redfish power driver against sushy-tools' Redfish emulator, a real HTTP peer.

One ``sushy-emulator`` process (its fake driver) serves ten emulated
systems, one per node; like a real BMC it applies a power change a few
seconds after it was asked. The controller, over a live placement, powers
the idle nodes off through it, wakes one for pending work, and leaves a
node waking (never schedulable) while its BMC does not answer.
"""

import json
import os
import signal
import subprocess
import sys

import pytest
import requests

from joule import placement_client
from powerpolicy import conf as conf_mod
from powerpolicy import controller as controller_mod
from powerpolicy import metrics as metrics_mod
from tests import processes
from tests.conftest import new_uuid
from tests.functional.power import power_nodes

NODES = [f"cn-{i:02d}" for i in range(1, 11)]


def _system_uuid(i):
    return f"5ee0c0de-0000-4000-8000-{i:012d}"


class Emulator:
    """sushy-emulator on a free port, started by its console script, stopped by PID."""

    def __init__(self, tmp_path):
        self.port = processes.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = tmp_path / "sushy.conf"
        systems = [
            {
                "uuid": _system_uuid(i),
                "name": name,
                "power_state": "On",
                "external_notifier": False,
                "nics": [],
            }
            for i, name in enumerate(NODES, 1)
        ]
        self.config.write_text(
            "SUSHY_EMULATOR_FAKE_DRIVER = True\n"
            f"SUSHY_EMULATOR_FAKE_SYSTEMS = {systems!r}\n"
            f"SUSHY_EMULATOR_STATE_DIR = {str(tmp_path / 'bmc-state')!r}\n"
        )
        self.log = tmp_path / "sushy.log"
        self.proc = None

    def start(self):
        script = os.path.join(os.path.dirname(sys.executable), "sushy-emulator")
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [script, "--config", str(self.config), "--interface", "127.0.0.1"]
                + ["--port", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )

        def answers():
            assert self.proc.poll() is None, self.log.read_text()[-2000:]
            try:
                return requests.get(self.url + "/redfish/v1/Systems", timeout=2).ok
            except requests.RequestException:
                return False

        processes.until("the Redfish emulator", answers, timeout=30)
        return self

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

    def power(self, i):
        body = requests.get(f"{self.url}/redfish/v1/Systems/{_system_uuid(i)}", timeout=5).json()
        return body["PowerState"]


@pytest.fixture
def emulator(tmp_path):
    emu = Emulator(tmp_path).start()
    yield emu
    emu.stop()


def test_the_controller_sleeps_and_wakes_nodes_through_their_bmcs(
    live_server, db, tmp_path, emulator, caplog
):
    api = placement_client.PlacementClient.for_endpoint(live_server.url)
    rps = {name: power_nodes.register(api, db, name) for name in NODES}
    password = "s3cret-" + new_uuid()[:8]
    bmcs = {
        name: {
            "address": emulator.url,
            "system": f"/redfish/v1/Systems/{_system_uuid(i)}",
            "username": "admin",
            "password": password,
        }
        for i, name in enumerate(NODES, 1)
    }
    bmc_file = tmp_path / "bmcs.json"
    bmc_file.write_text(json.dumps(bmcs))
    now = [1000.0]
    conf = conf_mod.make_conf(
        overrides={
            "static_hp_frac": 0.1,
            "suspend_enabled": True,
            "suspend_after": 60,
            "min_spare_nodes": 2,
            "power_driver": "redfish",
            "bmc_file": str(bmc_file),
            "redfish_off_action": "ForceOff",
        }
    )
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
        now[0] += 60
        ctl.tick()
        return all(power_nodes.states(api)[n] == "off" for n in asleep)

    processes.until("the BMCs to read off", all_off, timeout=40, every=1.0)
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
        now[0] += 60
        ctl.tick()
        return all(power_nodes.states(api)[n] == "on" for n in woken)

    processes.until("the woken nodes to be on", woken_on, timeout=40, every=1.0)
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
