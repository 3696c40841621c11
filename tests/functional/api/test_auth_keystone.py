"""The API behind keystonemiddleware, with a fake identity service on 127.0.0.1.

The fake (tests/keystone.py, started by the ``keystone`` fixture) answers
what auth_token really asks over HTTP: version discovery, a password login
for placement's own service user (``POST /v3/auth/tokens``) and validation
of each user token (``GET /v3/auth/tokens`` with ``X-Subject-Token``; 404
for a token it never issued, as keystone).
"""

import datetime
import uuid

import pytest
import sqlalchemy as sa

from placement import app as app_mod
from placement import conf as conf_mod
from placement import models
from tests.keystone import utcnow

PROJECT = uuid.uuid4().hex


@pytest.fixture
def client(keystone, db, db_url, tmp_path):
    """The app with auth_strategy=keystone, configured from a config file as deployed."""
    path = tmp_path / "placement.conf"
    path.write_text(
        keystone.placement_conf(db_url)
        + f"""
[oslo_policy]
enforce_new_defaults = True
policy_file = {tmp_path}/no-such-policy.yaml
"""
    )
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
        "expired-token", ["admin"], PROJECT, expires=utcnow() - datetime.timedelta(minutes=5)
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
