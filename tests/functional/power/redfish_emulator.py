"""sushy-tools' Redfish emulator as the BMCs of the suspend tests: one
``sushy-emulator`` process (its fake driver) on a free port, started by its
console script and stopped by PID, serving one emulated system per node.
Like a real BMC it applies a power change a few seconds after it was asked."""

import json
import os
import signal
import subprocess
import sys

import requests

from tests import processes

NODES = [f"cn-{i:02d}" for i in range(1, 11)]

# Controller seconds a test's wait loop advances per pass (about one wall
# second). The emulator applies a power change 1-11 wall seconds after it
# is asked, and every new ask restarts that delay; the controller asks a
# change again once 5 of its minutes passed. At 15 s a pass, that is 20
# wall seconds, longer than the longest delay (at 60 s a pass it was 5,
# and a node could be asked again before each delay ran out, for ever).
WAIT_STEP = 15


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


def bmc_file(tmp_path, emulator, password):
    """The controller's [power] bmc_file for NODES on ``emulator``."""
    bmcs = {
        name: {
            "address": emulator.url,
            "system": f"/redfish/v1/Systems/{_system_uuid(i)}",
            "username": "admin",
            "password": password,
        }
        for i, name in enumerate(NODES, 1)
    }
    path = tmp_path / "bmcs.json"
    path.write_text(json.dumps(bmcs))
    return path


def driver_options(bmc_path):
    """[power] options of the redfish driver on the BMCs of ``bmc_path``."""
    return {"power_driver": "redfish", "bmc_file": str(bmc_path), "redfish_off_action": "ForceOff"}
