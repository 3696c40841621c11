"""The ``redfish`` power driver: a node's BMC through sushy (OpenStack's Redfish library).

The BMCs come from ``[power] bmc_file``, a JSON object keyed by node name::

    {"cn-1": {"address": "https://10.0.0.11", "system": "/redfish/v1/Systems/1",
              "username": "admin", "password": "...", "verify": true}}

Credentials are never logged: errors name the node and the BMC's address.
Powering off is ``ComputerSystem.Reset`` with ``[power] redfish_off_action``
(GracefulShutdown, or ForceOff); on is ``On``; the state is read back from
the BMC (PoweringOn counts as off, PoweringOff as on: not there yet).
"""

import threading

from powerpolicy import power_drivers
from powerpolicy.suspend import DriverError


class RedfishDriver:
    def __init__(self, conf):
        import sushy  # only this driver needs it

        self._sushy = sushy
        self.off_action = conf.power.redfish_off_action
        self.timeout = conf.power.power_command_timeout
        self.bmcs = power_drivers.read_bmc_file(conf.power.bmc_file)
        self._roots = {}
        self._lock = threading.Lock()

    def _system(self, node):
        entry = power_drivers.bmc_of(self.bmcs, node)
        address = entry["address"]
        try:
            with self._lock:
                root = self._roots.get(address)
                if root is None:
                    root = self._sushy.Sushy(
                        address.rstrip("/") + "/redfish/v1",
                        username=entry.get("username"),
                        password=entry.get("password"),
                        verify=entry.get("verify", True),
                        # One try per call, bounded: a BMC that does not
                        # answer fails this tick's call, the next tick asks
                        # again (sushy's default retries a call for ~30 s).
                        server_side_retries=1,
                        server_side_retries_delay=1,
                        read_timeout=self.timeout,
                        connect_timeout=min(self.timeout, 10),
                    )
                    self._roots[address] = root
            system = entry.get("system")
            return root.get_system(system) if system else root.get_system()
        except self._sushy.exceptions.SushyError as exc:
            raise DriverError(f"BMC {address} of {node['name']}: {type(exc).__name__}") from None
        except Exception as exc:  # connection refused, timeouts
            raise DriverError(f"BMC {address} of {node['name']} unreachable: {type(exc).__name__}")

    def _reset(self, node, action):
        system = self._system(node)
        try:
            system.reset_system(self._sushy.ResetType(action))
        except self._sushy.exceptions.SushyError as exc:
            raise DriverError(f"{action} refused by the BMC of {node['name']}: {exc}") from None

    def power_off(self, node):
        self._reset(node, self.off_action)

    def power_on(self, node):
        self._reset(node, "On")

    def power_state(self, node):
        system = self._system(node)
        state = system.power_state
        if state == self._sushy.PowerState.OFF or state == self._sushy.PowerState.POWERING_ON:
            return "off"
        return "on"
