"""placement-status upgrade check, run as the console script."""

import json
import os
import subprocess
import sys
import time

import pytest

BIN = os.path.dirname(sys.executable)
SUCCESS, WARNING, FAILURE = 0, 1, 2


def _status(tmp_path, config="", env=None, timeout=120):
    """Run ``placement-status upgrade check --json``; (exit status, {check: (code, details)})."""
    conf = tmp_path / "placement.conf"
    conf.write_text(config)
    full_env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"))
    full_env.pop("OS_PLACEMENT_DATABASE__CONNECTION", None)
    full_env.update(env or {})
    res = subprocess.run(
        [
            os.path.join(BIN, "placement-status"),
            "--config-file",
            str(conf),
            "upgrade",
            "check",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=tmp_path,
    )
    assert "Traceback" not in res.stdout + res.stderr, res.stdout + res.stderr
    body = json.loads(res.stdout)
    return res.returncode, {c["check"]: (c["result"], c["details"]) for c in body["checks"]}


def _synced_sqlite(tmp_path):
    url = f"sqlite:///{tmp_path}/placement.sqlite"
    res = subprocess.run(
        [os.path.join(BIN, "placement-manage"), "db", "sync"],
        env=dict(os.environ, OS_PLACEMENT_DATABASE__CONNECTION=url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    return url


def test_all_pass_on_a_synced_database(tmp_path):
    url = _synced_sqlite(tmp_path)
    code, checks = _status(tmp_path, f"[placement_database]\nconnection = {url}\n")
    assert code == SUCCESS, checks
    assert set(checks) == {"Database", "Policy File", "API Authentication", "Connection Budget"}
    assert checks["Database"][0] == SUCCESS
    assert checks["Database"][1].startswith("schema at revision ")


def test_missing_sqlite_file_fails_and_is_not_created(tmp_path):
    path = tmp_path / "absent.sqlite"
    code, checks = _status(tmp_path, f"[placement_database]\nconnection = sqlite:///{path}\n")
    assert code == FAILURE
    assert checks["Database"][0] == FAILURE
    assert "placement-manage db sync" in checks["Database"][1]
    assert not path.exists()


def test_unreachable_database_fails(tmp_path):
    code, checks = _status(
        tmp_path,
        "[placement_database]\nconnection = postgresql+psycopg://postgres@127.0.0.1:1/placement\n",
    )
    assert code == FAILURE
    assert checks["Database"] == (FAILURE, checks["Database"][1])
    assert "cannot connect to database" in checks["Database"][1]


def test_postgresql_schema_and_connection_budget(tmp_path, empty_pg_url):
    config = f"[placement_database]\nconnection = {empty_pg_url}\n"
    code, checks = _status(tmp_path, config)
    assert code == FAILURE
    assert "no placement schema" in checks["Database"][1]
    assert "placement-manage db sync" in checks["Database"][1]
    sync = subprocess.run(
        [
            os.path.join(BIN, "placement-manage"),
            "--config-file",
            str(tmp_path / "placement.conf"),
            "db",
            "sync",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert sync.returncode == 0, sync.stderr
    code, checks = _status(tmp_path, config + "[DEFAULT]\nworkers = 2\n")
    assert code == SUCCESS, checks
    assert checks["Connection Budget"] == (SUCCESS, checks["Connection Budget"][1])
    assert checks["Connection Budget"][1].startswith(
        "2 worker(s) x (pool_size 10 + max_overflow 10) = 40 connections"
    )
    # 4 x (100 + 100) cannot fit PostgreSQL's max_connections.
    code, checks = _status(tmp_path, config + "pool_size = 100\n[DEFAULT]\nworkers = 4\n")
    assert code == WARNING
    assert checks["Connection Budget"][0] == WARNING
    assert "= 800 connections" in checks["Connection Budget"][1]


def test_paused_database_fails_within_the_time_limit(tmp_path, private_pg):
    """A frozen server (SIGSTOP) makes the check fail after connect_timeout,
    never hang the command."""
    config = f"[placement_database]\nconnection = {private_pg.url}\nconnect_timeout = 2\n"
    private_pg.pause()
    started = time.monotonic()
    code, checks = _status(tmp_path, config, timeout=60)
    elapsed = time.monotonic() - started
    assert code == FAILURE
    assert checks["Database"][0] == FAILURE
    assert "cannot connect to database" in checks["Database"][1]
    assert checks["Connection Budget"][0] == WARNING
    # Two checks ask the database, each bounded by connect_timeout (and
    # one reconnect); the rest is start-up on a busy machine.
    assert elapsed < 30


@pytest.mark.parametrize(
    "content,expected,words",
    [
        ('"placement:resource_providers:list": "role:admin"\n', SUCCESS, "1 rule(s), all known"),
        ('{"placement:resource_providers:list": "role:admin"}', WARNING, "JSON-formatted"),
        (
            '"placement:resource_provider:list": "role:admin"\n',
            WARNING,
            "placement:resource_provider:list",
        ),
        ('"placement:traits:list": [unclosed\n', FAILURE, "cannot be read"),
        (
            '"placement:traits:list": "role:admin and or"\n',
            FAILURE,
            "do not parse (oslo.policy would deny everything they guard): placement:traits:list",
        ),
    ],
    ids=["valid", "json", "unknown-rule", "bad-yaml", "bad-rule"],
)
def test_policy_file(tmp_path, content, expected, words):
    url = _synced_sqlite(tmp_path)
    policy = tmp_path / "policy.yaml"
    policy.write_text(content)
    code, checks = _status(
        tmp_path,
        f"[placement_database]\nconnection = {url}\n[oslo_policy]\npolicy_file = {policy}\n",
    )
    assert checks["Policy File"][0] == expected, checks["Policy File"]
    assert words in checks["Policy File"][1]
    assert code == expected


@pytest.mark.parametrize(
    "config,expected,words",
    [
        ("[DEFAULT]\nhost = 0.0.0.0\n", FAILURE, "placement-api refuses to start"),
        (
            "[DEFAULT]\nhost = 0.0.0.0\n[api]\nallow_insecure_noauth = True\n",
            WARNING,
            "anyone who can reach the port is an admin",
        ),
        ("[DEFAULT]\nhost = ::1\n", SUCCESS, "noauth2 on loopback (::1) only"),
        (
            "[DEFAULT]\nhost = 0.0.0.0\n[api]\nauth_strategy = keystone\n",
            SUCCESS,
            "auth_strategy = keystone",
        ),
    ],
    ids=["noauth2-everywhere", "noauth2-everywhere-allowed", "noauth2-loopback", "keystone"],
)
def test_api_authentication(tmp_path, config, expected, words):
    url = _synced_sqlite(tmp_path)
    code, checks = _status(tmp_path, f"{config}[placement_database]\nconnection = {url}\n")
    assert checks["API Authentication"][0] == expected, checks["API Authentication"]
    assert words in checks["API Authentication"][1]
    assert code == expected


def test_bad_config_is_one_line(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("[api]\nauth_strategy = nonsense\n")
    res = subprocess.run(
        [os.path.join(BIN, "placement-status"), "--config-file", str(conf), "upgrade", "check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode != 0
    assert "Traceback" not in res.stderr
    assert res.stderr.startswith("placement-status: error: bad configuration")
