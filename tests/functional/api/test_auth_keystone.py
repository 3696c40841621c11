"""The API behind keystonemiddleware, with a fake identity service on 127.0.0.1.

The fake answers what auth_token really asks over HTTP: version discovery,
a password login for placement's own service user (``POST /v3/auth/tokens``)
and validation of each user token (``GET /v3/auth/tokens`` with
``X-Subject-Token``; 404 for a token it never issued, as keystone).
"""

import datetime
import http.server
import json
import threading
import uuid

import pytest
import sqlalchemy as sa

from placement import app as app_mod
from placement import conf as conf_mod
from placement import models

PROJECT = uuid.uuid4().hex
SERVICE_PROJECT = uuid.uuid4().hex


def _now():
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None)


class FakeKeystone:
    """A threaded HTTP server that plays keystone's v3 identity API."""

    SERVICE_TOKEN = "service-token-" + uuid.uuid4().hex

    def __init__(self):
        self.tokens = {}
        self.validations = []
        handler = self._handler()
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        # Placement's own service user, with the service role (auth_token
        # requires it when service_token_roles_required is set).
        self.issue(self.SERVICE_TOKEN, ["service", "admin"], SERVICE_PROJECT, user_name="placement")

    def issue(self, token_id, roles, project_id, expires=None, user_name="user"):
        """Remember a project-scoped v3 token body, as keystone would return it."""
        expires = expires or _now() + datetime.timedelta(hours=1)
        domain = {"id": "default", "name": "Default"}
        endpoints = [
            {
                "id": uuid.uuid4().hex,
                "interface": interface,
                "region": "RegionOne",
                "region_id": "RegionOne",
                "url": self.url + "/v3",
            }
            for interface in ("public", "internal", "admin")
        ]
        token = {
            "token": {
                "methods": ["password"],
                "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%S.000000Z"),
                "issued_at": _now().strftime("%Y-%m-%dT%H:%M:%S.000000Z"),
                "user": {"id": uuid.uuid4().hex, "name": user_name, "domain": domain},
                "project": {"id": project_id, "name": "p-" + project_id[:8], "domain": domain},
                "roles": [{"id": uuid.uuid4().hex, "name": role} for role in roles],
                "catalog": [
                    {
                        "id": uuid.uuid4().hex,
                        "type": "identity",
                        "name": "keystone",
                        "endpoints": endpoints,
                    }
                ],
            }
        }
        self.tokens[token_id] = token
        return token

    def discovery(self):
        return {
            "id": "v3.14",
            "status": "stable",
            "updated": "2020-04-07T00:00:00Z",
            "links": [{"rel": "self", "href": self.url + "/v3/"}],
            "media-types": [
                {"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}
            ],
        }

    def _handler(self):
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, body=None, headers=None):
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                path = self.path.split("?")[0].rstrip("/")
                if path in ("", "/v3"):
                    disc = fake.discovery()
                    body = {"version": disc} if path == "/v3" else {"versions": {"values": [disc]}}
                    return self._send(200 if path == "/v3" else 300, body)
                if path == "/v3/auth/tokens":
                    subject = self.headers.get("X-Subject-Token")
                    caller = self.headers.get("X-Auth-Token")
                    if caller != FakeKeystone.SERVICE_TOKEN:
                        return self._send(401, {"error": {"code": 401}})
                    fake.validations.append(subject)
                    token = fake.tokens.get(subject)
                    if token is None:
                        return self._send(
                            404, {"error": {"code": 404, "message": "token not found"}}
                        )
                    return self._send(200, token, {"X-Subject-Token": subject})
                return self._send(404, {"error": {"code": 404}})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/") != "/v3/auth/tokens":
                    return self._send(404, {"error": {"code": 404}})
                password = body["auth"]["identity"]["password"]["user"]
                if (password.get("name"), password.get("password")) != ("placement", "secret"):
                    return self._send(401, {"error": {"code": 401}})
                token = fake.tokens[FakeKeystone.SERVICE_TOKEN]
                return self._send(201, token, {"X-Subject-Token": FakeKeystone.SERVICE_TOKEN})

        return Handler

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


@pytest.fixture(scope="module")
def keystone():
    server = FakeKeystone().start()
    yield server
    server.stop()


@pytest.fixture
def client(keystone, db, db_url, tmp_path):
    """The app with auth_strategy=keystone, configured from a config file as deployed."""
    path = tmp_path / "placement.conf"
    path.write_text(f"""\
[api]
auth_strategy = keystone

[placement_database]
connection = {db_url}

[oslo_policy]
enforce_new_defaults = True
policy_file = {tmp_path}/no-such-policy.yaml

[keystone_authtoken]
www_authenticate_uri = {keystone.url}/v3
auth_url = {keystone.url}/v3
auth_type = password
username = placement
password = secret
user_domain_id = default
project_name = service
project_domain_id = default
service_token_roles_required = True
http_request_max_retries = 0
""")
    conf = conf_mod.make_conf(default_config_files=[str(path)])
    app = app_mod.create_app(conf, db=db, sync=False)
    return app.test_client()


def _get(client, path, token=None, **headers):
    if token is not None:
        headers["x-auth-token"] = token
    headers.setdefault("openstack-api-version", "placement latest")
    return client.get(path, headers=headers)


def _provider_count(db):
    with db.read() as conn:
        return conn.execute(
            sa.select(sa.func.count()).select_from(models.resource_providers)
        ).scalar()


def test_valid_token_passes(client, keystone):
    keystone.issue("admin-token", ["admin", "member", "reader"], PROJECT)
    resp = _get(client, "/resource_classes", "admin-token")
    assert resp.status_code == 200, resp.get_data(as_text=True)
    assert "VCPU" in {rc["name"] for rc in resp.get_json()["resource_classes"]}
    assert "admin-token" in keystone.validations


@pytest.mark.parametrize(
    "token", [None, "never-issued", "expired-token"], ids=["missing", "invalid", "expired"]
)
def test_bad_token_gets_401(client, keystone, token):
    keystone.issue(
        "expired-token", ["admin"], PROJECT, expires=_now() - datetime.timedelta(minutes=5)
    )
    resp = _get(client, "/resource_providers", token)
    assert resp.status_code == 401
    # The client is told where to authenticate.
    assert keystone.url in resp.headers["WWW-Authenticate"]
    assert resp.get_json()["error"]["code"] == 401
    # Made by keystonemiddleware, outside Flask, yet it carries the request id.
    assert resp.headers["x-openstack-request-id"].startswith("req-")
    if token is not None:
        # Keystone was asked; for the expired token it answered 200 and the
        # middleware itself refused the past expiry.
        assert token in keystone.validations


def test_root_needs_no_token(client):
    resp = _get(client, "/")
    assert resp.status_code == 200
    assert resp.get_json()["versions"][0]["id"] == "v1.0"


def test_healthcheck_needs_no_token(client):
    # A load balancer has no token: /healthcheck sits outside keystone.
    resp = _get(client, "/healthcheck")
    assert resp.status_code == 200
    assert resp.get_data(as_text=True) == "database available"


def test_metrics_need_no_token_from_loopback_only(client):
    resp = client.get("/metrics", environ_base={"REMOTE_ADDR": "127.0.0.1"})
    assert resp.status_code == 200
    assert "placement_api_requests_total" in resp.get_data(as_text=True)
    # From elsewhere the path is like any other: keystone wants a token.
    resp = client.get("/metrics", environ_base={"REMOTE_ADDR": "192.0.2.10"})
    assert resp.status_code == 401


def test_reader_token_cannot_write(client, keystone, db):
    keystone.issue("reader-token", ["reader"], PROJECT)
    before = _provider_count(db)
    resp = client.post(
        "/resource_providers",
        json={"name": "sneaky"},
        headers={"x-auth-token": "reader-token", "openstack-api-version": "placement latest"},
    )
    assert resp.status_code == 403
    error = resp.get_json()["errors"][0]
    assert error["detail"].endswith(
        "Policy does not allow placement:resource_providers:create to be performed.  "
    )
    assert _provider_count(db) == before
    # A reader reads its own project's usages, as upstream lets it.
    resp = _get(client, f"/usages?project_id={PROJECT}", "reader-token")
    assert resp.status_code == 200, resp.get_data(as_text=True)


def test_client_cannot_claim_roles_with_headers(client, keystone, db):
    """Identity headers sent by the client are stripped; only the token counts."""
    keystone.issue("member-token", ["member", "reader"], PROJECT)
    resp = client.post(
        "/resource_providers",
        json={"name": "sneaky"},
        headers={
            "x-auth-token": "member-token",
            "x-roles": "admin",
            "x-project-id": PROJECT,
            "x-user-id": "admin",
            "openstack-api-version": "placement latest",
        },
    )
    assert resp.status_code == 403
    assert _provider_count(db) == 0


def test_admin_token_writes(client, keystone, db):
    keystone.issue("admin-token", ["admin", "member", "reader"], PROJECT)
    resp = client.post(
        "/resource_providers",
        json={"name": "rp-1"},
        headers={"x-auth-token": "admin-token", "openstack-api-version": "placement latest"},
    )
    assert resp.status_code == 200, resp.get_data(as_text=True)
    assert _provider_count(db) == 1
