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


def test_vary_names_the_microversion_header_in_lower_case(client):
    resp = client.get("/", version="1.20")
    assert "openstack-api-version" in resp.headers.get_all("vary")


def test_root_caching_headers_from_1_15(client):
    resp = client.get("/", version="1.15")
    assert resp.headers["cache-control"] == "no-cache"
    assert resp.headers["last-modified"].endswith(" GMT")
    resp = client.get("/", version="1.14")
    assert "last-modified" not in resp.headers
    assert "cache-control" not in resp.headers


def test_unknown_path_is_404_whatever_the_accept(client):
    resp = client.get("/moo", headers={"accept": "text/plain"})
    assert resp.status_code == 404
    assert "The resource could not be found" in resp.get_data(as_text=True)


def test_body_without_content_type_is_400(client):
    resp = client.request("POST", "/resource_providers", data=b"I want a provider",
                          headers={"content-type": None})
    assert resp.status_code == 400
    assert "content-type header required" in resp.get_json()["errors"][0]["detail"]


def test_content_length_not_an_integer_is_400(app):
    # The test client computes content-length itself; override it in the environ.
    resp = app.test_client().post(
        "/resource_providers", data=b"{}",
        headers={"x-auth-token": "admin", "content-type": "application/json"},
        environ_overrides={"CONTENT_LENGTH": "hi mom"})
    assert resp.status_code == 400
    assert "content-length header must be an integer" in \
        resp.get_json()["errors"][0]["detail"]
