"""Inventories over HTTP: every verb, generations, validation, in-use protection."""

import pytest

from tests import builders
from tests.conftest import new_uuid


def _detail(resp):
    return resp.get_json()["errors"][0]["detail"]


def _code(resp):
    return resp.get_json()["errors"][0].get("code")


@pytest.fixture
def rp(client):
    return client.post("/resource_providers", json={"name": "cn"}).get_json()["uuid"]


def test_post_get_put_delete_one(client, rp):
    url = f"/resource_providers/{rp}/inventories"
    resp = client.post(
        url,
        json={
            "resource_class": "DISK_GB",
            "total": 2048,
            "reserved": 512,
            "min_unit": 10,
            "max_unit": 1024,
            "step_size": 10,
        },
    )
    assert resp.status_code == 201
    assert resp.headers["location"].endswith(f"{url}/DISK_GB")
    assert resp.get_json() == {
        "total": 2048,
        "reserved": 512,
        "min_unit": 10,
        "max_unit": 1024,
        "step_size": 10,
        "allocation_ratio": 1.0,
        "resource_provider_generation": 1,
    }
    again = client.post(url, json={"resource_class": "DISK_GB", "total": 1})
    assert again.status_code == 409 and _code(again) == "placement.concurrent_update"

    one = client.get(f"{url}/DISK_GB", version="1.15")
    assert one.get_json()["reserved"] == 512 and "last-modified" in one.headers
    resp = client.put(f"{url}/DISK_GB", json={"resource_provider_generation": 1, "total": 4096})
    assert resp.status_code == 200
    assert resp.get_json()["total"] == 4096 and resp.get_json()["reserved"] == 0
    assert resp.get_json()["resource_provider_generation"] == 2

    stale = client.put(f"{url}/DISK_GB", json={"resource_provider_generation": 1, "total": 1})
    assert stale.status_code == 409 and _code(stale) == "placement.concurrent_update"
    assert "resource provider generation conflict" in _detail(stale)
    absent = client.put(f"{url}/VCPU", json={"resource_provider_generation": 2, "total": 1})
    assert absent.status_code == 400 and "No inventory record with resource class" in _detail(
        absent
    )
    assert client.get(f"{url}/VCPU").status_code == 404
    assert client.get(f"{url}/DISK_GB").get_json()["total"] == 4096

    assert client.delete(f"{url}/DISK_GB").status_code == 204
    resp = client.delete(f"{url}/DISK_GB")
    assert resp.status_code == 404 and "No inventory of class DISK_GB found for delete" in _detail(
        resp
    )
    body = client.get(url).get_json()
    assert body == {"inventories": {}, "resource_provider_generation": 3}


@pytest.mark.parametrize(
    "fields,version,text",
    [
        ({"total": 0}, None, "Failed validating 'minimum' in schema['properties']['total']"),
        ({"total": 10, "reserved": -1}, None, "less than the minimum of 0"),
        ({"total": 10, "min_unit": 0}, None, "schema['properties']['min_unit']"),
        ({"total": 10, "max_unit": 0}, None, "schema['properties']['max_unit']"),
        ({"total": 10, "step_size": 0}, None, "schema['properties']['step_size']"),
        ({"total": 2147483648}, None, "Failed validating 'maximum'"),
        ({"total": "ten"}, None, "is not of type 'integer'"),
        ({"total": 10, "colour": "red"}, None, "Additional properties are not allowed"),
        ({"total": 10, "allocation_ratio": 0}, None, "allocation_ratio must be greater than 0"),
        ({"total": 10, "min_unit": 5, "max_unit": 2}, None, "min_unit (5) is greater than"),
        ({"total": 10, "reserved": 11}, None, "The reserved value is greater than total"),
        ({"total": 10, "reserved": 10}, "1.25", "greater than or equal to total"),
        ({"resource_class": "lower", "total": 10}, None, "Failed validating 'pattern'"),
        ({"resource_class": "NO_SUCH_CLASS", "total": 10}, None, "No such resource class"),
    ],
)
def test_post_validation(client, rp, fields, version, text):
    body = {"resource_class": "VCPU", **fields}
    resp = client.post(f"/resource_providers/{rp}/inventories", json=body, version=version)
    assert resp.status_code == 400
    assert text in _detail(resp)
    # Nothing stored, generation unchanged.
    inv = client.get(f"/resource_providers/{rp}/inventories").get_json()
    assert inv == {"inventories": {}, "resource_provider_generation": 0}


def test_reserved_equal_total_from_1_26(client, rp):
    url = f"/resource_providers/{rp}/inventories"
    body = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4, "reserved": 4}}}
    assert client.put(url, json=body, version="1.25").status_code == 400
    resp = client.put(url, json=body, version="1.26")
    assert resp.status_code == 200 and resp.get_json()["inventories"]["VCPU"]["reserved"] == 4


def test_replace_all_and_delete_all(client, db, rp):
    url = f"/resource_providers/{rp}/inventories"
    resp = client.put(
        url,
        json={
            "resource_provider_generation": 0,
            "inventories": {
                "VCPU": {"total": 8},
                "MEMORY_MB": {"total": 4096, "allocation_ratio": 1.5},
            },
        },
    )
    assert resp.status_code == 200
    assert set(resp.get_json()["inventories"]) == {"VCPU", "MEMORY_MB"}
    assert resp.get_json()["resource_provider_generation"] == 1

    unknown = client.put(
        url,
        json={
            "resource_provider_generation": 1,
            "inventories": {"VCPU": {"total": 8}, "HOUSE": {"total": 1}},
        },
    )
    assert unknown.status_code == 400 and "Unknown resource class in inventory" in _detail(unknown)

    builders.allocate(db, new_uuid(), {rp: {"VCPU": 2}})  # bumps generation to 2
    drop = client.put(
        url, json={"resource_provider_generation": 2, "inventories": {"MEMORY_MB": {"total": 4096}}}
    )
    assert drop.status_code == 409 and _code(drop) == "placement.inventory.inuse"
    assert f"Inventory for 'VCPU' on resource provider '{rp}' in use" in _detail(drop)
    one = client.delete(f"{url}/VCPU")
    assert one.status_code == 409 and _code(one) == "placement.inventory.inuse"
    everything = client.delete(url)
    assert everything.status_code == 409 and _code(everything) == "placement.inventory.inuse"
    # Shrinking below usage is allowed, as upstream.
    shrink = client.put(
        url, json={"resource_provider_generation": 2, "inventories": {"VCPU": {"total": 1}}}
    )
    assert shrink.status_code == 200 and set(shrink.get_json()["inventories"]) == {"VCPU"}

    other = client.post("/resource_providers", json={"name": "other"}).get_json()["uuid"]
    ourl = f"/resource_providers/{other}/inventories"
    client.post(ourl, json={"resource_class": "DISK_GB", "total": 10})
    assert client.delete(ourl, version="1.4").status_code == 405
    assert client.delete(ourl, version="1.5").status_code == 204
    assert client.get(ourl).get_json() == {"inventories": {}, "resource_provider_generation": 2}


def test_missing_provider(client):
    uuid = new_uuid()
    resp = client.get(f"/resource_providers/{uuid}/inventories")
    assert resp.status_code == 404 and f"No resource provider with uuid {uuid} found" in _detail(
        resp
    )
    assert (
        client.put(
            f"/resource_providers/{uuid}/inventories",
            json={"resource_provider_generation": 0, "inventories": {}},
        ).status_code
        == 404
    )
    assert client.delete(f"/resource_providers/{uuid}/inventories").status_code == 404
