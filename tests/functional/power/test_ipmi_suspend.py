"""The ipmi power driver against IPMI BMCs that are real UDP peers.

Each of four nodes has its BMC: pyghmi's BMC server as its own process
(tests/functional/power/ipmi_bmc.py), its power kept in a file. The
controller, over a live placement, powers the idle nodes off through RMCP+
sessions, wakes one for pending work, and leaves a node waking (never
schedulable) while its BMC refuses the credentials.
"""

import json
import os
import signal
import subprocess
import sys

import pytest

from joule import placement_client
from powerpolicy import conf as conf_mod
from powerpolicy import controller as controller_mod
from powerpolicy import ipmi_driver
from powerpolicy import metrics as metrics_mod
from tests import processes
from tests.conftest import new_uuid
from tests.functional.power import power_nodes

NODES = ("cn-1", "cn-2", "cn-3", "cn-4")


class Bmcs:
    """One ``ipmi_bmc`` process per node on a free UDP port, stopped by PID."""

    def __init__(self, tmp_path, password):
        self.tmp = tmp_path
        self.password = password
        self.ports = {name: processes.free_port() for name in NODES}
        self.procs = {}

    def state_file(self, name):
        return self.tmp / f"bmc-{name}.power"

    def power(self, name):
        return self.state_file(name).read_text().strip()

    def start(self):
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
        for name, port in self.ports.items():
            log = open(self.tmp / f"bmc-{name}.log", "ab")
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "tests.functional.power.ipmi_bmc", "--port", str(port)]
                + ["--state", str(self.state_file(name)), "--password", self.password],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=root,
            )
        processes.until(
            "the BMCs to start",
            lambda: all(self.state_file(n).exists() for n in NODES),
            timeout=30,
        )
        return self

    def stop(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def bmc_file(self, wrong_password_for=()):
        path = self.tmp / "bmcs.json"
        path.write_text(
            json.dumps(
                {
                    name: {
                        "address": "127.0.0.1",
                        "port": port,
                        "username": "admin",
                        "password": "wrong" if name in wrong_password_for else self.password,
                    }
                    for name, port in self.ports.items()
                }
            )
        )
        return str(path)


@pytest.fixture
def bmcs(tmp_path):
    b = Bmcs(tmp_path, "ipmi-" + new_uuid()[:8]).start()
    yield b
    b.stop()


def _driver(bmc_file):
    return ipmi_driver.IpmiDriver(conf_mod.make_conf(overrides={"bmc_file": bmc_file}))


def _controller(api, bmc_file, now, metrics):
    conf = power_nodes.suspend_conf(
        0.25, 1, power_driver="ipmi", bmc_file=bmc_file, ipmi_off_action="shutdown"
    )
    return controller_mod.Controller(conf, api, metrics, clock=lambda: now[0])


def test_the_controller_sleeps_and_wakes_nodes_over_ipmi(live_server, db, bmcs, caplog):
    api = placement_client.PlacementClient.for_endpoint(live_server.url)
    rps = {name: power_nodes.register(api, db, name) for name in NODES}
    now = [1000.0]
    metrics = metrics_mod.Metrics()
    ctl = _controller(api, bmcs.bmc_file(), now, metrics)

    ctl.tick()
    now[0] += 120
    # 1 performance node (the family's one), 3 eco: 1 stays as the spare.
    asleep = {t.name for t in ctl.tick().power_transitions}
    assert len(asleep) == 2
    assert all(bmcs.power(n) == "off" for n in asleep)  # the BMCs did it
    assert all(bmcs.power(n) == "on" for n in set(NODES) - asleep)
    now[0] += 60
    ctl.tick()  # read back off
    assert all(power_nodes.states(api)[n] == "off" for n in asleep)
    assert not {rps[n] for n in asleep} & power_nodes.awake_roots(api)

    # Three whole-node instances wait: the spare and the performance node
    # take two, one off node must wake. Its BMC refuses the credentials
    # first: the node stays waking, never schedulable, the failure counted.
    power_nodes.pending(api, "req-wake", 3, {"VCPU": 64})
    ctl.power.driver = _driver(bmcs.bmc_file(wrong_password_for=asleep))
    now[0] += 60
    [woken] = [t.name for t in ctl.tick().power_transitions if t.after == "waking"]
    assert metrics.value("joulie_power_driver_failures_total") >= 1
    assert power_nodes.states(api)[woken] == "waking" and bmcs.power(woken) == "off"
    assert rps[woken] not in power_nodes.awake_roots(api)

    # The right credentials: asked again, powered on, read back on.
    ctl.power.driver = _driver(bmcs.bmc_file())
    for _ in range(3):
        now[0] += 60
        ctl.tick()
    assert bmcs.power(woken) == "on"
    assert power_nodes.states(api)[woken] == "on"
    assert rps[woken] in power_nodes.awake_roots(api)
    [still_off] = asleep - {woken}
    assert power_nodes.states(api)[still_off] == "off" and bmcs.power(still_off) == "off"
    assert bmcs.password not in caplog.text  # credentials never logged
