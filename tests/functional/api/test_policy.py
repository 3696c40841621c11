"""Policy enforcement through the API (noauth2 headers stand in for keystone).

Every endpoint checks upstream's rule (or the extension's) before it touches
data, a denial is a 403 in upstream's error format, and a denied write leaves
the stored state as it was.
"""

import pytest
import sqlalchemy as sa

from placement import models
from placement import routes
from tests import builders
from tests.conftest import ApiClient
from tests.conftest import new_uuid

PROJECT = "9d7d2bc0a1f94d6c8a4f3b3e2d1c0b0a"
ALT_PROJECT = "1b2c3d4e5f60718293a4b5c6d7e8f901"

# The rule each endpoint must check: upstream's names, and the extension's.
EXPECTED_RULES = {
    ("GET", "/resource_providers"): "placement:resource_providers:list",
    ("POST", "/resource_providers"): "placement:resource_providers:create",
    ("GET", "/resource_providers/<uuid>"): "placement:resource_providers:show",
    ("PUT", "/resource_providers/<uuid>"): "placement:resource_providers:update",
    ("DELETE", "/resource_providers/<uuid>"): "placement:resource_providers:delete",
    ("GET", "/resource_classes"): "placement:resource_classes:list",
    ("POST", "/resource_classes"): "placement:resource_classes:create",
    ("GET", "/resource_classes/<name>"): "placement:resource_classes:show",
    ("PUT", "/resource_classes/<name>"): "placement:resource_classes:update",
    ("DELETE", "/resource_classes/<name>"): "placement:resource_classes:delete",
    (
        "GET",
        "/resource_providers/<uuid>/inventories",
    ): "placement:resource_providers:inventories:list",
    (
        "POST",
        "/resource_providers/<uuid>/inventories",
    ): "placement:resource_providers:inventories:create",
    (
        "PUT",
        "/resource_providers/<uuid>/inventories",
    ): "placement:resource_providers:inventories:update",
    (
        "DELETE",
        "/resource_providers/<uuid>/inventories",
    ): "placement:resource_providers:inventories:delete",
    (
        "GET",
        "/resource_providers/<uuid>/inventories/<resource_class>",
    ): "placement:resource_providers:inventories:show",
    (
        "PUT",
        "/resource_providers/<uuid>/inventories/<resource_class>",
    ): "placement:resource_providers:inventories:update",
    (
        "DELETE",
        "/resource_providers/<uuid>/inventories/<resource_class>",
    ): "placement:resource_providers:inventories:delete",
    ("GET", "/resource_providers/<uuid>/usages"): "placement:resource_providers:usages",
    (
        "GET",
        "/resource_providers/<uuid>/aggregates",
    ): "placement:resource_providers:aggregates:list",
    (
        "PUT",
        "/resource_providers/<uuid>/aggregates",
    ): "placement:resource_providers:aggregates:update",
    (
        "GET",
        "/resource_providers/<uuid>/allocations",
    ): "placement:resource_providers:allocations:list",
    ("POST", "/allocations"): "placement:allocations:manage",
    ("GET", "/allocations/<consumer_uuid>"): "placement:allocations:list",
    ("PUT", "/allocations/<consumer_uuid>"): "placement:allocations:update",
    ("DELETE", "/allocations/<consumer_uuid>"): "placement:allocations:delete",
    ("GET", "/allocation_candidates"): "placement:allocation_candidates:list",
    ("GET", "/traits"): "placement:traits:list",
    ("GET", "/traits/<name>"): "placement:traits:show",
    ("PUT", "/traits/<name>"): "placement:traits:update",
    ("DELETE", "/traits/<name>"): "placement:traits:delete",
    ("GET", "/resource_providers/<uuid>/traits"): "placement:resource_providers:traits:list",
    ("PUT", "/resource_providers/<uuid>/traits"): "placement:resource_providers:traits:update",
    ("DELETE", "/resource_providers/<uuid>/traits"): "placement:resource_providers:traits:delete",
    ("GET", "/usages"): "placement:usages",
    ("POST", "/reshaper"): "placement:reshaper:reshape",
    # Extensions.
    ("GET", "/workload_usages"): "placement:workload_usages:list",
    ("GET", "/nodes"): "placement:nodes:list",
    ("GET", "/nodes/<uuid>"): "placement:nodes:show",
    ("PUT", "/nodes/<uuid>"): "placement:nodes:update",
    ("DELETE", "/nodes/<uuid>"): "placement:nodes:delete",
    ("GET", "/nodes/<uuid>/hardware"): "placement:nodes:show",
    ("PUT", "/nodes/<uuid>/hardware"): "placement:nodes:update",
    ("GET", "/nodes/<uuid>/twin"): "placement:nodes:show",
    ("PUT", "/nodes/<uuid>/twin"): "placement:nodes:update",
    ("POST", "/nodes/twins"): "placement:nodes:update",
    ("POST", "/nodes/<uuid>/build_outcome"): "placement:nodes:update",
    ("POST", "/nodes/<uuid>/heartbeat"): "placement:nodes:update",
    ("POST", "/nodes/build_outcomes"): "placement:nodes:update",
    ("GET", "/build_requests"): "placement:build_requests:list",
    ("POST", "/build_requests"): "placement:build_requests:update",
    ("GET", "/build_requests/counts"): "placement:build_requests:list",
    ("GET", "/build_requests/<instance_uuid>"): "placement:build_requests:list",
    ("PUT", "/build_requests/<instance_uuid>"): "placement:build_requests:update",
    ("PUT", "/build_requests"): "placement:build_requests:update",
    ("PUT", "/build_requests/<instance_uuid>/lease"): "placement:build_requests:update",
    ("PUT", "/build_requests/<instance_uuid>/instance_state"): "placement:build_requests:update",
    ("PUT", "/build_requests/leases"): "placement:build_requests:update",
    ("GET", "/scheduling_reports/<request_id>"): "placement:scheduling_reports:show",
    ("PUT", "/scheduling_reports/<request_id>"): "placement:scheduling_reports:update",
    ("POST", "/scheduling_reports"): "placement:scheduling_reports:update",
    ("GET", "/server_groups"): "placement:server_groups:list",
    ("POST", "/server_groups"): "placement:server_groups:create",
    ("GET", "/server_groups/<uuid>"): "placement:server_groups:show",
    ("DELETE", "/server_groups/<uuid>"): "placement:server_groups:delete",
    (
        "DELETE",
        "/server_groups/<uuid>/members/<instance_uuid>",
    ): "placement:server_groups:members:delete",
}

PATH_VALUES = {
    "uuid": new_uuid(),
    "name": "CUSTOM_POLICY_PROBE",
    "resource_class": "VCPU",
    "consumer_uuid": new_uuid(),
    "instance_uuid": new_uuid(),
    "request_id": "req-" + new_uuid(),
}


def _headers(roles, project=PROJECT, system_scope=None):
    headers = {"x-auth-token": "user", "x-roles": ",".join(roles), "x-project-id": project}
    if system_scope:
        headers["openstack-system-scope"] = system_scope
        headers["x-project-id"] = None
    return headers


def _concrete(path):
    for name, value in PATH_VALUES.items():
        path = path.replace(f"<{name}>", value)
    return path


def _secure_client(make_flask_client, **overrides):
    return ApiClient(
        make_flask_client(
            **{
                "oslo_policy.enforce_new_defaults": True,
                "oslo_policy.policy_file": "/nonexistent/policy.yaml",
                **overrides,
            }
        )
    )


def test_every_route_has_a_rule():
    routed = {(m, p) for p, methods in routes.ROUTES.items() for m in methods if p != "/"}
    assert routed == set(EXPECTED_RULES)


def test_every_endpoint_checks_its_rule_first(client):
    """A caller without roles gets 403 naming the endpoint's rule, on every endpoint.

    The ids in the path do not exist and the bodies are empty JSON: the
    policy check comes before lookup and body validation, as upstream, so an
    unauthorized caller learns nothing about what exists.
    """
    wrong = []
    for (method, path), rule in EXPECTED_RULES.items():
        url = _concrete(path)
        if path == "/usages":
            url += f"?project_id={ALT_PROJECT}"
        headers = _headers([])
        if method in ("PUT", "POST"):
            # Upstream refuses a wrong media type (415) before the policy check.
            headers["content-type"] = "application/json"
        resp = client.request(method, url, headers=headers, data=b"", version="latest")
        detail = f"Policy does not allow {rule} to be performed."
        body = resp.get_json(silent=True) or {}
        got = (body.get("errors") or [{}])[0].get("detail", "")
        if resp.status_code != 403 or detail not in got:
            wrong.append(f"{method} {path}: {resp.status_code} {got!r}, wanted 403 {rule}")
    assert not wrong, "\n".join(wrong)


def test_denial_is_upstreams_error_format(client):
    resp = client.get("/resource_providers", headers=_headers(["reader"]))
    assert resp.status_code == 403
    body = resp.get_json()
    error = body["errors"][0]
    assert error["status"] == 403
    assert error["title"] == "Forbidden"
    assert error["code"] == "placement.undefined_code"
    assert error["detail"] == (
        "Access was denied to this resource.\n\n Policy does not allow "
        "placement:resource_providers:list to be performed.  "
    )
    assert error["request_id"] == resp.headers["x-openstack-request-id"]


def _provider_names(db):
    with db.read() as conn:
        return {
            r.uuid: r.name
            for r in conn.execute(
                sa.select(models.resource_providers.c.uuid, models.resource_providers.c.name)
            )
        }


@pytest.mark.parametrize("secure", [False, True], ids=["legacy", "secure"])
def test_denied_writes_change_nothing(db, make_flask_client, secure):
    client = _secure_client(make_flask_client, **{"oslo_policy.enforce_new_defaults": secure})
    rp = builders.create_provider(db, name="keep-me")
    before = _provider_names(db)
    member = _headers(["member", "reader"])
    system_admin = _headers(["admin", "member", "reader"], system_scope="all")
    attempts = [
        ("DELETE", f"/resource_providers/{rp}", None, member),
        ("PUT", f"/resource_providers/{rp}", {"name": "renamed"}, member),
        ("POST", "/resource_providers", {"name": "new"}, member),
        ("DELETE", f"/resource_providers/{rp}", None, system_admin),
        ("POST", "/resource_providers", {"name": "new"}, system_admin),
    ]
    for method, url, body, headers in attempts:
        resp = client.request(method, url, json=body, headers=headers)
        assert resp.status_code == 403, (method, url, resp.get_data(as_text=True))
    assert _provider_names(db) == before


def test_secure_defaults_roles(make_flask_client):
    """Admin and service pass; project readers only see their own project's usages."""
    client = _secure_client(make_flask_client)
    admin = _headers(["admin", "member", "reader"])
    service = _headers(["service"], project=ALT_PROJECT)
    reader = _headers(["reader"])
    alt_reader = _headers(["reader"], project=ALT_PROJECT)

    assert client.get("/resource_providers", headers=admin).status_code == 200
    assert client.get("/resource_providers", headers=service).status_code == 200
    assert client.get("/resource_providers", headers=reader).status_code == 403

    usages = f"/usages?project_id={PROJECT}"
    assert client.get(usages, headers=reader).status_code == 200
    assert client.get(usages, headers=alt_reader).status_code == 403
    assert client.get(usages, headers=_headers(["admin"], ALT_PROJECT)).status_code == 200

    # Reshape is for services only once the legacy admin fallback is off.
    resp = client.post("/reshaper", json={}, headers=service)
    assert resp.status_code == 400  # past the policy check, the empty body is refused
    assert client.post("/reshaper", json={}, headers=admin).status_code == 403


def test_extension_data_hidden_from_project_readers(db, make_flask_client):
    """Node data, build requests, reports and workload counts: admin and service only."""
    client = _secure_client(make_flask_client)
    rp = builders.create_provider(db, name="node-1")
    reader = _headers(["reader"])
    member = _headers(["member", "reader"])
    admin = _headers(["admin", "member", "reader"])
    reads = [
        "/nodes",
        f"/nodes/{rp}",
        f"/nodes/{rp}/hardware",
        f"/nodes/{rp}/twin",
        "/build_requests",
        f"/scheduling_reports/req-{new_uuid()}",
        "/workload_usages",
    ]
    for url in reads:
        for who in (reader, member):
            resp = client.get(url, headers=who)
            assert resp.status_code == 403, (url, resp.status_code)
    assert client.get("/nodes", headers=admin).status_code == 200
    assert client.get("/workload_usages", headers=admin).status_code == 200


def test_policy_file_overrides_a_default(make_flask_client, tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text('"placement:resource_providers:list": "role:reader"\n')
    client = _secure_client(make_flask_client, **{"oslo_policy.policy_file": str(path)})
    assert client.get("/resource_providers", headers=_headers(["reader"])).status_code == 200
    # Other rules keep their defaults.
    assert client.get("/traits", headers=_headers(["reader"])).status_code == 403
