"""CORS through oslo.middleware, as upstream's cors.yaml and non-cors.yaml."""

import pytest

ORIGIN = "http://valid.example.com"


@pytest.fixture
def cors_client(make_flask_client):
    return make_flask_client(
        **{"cors.allowed_origin": [ORIGIN], "cors.allow_headers": ["openstack-api-version"]}
    )


def test_preflight_from_allowed_origin(cors_client):
    resp = cors_client.options(
        "/",
        headers={
            "origin": ORIGIN,
            "access-control-request-method": "GET",
            "access-control-request-headers": "openstack-api-version",
        },
    )
    assert resp.status_code == 200
    assert resp.headers["access-control-allow-origin"] == ORIGIN
    assert resp.headers["access-control-allow-headers"] == "openstack-api-version"


def test_other_origins_get_no_cors_headers(cors_client):
    headers = {"origin": "http://invalid.example.com", "access-control-request-method": "GET"}
    resp = cors_client.options("/", headers=headers)
    assert resp.status_code == 200
    assert "access-control-allow-origin" not in resp.headers
    resp = cors_client.get("/", headers=headers)
    assert resp.status_code == 200
    assert "access-control-allow-origin" not in resp.headers


def test_cors_headers_on_answers_and_errors(cors_client):
    assert (
        cors_client.get("/", headers={"origin": ORIGIN}).headers["access-control-allow-origin"]
        == ORIGIN
    )
    # A browser must be able to read an error too (here: no token).
    resp = cors_client.get("/resource_providers", headers={"origin": ORIGIN})
    assert resp.status_code == 401
    assert resp.headers["access-control-allow-origin"] == ORIGIN


def test_without_cors_options_is_not_allowed(client):
    resp = client.request(
        "OPTIONS", "/", headers={"origin": ORIGIN, "access-control-request-method": "GET"}
    )
    assert resp.status_code == 405
    resp = client.get("/", headers={"origin": ORIGIN})
    assert resp.status_code == 200
    assert "access-control-allow-origin" not in resp.headers
