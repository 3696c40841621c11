"""The scheduler, a conductor and the power controller against a placement behind
keystone, each with its own password user, across token expiry.

placement-api runs as a real process with ``auth_strategy = keystone``; the
fake identity service of tests/keystone.py runs in this process and issues
a new token at every password login. Its tokens claim an hour of life, but it
stops validating a token ``TOKEN_LIFE`` seconds after issuing it (the token
expired or was revoked earlier than the client was told): placement then
answers 401, and the client must log in again and repeat the call. The
services find placement in the token's catalog (no endpoint_override), as a
deployment does.
"""

import io
import json
import os
import subprocess
import sys
import threading
import time
import uuid

import pytest

from benchmarks import slow_clients
from tests import builders
from tests import processes
from tests.keystone import FakeKeystone

BIN = os.path.dirname(sys.executable)
TOKEN_LIFE = 1.0
USERS = {"scheduler": "s3cret", "conductor": "c0nd", "power": "pw"}
SERVICE_PROJECT = uuid.uuid4().hex


class ShortLivedKeystone(FakeKeystone):
    """FakeKeystone plus password users whose tokens stop validating early."""

    def __init__(self):
        self.placement_url = None
        self.logins = {}
        self.refused = {}
        self.issued_at = {}
        self._lock = threading.Lock()
        super().__init__()

    def issue(self, token_id, roles, project_id, expires=None, user_name="user"):
        token = super().issue(token_id, roles, project_id, expires, user_name)
        if self.placement_url:
            token["token"]["catalog"].append(
                {
                    "id": uuid.uuid4().hex,
                    "type": "placement",
                    "name": "placement",
                    "endpoints": [
                        {
                            "id": uuid.uuid4().hex,
                            "interface": interface,
                            "region": "RegionOne",
                            "region_id": "RegionOne",
                            "url": self.placement_url,
                        }
                        for interface in ("internal", "public")
                    ],
                }
            )
        return token

    def login(self, body):
        """A password login of one of USERS: a new token, or None."""
        user = body["auth"]["identity"]["password"]["user"]
        name = user.get("name")
        if USERS.get(name) != user.get("password"):
            return None
        token_id = f"tok-{name}-{uuid.uuid4().hex}"
        self.issue(
            token_id, ["service", "admin", "member", "reader"], SERVICE_PROJECT, user_name=name
        )
        with self._lock:
            self.logins[name] = self.logins.get(name, 0) + 1
            self.issued_at[token_id] = time.monotonic()
        return token_id

    def valid(self, token_id):
        born = self.issued_at.get(token_id)
        if born is not None and time.monotonic() - born > TOKEN_LIFE:
            user = token_id.split("-")[1]
            with self._lock:
                self.refused[user] = self.refused.get(user, 0) + 1
            return False
        return token_id in self.tokens

    def _handler(self):
        base = super()._handler()
        fake = self

        class Handler(base):
            def do_GET(self):
                subject = self.headers.get("X-Subject-Token")
                if (
                    self.path.split("?")[0].rstrip("/") == "/v3/auth/tokens"
                    and subject
                    and not fake.valid(subject)
                ):
                    return self._send(404, {"error": {"code": 404, "message": "token expired"}})
                return super().do_GET()

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) or b"{}"
                body = json.loads(raw)
                if self.path.rstrip("/") == "/v3/auth/tokens":
                    token_id = fake.login(body)
                    if token_id is not None:
                        return self._send(201, fake.tokens[token_id], {"X-Subject-Token": token_id})
                # Placement's own service user: the parent's answer.
                self.rfile = io.BytesIO(raw)
                return super().do_POST()

        return Handler


@pytest.fixture
def keystone_class():
    """The ``keystone`` fixture of this module's tests: short-lived tokens."""
    return ShortLivedKeystone


@pytest.fixture
def placement(keystone, db, db_url, tmp_path):
    """placement-api (the console script) with auth_strategy = keystone."""
    port = slow_clients.free_port()
    keystone.placement_url = f"http://127.0.0.1:{port}"
    conf = tmp_path / "placement.conf"
    conf.write_text(
        keystone.placement_conf(
            db_url,
            # Ask keystone about every token: a cached validation would hide the expiry.
            "token_cache_time = -1\n",
        )
    )
    api = processes.ApiProcess(
        tmp_path / "api.log", ["--config-file", str(conf), "--workers", "1"], port=port
    )
    yield api.url
    api.stop()


def _service_conf(tmp_path, keystone, user, extra=""):
    path = tmp_path / f"{user}.conf"
    path.write_text(f"""\
[placement]
auth_type = password
auth_url = {keystone.url}/v3
username = {user}
password = {USERS[user]}
project_name = service
user_domain_id = default
project_domain_id = default
region_name = RegionOne
valid_interfaces = internal
{extra}""")
    return str(path)


def _run(*args, timeout=300):
    """A console script (or ``python -m ...``) of this environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    return subprocess.run(
        [os.path.join(BIN, args[0]), *args[1:]],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )


def _hosts(db, count):
    uuids = []
    for i in range(count):
        rp = builders.create_provider(db, name=f"ks-{i}")
        builders.set_inventory(db, rp, "VCPU", 64)
        builders.set_inventory(db, rp, "MEMORY_MB", 65536)
        uuids.append(rp)
    return uuids


def _specs(path, count):
    # Request ids unique per file: instances are named after their request.
    with open(path, "w", encoding="utf-8") as out:
        for i in range(count):
            out.write(
                json.dumps(
                    {
                        "version": "1.0",
                        "request_id": f"req-{path.stem}-{i}",
                        "resources": {"VCPU": 1, "MEMORY_MB": 256},
                        "project_id": "p",
                        "user_id": "u",
                    }
                )
                + "\n"
            )
    return str(path)


def test_services_use_password_users_across_token_expiry(
    keystone,
    placement,
    db,
    client,
    tmp_path,
    vhost,  # noqa: F811 - the imported fixture
):
    hosts = _hosts(db, 4)
    for rp in hosts:
        resp = client.put(f"/nodes/{rp}", json={"cell": "cell1", "labels": {"role": "w"}})
        assert resp.status_code in (200, 201), resp.get_json()
        resp = client.put(
            f"/nodes/{rp}/hardware",
            json={
                "cpu_model": "EPYC",
                "gpu_count": 0,
                "cpu_min_cap_watts": 100,
                "cpu_max_cap_watts": 400,
            },
        )
        assert resp.status_code in (200, 201), resp.get_json()

    # The scheduler: 40 requests, several seconds, many token lifetimes.
    out = tmp_path / "sched.jsonl"
    res = _run(
        "python",
        "-m",
        "scheduler.batch",
        "--config-file",
        _service_conf(tmp_path, keystone, "scheduler"),
        "--requests",
        _specs(tmp_path / "a.jsonl", 40),
        "--output",
        str(out),
    )
    assert res.returncode == 0, res.stderr
    outcomes = [json.loads(line) for line in out.read_text().splitlines()]
    assert [o["status"] for o in outcomes] == ["placed"] * 40

    # The services on the bus build (and record build requests) the same
    # way: a scheduler worker, a super conductor and a cell conductor, each
    # as its own password user, and build-submit.
    bus_conf = (
        f"[DEFAULT]\ntransport_url = rabbit://guest:guest@127.0.0.1:5672/{vhost}\n"
        f"[conductor]\nsimulated_state_dir = {tmp_path / 'hv'}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    services = []
    try:
        for user, args in (
            ("scheduler", ["scheduler-worker"]),
            ("conductor", ["conductor-worker"]),
            ("conductor", ["conductor-worker", "--cell", "cell1"]),
        ):
            conf = _service_conf(tmp_path, keystone, user, extra=bus_conf)
            services.append(
                subprocess.Popen(
                    [os.path.join(BIN, args[0]), "--config-file", conf, *args[1:]],
                    stderr=subprocess.PIPE,
                    text=True,
                    env=env,
                )
            )
        for proc in services:
            for line in proc.stderr:
                if " serving topic " in line:
                    break
            else:
                raise AssertionError(f"service exited {proc.wait()}")
        # Two rounds a token lifetime apart: each service's first call of the
        # second round carries a token placement no longer accepts, however
        # few calls the first round needed (a scheduler keeps its walks).
        results = []
        for name in ("b", "c"):
            if results:
                time.sleep(TOKEN_LIFE + 0.5)
            results.append(
                _run(
                    "build-submit",
                    "--config-file",
                    _service_conf(tmp_path, keystone, "conductor", extra=bus_conf),
                    "--requests",
                    _specs(tmp_path / f"{name}.jsonl", 10),
                    "--json",
                )
            )
    finally:
        for proc in services:
            proc.terminate()
            proc.communicate(timeout=60)
    for res in results:
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout.strip().splitlines()[-1])["placed"] == 10

    # The power controller, as the service: a tick every second for a few
    # seconds, several token lifetimes in one process.
    conf = _service_conf(
        tmp_path,
        keystone,
        "power",
        "[power]\nstatic_hp_frac = 0.5\nreconcile_interval = 1\nmetrics_port = 0\n",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    proc = subprocess.Popen(
        [os.path.join(BIN, "power-controller"), "--config-file", conf],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    time.sleep(4 * TOKEN_LIFE + 1)
    proc.terminate()
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "reconcile failed" not in err and "ERROR" not in err, err
    nodes = client.get("/nodes").get_json()["nodes"]
    assert sorted(n["twin"]["profile"] for n in nodes) == [
        "eco",
        "eco",
        "performance",
        "performance",
    ]

    # Every service logged in with its own user and outlived tokens mid-run.
    # The conductors and the power controller (many calls, spread over the
    # run) met placement's refusal of an expired token, logged in again and
    # repeated the call. A scheduler worker with kept walks makes only a few
    # calls, and keystoneauth may renew its token before one of them is
    # refused (CI saw both): that it logged in again is what it must show.
    # The refusal path itself is the one placement client all of them use.
    assert set(keystone.logins) == {"scheduler", "conductor", "power"}
    for user in USERS:
        assert keystone.logins[user] >= 2, keystone.logins
    for user in ("conductor", "power"):
        assert keystone.refused.get(user, 0) >= 1, keystone.refused
    # Allocations, reports and build requests landed under those tokens.
    usages = sum(
        client.get(f"/resource_providers/{rp}/usages").get_json()["usages"].get("VCPU", 0)
        for rp in hosts
    )
    assert usages == 60


def test_wrong_password_is_one_line(keystone, placement, tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text(_service_conf_text(keystone, "scheduler", "wrong"))
    res = _run("scheduler-worker", "--config-file", str(conf))
    assert res.returncode == 3, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr
    assert lines[0].startswith("scheduler-worker: error: placement authentication failed")


def _service_conf_text(keystone, user, password):
    return (
        f"[placement]\nauth_type = password\nauth_url = {keystone.url}/v3\n"
        f"username = {user}\npassword = {password}\nproject_name = service\n"
        "user_domain_id = default\nproject_domain_id = default\n"
    )
