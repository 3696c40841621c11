"""The ``ipmi`` power driver: a node's BMC over IPMI 2.0 (RMCP+) through pyghmi.

For sites whose BMCs speak IPMI only. The BMCs come from ``[power]
bmc_file``, as for the redfish driver, keyed by node name::

    {"cn-1": {"address": "10.0.0.11", "port": 623, "username": "admin",
              "password": "..."}}

Credentials are never logged: errors name the node and the BMC's address.
Powering off is a chassis control with ``[power] ipmi_off_action``
(``shutdown``: the operating system is asked to shut down; ``off``: power
is cut); on is ``on``; the state is read back from the BMC. Each call runs
in its own short process (``powerpolicy.ipmi_call``: why is said there),
given the credentials on stdin and bounded by ``[power]
power_command_timeout``; a BMC that does not answer fails the call and the
next tick asks again.
"""

import json
import subprocess
import sys

from powerpolicy import power_drivers
from powerpolicy.suspend import DriverError

DEFAULT_PORT = 623


class IpmiDriver:
    def __init__(self, conf):
        self.off_action = conf.power.ipmi_off_action
        self.timeout = conf.power.power_command_timeout
        self.bmcs = power_drivers.read_bmc_file(conf.power.bmc_file)

    def _call(self, node, what, action):
        entry = power_drivers.bmc_of(self.bmcs, node)
        address = entry["address"]
        request = {
            "address": address,
            "port": int(entry.get("port", DEFAULT_PORT)),
            "username": entry.get("username"),
            "password": entry.get("password"),
            "action": action,
        }
        failed = f"{what} on the BMC {address} of {node['name']}"
        try:
            done = subprocess.run(
                [sys.executable, "-m", "powerpolicy.ipmi_call"],
                input=json.dumps(request),
                capture_output=True,
                text=True,
                timeout=self.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise DriverError(f"{failed}: no answer within {self.timeout} s") from None
        try:
            answer = json.loads(done.stdout)
        except ValueError:
            tail = done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
            raise DriverError(f"{failed}: {tail[0][:200]}") from None
        if "error" in answer:
            raise DriverError(f"{failed}: {answer['error']}")
        return answer

    def power_off(self, node):
        self._call(node, f"power {self.off_action}", self.off_action)

    def power_on(self, node):
        self._call(node, "power on", "on")

    def power_state(self, node):
        state = self._call(node, "power state", "state").get("powerstate")
        if state not in ("on", "off"):
            raise DriverError(f"the BMC of {node['name']} answered power state {state!r}")
        return state
