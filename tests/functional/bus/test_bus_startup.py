"""Start-up of the bus services: an unreachable RabbitMQ or a bad transport URL
is one line on stderr and exit status 3 / 2, never a traceback."""

import os
import subprocess
import sys

import pytest

BIN = os.path.dirname(sys.executable)


def _run(conf, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    return subprocess.run(
        [os.path.join(BIN, args[0]), "--config-file", str(conf), *args[1:]],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.mark.parametrize(
    "command",
    [
        ["scheduler-worker"],
        ["conductor-worker"],
        ["conductor-worker", "--cell", "cell1"],
        ["build-submit", "--requests", "-"],
    ],
)
def test_unreachable_rabbitmq_is_one_line(live_server, tmp_path, command):
    conf = tmp_path / "svc.conf"
    conf.write_text(
        "[DEFAULT]\ntransport_url = rabbit://guest:guest@127.0.0.1:1/\n"
        f"[placement]\nauth_type = noauth\nendpoint_override = {live_server.url}\n"
    )
    res = _run(conf, *command)
    assert res.returncode == 3, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert lines[0].startswith(
        f"{command[0]}: error: RabbitMQ at 127.0.0.1:1 (vhost /) is unreachable"
    ), lines[0]


def test_bad_transport_url_and_cell_are_one_line(live_server, tmp_path):
    conf = tmp_path / "svc.conf"
    conf.write_text(
        "[DEFAULT]\ntransport_url = nosuchbus://x/\n"
        f"[placement]\nauth_type = noauth\nendpoint_override = {live_server.url}\n"
    )
    res = _run(conf, "scheduler-worker")
    assert res.returncode == 3 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "invalid [DEFAULT] transport_url" in res.stderr
    res = _run(conf, "conductor-worker", "--cell", "../x")
    assert res.returncode == 2 and "is not a cell name" in res.stderr
    assert "Traceback" not in res.stderr
