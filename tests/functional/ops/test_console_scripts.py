"""Every console script starts the same way (joule.config): run as real processes.

A bad value, a missing config file, an unknown option or an unknown auth
type is one line on stderr and exit 2, never a traceback; an unreachable
placement is one line and exit 3 (the services that need placement);
``--version`` prints the package version; oslo.log's options work.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from joule import config

BIN = os.path.dirname(sys.executable)
SCRIPTS = [
    "placement-api",
    "placement-manage",
    "placement-status",
    "scheduler-worker",
    "conductor-worker",
    "power-controller",
    "placement-demo",
    "placement-sim",
]
# What each needs besides the options under test to get past argument parsing.
TAIL = {"placement-manage": ["db", "version"], "placement-status": ["upgrade", "check"]}
DOWN = "http://127.0.0.1:9"  # nothing listens on the discard port


def _run(name, *args, env=None, stdin="", timeout=120):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    full_env.update(env or {})
    return subprocess.run(
        [os.path.join(BIN, name), *args],
        capture_output=True,
        text=True,
        env=full_env,
        input=stdin,
        timeout=timeout,
        check=False,
    )


def _one_line_error(res, status, *needles):
    assert res.returncode == status, (res.returncode, res.stderr)
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("name", SCRIPTS)
def test_version(name):
    res = _run(name, "--version")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == config.version() != "unknown"


@pytest.mark.parametrize("name", SCRIPTS)
def test_unknown_option_is_one_line(name):
    line = _one_line_error(
        _run(name, "--no-such-option", *TAIL.get(name, [])), 2, "--no-such-option"
    )
    assert line.startswith(f"{name}: error: ")


@pytest.mark.parametrize("name", SCRIPTS)
def test_missing_config_file_is_one_line(name, tmp_path):
    missing = str(tmp_path / "missing.conf")
    _one_line_error(
        _run(name, "--config-file", missing, *TAIL.get(name, [])),
        2,
        "config file not found",
        missing,
    )


@pytest.mark.parametrize(
    "name, text, needle",
    [
        ("scheduler-worker", "[scheduler]\nmax_attempts = zero\n", "[scheduler] max_attempts"),
        (
            "scheduler-worker",
            "[filter_scheduler]\nweight_classes = NoSuchWeigher\n",
            "NoSuchWeigher",
        ),
        ("scheduler-worker", "[placement]\ntimeout = abc\n", "[placement] timeout"),
        ("scheduler-worker", "[placement]\nauth_type = no-such-plugin\n", "no-such-plugin"),
        (
            "scheduler-worker",
            "[filter_scheduler]\nenabled_filters = NoSuchFilter\n",
            "NoSuchFilter",
        ),
        ("conductor-worker", "[placement_client]\ntimeout = abc\n", "[placement] timeout"),
        (
            "conductor-worker",
            "[conductor]\nsimulated_failure_rate = 2\n",
            "[conductor] simulated_failure_rate",
        ),
        ("power-controller", "[power]\nmetrics_port = 99999\n", "[power] metrics_port"),
        ("power-controller", "[power]\nmetrics_port = abc\n", "[power] metrics_port"),
        ("power-controller", "[placement]\ntimeout = abc\n", "[placement] timeout"),
        ("power-controller", "[power]\nstatic_hp_frac = 2\n", "[power] static_hp_frac"),
        (
            "placement-api",
            "[placement_database]\nconnection = not a url\n",
            "[placement_database] connection",
        ),
        (
            "placement-api",
            "[placement_database]\nconnection = nosuchdb://x/y\n",
            "[placement_database] connection",
        ),
        (
            "placement-api",
            "[placement_database]\npool_size = many\n",
            "[placement_database] pool_size",
        ),
        (
            "placement-manage",
            "[placement_database]\nconnection = not a url\n",
            "[placement_database] connection",
        ),
        ("placement-status", "[api]\nauth_strategy = nonsense\n", "[api] auth_strategy"),
        ("placement-api", "[DEFAULT]\ndebug = perhaps\n", "--debug"),
    ],
)
def test_bad_value_is_one_line(name, text, needle, tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text(text)
    # An unreachable placement too: the value must be refused before any request.
    res = _run(
        name,
        "--config-file",
        str(conf),
        *TAIL.get(name, []),
        env={
            "OS_PLACEMENT__ENDPOINT_OVERRIDE": DOWN,
            "OS_PLACEMENT_DATABASE__CONNECTION": "sqlite://",
        }
        if "connection" not in text
        else {"OS_PLACEMENT__ENDPOINT_OVERRIDE": DOWN},
    )
    _one_line_error(res, 2, needle)


def test_bad_command_line_values_are_one_line():
    _one_line_error(_run("placement-api", "--port", "abc"), 2, "port")
    _one_line_error(_run("power-controller", "--dry-run", "--demand", "x"), 2, "--demand")
    _one_line_error(_run("placement-demo", "--requests", "many"), 2, "--requests")
    _one_line_error(_run("placement-sim", "--hours", "many"), 2, "--hours")


@pytest.mark.parametrize(
    "name, args",
    [
        ("scheduler-worker", []),
        ("conductor-worker", []),
        ("power-controller", []),  # the service: checks placement before its first tick
    ],
)
def test_unreachable_placement_at_start_is_one_line(name, args):
    res = _run(
        name,
        *args,
        env={
            "OS_PLACEMENT__ENDPOINT_OVERRIDE": DOWN,
            "OS_PLACEMENT__CONNECT_RETRIES": "0",
            "OS_POWER__METRICS_PORT": "0",
        },
    )
    _one_line_error(res, 3, f"placement at {DOWN} is unreachable", "connection refused")
    assert res.stdout == ""


def test_oslo_log_options_reach_the_service(live_server, tmp_path):
    """--debug and --log-file: the client's requests are logged to the file."""
    log = tmp_path / "power.log"
    env = {"OS_PLACEMENT__ENDPOINT_OVERRIDE": live_server.url}
    res = _run(
        "power-controller", "--dry-run", "--json", "--debug", "--log-file", str(log), env=env
    )
    assert res.returncode == 0, res.stderr
    text = log.read_text()
    assert " DEBUG " in text and re.search(r"GET /nodes(\?\S*)? -> 200", text), text
    res = _run("power-controller", "--dry-run", "--json", "--use-json", "--debug", env=env)
    assert res.returncode == 0, res.stderr
    assert any(
        line.startswith("{") and '"levelname": "DEBUG"' in line for line in res.stderr.splitlines()
    )
    json.loads(res.stdout)  # the result alone on stdout, logs on stderr
