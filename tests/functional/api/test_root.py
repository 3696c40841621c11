"""Version discovery, microversion negotiation, request ids and error format."""

import pytest


def test_root_needs_no_token(client):
    resp = client.get("/", headers={"x-auth-token": ""}, version="")
    assert resp.status_code == 200
    body = resp.get_json()
    assert body["versions"][0]["max_version"] == "1.39"
    assert body["versions"][0]["min_version"] == "1.0"
    assert resp.headers["x-openstack-request-id"].startswith("req-")


def test_microversion_headers(client):
    resp = client.get("/", version="1.20")
    assert resp.headers["openstack-api-version"] == "placement 1.20"
    assert "openstack-api-version" in resp.headers["vary"].lower()
    resp = client.get("/", version="latest")
    assert resp.headers["openstack-api-version"] == "placement 1.39"
    resp = client.get("/", version="")
    assert resp.headers["openstack-api-version"] == "placement 1.0"


@pytest.mark.parametrize("value,status", [("1.40", 406), ("2.0", 406), ("1.a", 400),
                                          ("one", 400)])
def test_bad_microversion(client, value, status):
    resp = client.get("/", version=value)
    assert resp.status_code == status
    err = resp.get_json()["errors"][0]
    assert err["status"] == status
    assert "Invalid microversion" in err["detail"]
    if status == 406:
        assert err["max_version"] == "1.39"
        assert err["min_version"] == "1.0"


def test_missing_token_is_401(client):
    resp = client.get("/resource_providers", headers={"x-auth-token": None})
    assert resp.status_code == 401


def test_unknown_path_404_json(client):
    resp = client.get("/no_such_thing", version="1.23")
    assert resp.status_code == 404
    err = resp.get_json()["errors"][0]
    assert err["code"] == "placement.undefined_code"
    assert err["request_id"] == resp.headers["x-openstack-request-id"]


def test_error_code_only_from_1_23(client):
    resp = client.get("/no_such_thing", version="1.22")
    assert "code" not in resp.get_json()["errors"][0]


def test_405_with_allow(client):
    resp = client.request("PATCH", "/resource_providers")
    assert resp.status_code == 405
    assert set(resp.headers["allow"].split(", ")) == {"GET", "POST"}
    assert "The method PATCH is not allowed" in resp.get_json()["errors"][0]["detail"]
