"""Regressions found by comparing the API reference (and upstream 16.0.0 run
side by side on the same request sequence) with our app; see
docs/conformance.md "API reference audit". The gabbits did not cover these.
"""

import pytest

from tests.conftest import new_uuid


def _rp(client, name="rp", **extra):
    resp = client.post("/resource_providers", json={"name": name, **extra}, version="1.20")
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()["uuid"]


@pytest.mark.parametrize("version", ["1.1", "1.18"])
def test_aggregates_response_is_an_object_before_1_19(client, version):
    # The request body is a bare list before 1.19, the response is not.
    url = f"/resource_providers/{_rp(client)}/aggregates"
    agg = new_uuid()
    assert client.get(url, version=version).get_json() == {"aggregates": []}
    resp = client.put(url, json=[agg], version=version)
    assert resp.status_code == 200
    assert resp.get_json() == {"aggregates": [agg]}
    assert client.get(url, version=version).get_json() == {"aggregates": [agg]}
    assert client.get(url, version="1.19").get_json() == {
        "aggregates": [agg],
        "resource_provider_generation": 0,
    }


@pytest.mark.parametrize("version", ["1.0", "1.20"])
def test_create_provider_with_empty_name_is_400(client, version):
    resp = client.post("/resource_providers", json={"name": ""}, version=version)
    assert resp.status_code == 400
    detail = resp.get_json()["errors"][0]["detail"]
    assert 'Unable to create resource provider ""' in detail
    assert "Object action create failed because: name is required" in detail
    assert client.get("/resource_providers").get_json()["resource_providers"] == []


def test_empty_name_filter_filters_nothing(client):
    a, b = _rp(client, "a"), _rp(client, "b")
    got = client.get("/resource_providers?name=").get_json()["resource_providers"]
    assert sorted(rp["uuid"] for rp in got) == sorted([a, b])
    got = client.get("/resource_providers?name=a").get_json()["resource_providers"]
    assert [rp["uuid"] for rp in got] == [a]


def test_version_boundaries_of_provider_bodies(client):
    """Body keys and headers per microversion, as the reference lists them."""
    parent = _rp(client, "parent")
    child = _rp(client, "child", parent_provider_uuid=parent)
    rels = {
        "1.0": ["self", "inventories", "usages"],
        "1.1": ["self", "inventories", "usages", "aggregates"],
        "1.6": ["self", "inventories", "usages", "aggregates", "traits"],
        "1.11": ["self", "inventories", "usages", "aggregates", "traits", "allocations"],
    }
    for version, want in rels.items():
        body = client.get(f"/resource_providers/{child}", version=version).get_json()
        assert [link["rel"] for link in body["links"]] == want, version
    old = client.get(f"/resource_providers/{child}", version="1.13")
    assert set(old.get_json()) == {"uuid", "name", "generation", "links"}
    assert "last-modified" not in old.headers and "cache-control" not in old.headers
    new = client.get(f"/resource_providers/{child}", version="1.15")
    assert new.get_json()["parent_provider_uuid"] == parent
    assert new.get_json()["root_provider_uuid"] == parent
    assert new.headers["cache-control"] == "no-cache" and new.headers["last-modified"]
    # 1.0-1.19: 201, Location, no body; 1.20+: 200 with the provider.
    created = client.post("/resource_providers", json={"name": "x"}, version="1.19")
    assert created.status_code == 201 and created.data == b""
    assert "/resource_providers/" in created.headers["location"]


def test_version_boundaries_of_errors_and_deletes(client):
    rp = _rp(client)
    # No error code before 1.23, one from 1.23.
    old = client.get(f"/resource_providers/{new_uuid()}", version="1.22").get_json()
    assert "code" not in old["errors"][0]
    new = client.get(f"/resource_providers/{new_uuid()}", version="1.23").get_json()
    assert new["errors"][0]["code"] == "placement.undefined_code"
    # DELETE of all inventories exists from 1.5.
    assert client.delete(f"/resource_providers/{rp}/inventories", version="1.4").status_code == 405
    assert client.delete(f"/resource_providers/{rp}/inventories", version="1.5").status_code == 204
    # Traits from 1.6, resource classes from 1.2, usages from 1.9.
    assert client.get("/traits", version="1.5").status_code == 404
    assert client.get("/resource_classes", version="1.1").status_code == 404
    assert client.get(f"/usages?project_id={new_uuid()}", version="1.8").status_code == 404
    # PUT /resource_classes/{name}: 1.2-1.6 renames (body), 1.7+ creates (201, then 204).
    assert client.put("/resource_classes/CUSTOM_A", version="1.7").status_code == 201
    assert client.put("/resource_classes/CUSTOM_A", version="1.7").status_code == 204
    assert (
        client.put(
            "/resource_classes/CUSTOM_A", json={"name": "CUSTOM_B"}, version="1.6"
        ).status_code
        == 200
    )
