"""etc/systemd/: one unit per service, restart and stop policies that hold,
command lines the console scripts accept, and ``systemd-analyze verify``.

Nothing here needs a running systemd; the one check that needs the
``systemd-analyze`` binary is skipped, with the reason, where it is missing.
"""

import configparser
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
UNIT_DIR = ROOT / "etc" / "systemd"
BIN = os.path.dirname(sys.executable)
INSTALLED_BIN = "/usr/local/bin/"
# Each long-running service and its units (the conductor: super and per cell).
SERVICES = {
    "placement-api": ["placement-api.service"],
    "scheduler-worker": ["scheduler-worker.service"],
    "conductor-worker": ["conductor-worker.service", "conductor-worker@.service"],
    "power-controller": ["power-controller.service"],
    "node-agent": ["node-agent.service"],
}
# The user a service runs as: placement's own system user, except the node
# agent, which writes the kernel's power limits (root only).
USERS = {"node-agent": "root"}
# gunicorn's graceful_timeout: how long the master lets workers finish on SIGTERM.
GRACEFUL_SECONDS = 30


def _parse(path):
    """{section: {key: [values]}}; systemd allows a key more than once."""
    sections = {}
    current = None
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None and "=" in line, f"{path.name}:{number}: {raw!r}"
        key, _sep, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def _one(unit, section, key):
    values = unit[section].get(key, [])
    assert len(values) == 1, f"[{section}] {key} = {values}"
    return values[0]


def _seconds(value):
    match = re.fullmatch(r"(\d+)(s|min)?", value)
    assert match, value
    return int(match.group(1)) * (60 if match.group(2) == "min" else 1)


def _console_scripts():
    setup = configparser.ConfigParser(interpolation=None)
    setup.read(ROOT / "setup.cfg")
    lines = setup["options.entry_points"]["console_scripts"].strip().splitlines()
    return {line.split("=")[0].strip() for line in lines}


ALL_UNITS = [name for names in SERVICES.values() for name in names]


def test_every_service_has_its_units_and_nothing_else():
    assert sorted(p.name for p in UNIT_DIR.glob("*.service")) == sorted(ALL_UNITS)
    assert set(SERVICES) <= _console_scripts()


@pytest.mark.parametrize(
    "service,unit_name", [(service, name) for service, names in SERVICES.items() for name in names]
)
def test_unit_policies(service, unit_name):
    unit = _parse(UNIT_DIR / unit_name)
    svc = unit["Service"]
    command = shlex.split(_one(unit, "Service", "ExecStart"))
    assert command[0] == INSTALLED_BIN + service
    # Restarted after a crash or a kill, not after a clean stop; not in a
    # tight loop; a unit that keeps failing gives up and says so.
    assert _one(unit, "Service", "Restart") == "on-failure"
    assert 1 <= _seconds(_one(unit, "Service", "RestartSec")) <= 30
    assert _seconds(_one(unit, "Unit", "StartLimitIntervalSec")) >= 60
    assert int(_one(unit, "Unit", "StartLimitBurst")) >= 3
    # Graceful stop by SIGTERM, then the whole cgroup: a dead main process
    # leaves no orphaned worker behind.
    assert _one(unit, "Service", "KillSignal") == "SIGTERM"
    assert _one(unit, "Service", "KillMode") == "control-group"
    assert svc.get("SendSIGKILL", ["yes"]) == ["yes"]
    assert _seconds(_one(unit, "Service", "TimeoutStopSec")) > GRACEFUL_SECONDS
    assert _one(unit, "Service", "Type") == "exec"
    assert _one(unit, "Service", "User") == USERS.get(service, "placement")
    assert _one(unit, "Install", "WantedBy") == "multi-user.target"
    assert "network-online.target" in " ".join(unit["Unit"]["After"])


def _help(service):
    res = subprocess.run(
        [os.path.join(BIN, service), "--help"], capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stderr
    return res.stdout


# The per-cell conductor (issue 11) is being built at the same time as these
# units; until conductor-worker has --cell its template cannot run.
_CELL_PENDING = pytest.mark.skipif(
    "--cell" not in _help("conductor-worker"),
    reason="conductor-worker has no --cell yet (issue 11, per-cell conductors)",
)


@pytest.mark.parametrize(
    "service,unit_name",
    [
        pytest.param(
            service, name, marks=[_CELL_PENDING] if name == "conductor-worker@.service" else []
        )
        for service, names in SERVICES.items()
        for name in names
    ],
)
def test_command_line_is_accepted_by_the_script(service, unit_name):
    command = shlex.split(_one(_parse(UNIT_DIR / unit_name), "Service", "ExecStart"))
    help_text = _help(service)
    for arg in command[1:]:
        if arg.startswith("--"):
            assert re.search(rf"(^|[\s(,]){re.escape(arg)}\b", help_text), (
                f"{unit_name}: {service} has no option {arg}"
            )
    config = command[command.index("--config-file") + 1]
    assert config.startswith("/etc/placement/") and config.endswith(".conf")


def test_templated_conductor_serves_the_instance_cell():
    command = shlex.split(
        _one(_parse(UNIT_DIR / "conductor-worker@.service"), "Service", "ExecStart")
    )
    assert command[command.index("--cell") + 1] == "%i"


def test_placement_api_shares_metrics_across_workers():
    unit = _parse(UNIT_DIR / "placement-api.service")
    env = dict(value.split("=", 1) for value in unit["Service"]["Environment"])
    runtime = _one(unit, "Service", "RuntimeDirectory")
    assert env["PROMETHEUS_MULTIPROC_DIR"].startswith(f"%t/{runtime}/")


@pytest.mark.skipif(
    shutil.which("systemd-analyze") is None,
    reason="systemd-analyze is not installed on this machine",
)
def test_systemd_analyze_verify(tmp_path):
    # verify checks that each ExecStart binary exists: point the units at
    # this environment's console scripts.
    names = []
    for name in ALL_UNITS:
        text = (UNIT_DIR / name).read_text().replace(INSTALLED_BIN, BIN + "/")
        (tmp_path / name).write_text(text)
        names.append(name.replace("@.", "@cell1."))
    res = subprocess.run(
        ["systemd-analyze", "verify", "--man=no"] + [f"./{name}" for name in names],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    # Any message means systemd ignored or doubted a line.
    assert res.returncode == 0 and not res.stderr.strip() and not res.stdout.strip(), (
        res.stdout + res.stderr
    )
