"""Resource classes over HTTP: standard ones read-only, CUSTOM_ lifecycle, 1.7 PUT."""

from tests import builders
from tests.conftest import new_uuid


def _detail(resp):
    return resp.get_json()["errors"][0]["detail"]


def test_standard_classes_are_listed_and_read_only(client):
    names = [rc["name"] for rc in client.get("/resource_classes").get_json()["resource_classes"]]
    assert "VCPU" in names and "MEMORY_MB" in names
    assert client.get("/resource_classes", version="1.1").status_code == 404
    vcpu = client.get("/resource_classes/VCPU")
    assert vcpu.get_json() == {
        "name": "VCPU",
        "links": [{"rel": "self", "href": "/resource_classes/VCPU"}],
    }
    resp = client.delete("/resource_classes/VCPU")
    assert resp.status_code == 400 and "Cannot delete standard resource class" in _detail(resp)
    resp = client.put("/resource_classes/VCPU", json={"name": "CUSTOM_X"}, version="1.6")
    assert resp.status_code == 400 and "Cannot update standard resource class VCPU" in _detail(resp)
    resp = client.put("/resource_classes/VCPU", version="1.7")
    assert resp.status_code == 400 and "Failed validating 'pattern'" in _detail(resp)
    assert client.get("/resource_classes/CUSTOM_NOPE").status_code == 404


def test_custom_class_lifecycle(client):
    resp = client.post("/resource_classes", json={"name": "CUSTOM_GOLD"})
    assert resp.status_code == 201
    assert resp.headers["location"].endswith("/resource_classes/CUSTOM_GOLD")
    dup = client.post("/resource_classes", json={"name": "CUSTOM_GOLD"})
    assert dup.status_code == 409 and "Conflicting resource class already exists" in _detail(dup)
    for bad in ("GOLD", "CUSTOM_lower", "CUSTOM_" + "X" * 250):
        assert client.post("/resource_classes", json={"name": bad}).status_code == 400

    resp = client.put(
        "/resource_classes/CUSTOM_GOLD", json={"name": "CUSTOM_SILVER"}, version="1.6"
    )
    assert resp.status_code == 200 and resp.get_json()["name"] == "CUSTOM_SILVER"
    assert client.get("/resource_classes/CUSTOM_GOLD").status_code == 404

    # 1.7: bodiless PUT creates, then confirms.
    assert client.put("/resource_classes/CUSTOM_BRONZE", version="1.7").status_code == 201
    again = client.put("/resource_classes/CUSTOM_BRONZE", version="1.7")
    assert again.status_code == 204
    assert again.headers["location"].endswith("/resource_classes/CUSTOM_BRONZE")
    # Before 1.7 a bodiless PUT is a malformed update.
    resp = client.put(
        "/resource_classes/CUSTOM_BRONZE",
        version="1.6",
        headers={"content-type": "application/json"},
    )
    assert resp.status_code == 400 and "Malformed JSON" in _detail(resp)

    assert client.delete("/resource_classes/CUSTOM_SILVER").status_code == 204
    assert client.delete("/resource_classes/CUSTOM_SILVER").status_code == 404


def test_class_in_use_cannot_be_deleted(client, db):
    rp = builders.create_provider(db, "rp")
    builders.set_inventory(db, rp, "CUSTOM_GPU", 4)
    resp = client.delete("/resource_classes/CUSTOM_GPU")
    assert resp.status_code == 409 and "Class is in use in inventory" in _detail(resp)
    builders.allocate(db, new_uuid(), {rp: {"CUSTOM_GPU": 1}})
    client.put(
        f"/resource_providers/{rp}/inventories",
        json={"resource_provider_generation": 2, "inventories": {"CUSTOM_GPU": {"total": 8}}},
    )
    assert client.delete("/resource_classes/CUSTOM_GPU").status_code == 409
    assert client.get("/resource_classes/CUSTOM_GPU").status_code == 200
