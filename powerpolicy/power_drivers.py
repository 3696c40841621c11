"""Power drivers: how the controller powers a node off and on, and reads it back.

A driver has ``power_off(node)``, ``power_on(node)`` and
``power_state(node)`` -> ``"on"`` or ``"off"``; ``node`` is a GET /nodes
item (its ``name`` and ``uuid`` at least). A failure raises
``powerpolicy.suspend.DriverError``: the node stays where it is and the
next tick asks again. Drivers are found through the ``joule.power.drivers``
entry points (``[power] power_driver``), so a site's own driver is an
installed package, not an edit of this one.
"""

import json
import shlex
import subprocess

from stevedore import driver as stevedore_driver

from joule import vocabulary
from powerpolicy.suspend import DriverError

NAMESPACE = "joule.power.drivers"


def load(conf):
    """The driver ``[power] power_driver`` names, made from ``conf``."""
    manager = stevedore_driver.DriverManager(
        NAMESPACE, conf.power.power_driver, invoke_on_load=True, invoke_args=(conf,)
    )
    return manager.driver


def read_bmc_file(path):
    """[power] bmc_file: {node name: its BMC's address and credentials}."""
    try:
        with open(path, encoding="utf-8") as f:
            bmcs = json.load(f)
    except (OSError, ValueError) as exc:
        raise DriverError(f"[power] bmc_file {path!r} unreadable: {exc}") from None
    if not isinstance(bmcs, dict):
        raise DriverError("[power] bmc_file must be a JSON object keyed by node name")
    return bmcs


def bmc_of(bmcs, node):
    """The bmc_file entry of ``node`` (a DriverError when it has none)."""
    entry = bmcs.get(node["name"])
    if not isinstance(entry, dict) or "address" not in entry:
        raise DriverError(f"no BMC for node {node['name']} in [power] bmc_file")
    return entry


class CommandDriver:
    """The operator's own programs, as Slurm's SuspendProgram and
    ResumeProgram: each is run with the node's name as its one argument,
    without a shell."""

    def __init__(self, conf):
        power = conf.power
        self.programs = {
            "off": shlex.split(power.suspend_program),
            "on": shlex.split(power.resume_program),
            "state": shlex.split(power.state_program),
        }
        self.timeout = power.power_command_timeout

    def _run(self, which, node):
        argv = self.programs[which]
        if not argv:
            raise DriverError(f"[power] {which} program not configured")
        try:
            done = subprocess.run(
                [*argv, node["name"]],
                capture_output=True,
                text=True,
                timeout=self.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise DriverError(f"{argv[0]} did not finish within {self.timeout} s") from None
        except OSError as exc:
            raise DriverError(f"{argv[0]} could not run: {exc}") from None
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
            raise DriverError(f"{argv[0]} exited {done.returncode}: {tail[0][:200]}")
        return done.stdout

    def power_off(self, node):
        self._run("off", node)

    def power_on(self, node):
        self._run("on", node)

    def power_state(self, node):
        out = self._run("state", node).strip().lower()
        if out not in (vocabulary.POWER_ON, vocabulary.POWER_OFF):
            raise DriverError(f"state program printed {out[:40]!r}, not 'on' or 'off'")
        return out
