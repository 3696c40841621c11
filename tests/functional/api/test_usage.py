"""Usages of a provider and total usages of a project (1.9, by consumer type from 1.38)."""

import uuid as uuid_lib

from tests import builders


def new_uuid():
    return str(uuid_lib.uuid4())


def claim(client, rp, resources, project, user, consumer_type=None):
    body = {
        "allocations": {rp: {"resources": resources}},
        "project_id": project,
        "user_id": user,
        "consumer_generation": None,
    }
    version = "1.28"
    if consumer_type:
        body["consumer_type"], version = consumer_type, "1.38"
    resp = client.put(f"/allocations/{new_uuid()}", json=body, version=version)
    assert resp.status_code == 204, resp.get_data(as_text=True)


def test_provider_usages(client, db):
    missing = new_uuid()
    resp = client.get(f"/resource_providers/{missing}/usages")
    assert resp.status_code == 404
    assert (
        f"No resource provider with uuid {missing} found" in resp.get_json()["errors"][0]["detail"]
    )
    rp = builders.create_provider(db)
    assert client.get(f"/resource_providers/{rp}/usages").get_json() == {
        "resource_provider_generation": 0,
        "usages": {},
    }
    builders.set_inventory(db, rp, "VCPU", 8)
    builders.set_inventory(db, rp, "DISK_GB", 100)
    claim(client, rp, {"VCPU": 3}, "p1", "u1")
    resp = client.get(f"/resource_providers/{rp}/usages", version="1.15")
    assert resp.get_json()["usages"] == {"VCPU": 3, "DISK_GB": 0}
    assert resp.headers["cache-control"] == "no-cache"
    resp = client.get(f"/resource_providers/{rp}/usages", version="1.14")
    assert "last-modified" not in resp.headers


def test_total_usages(client, db):
    rp = builders.create_provider(db)
    builders.set_inventory(db, rp, "VCPU", 32)
    builders.set_inventory(db, rp, "MEMORY_MB", 4096)
    claim(client, rp, {"VCPU": 2, "MEMORY_MB": 512}, "p1", "u1")
    claim(client, rp, {"VCPU": 1}, "p1", "u2", consumer_type="INSTANCE")
    claim(client, rp, {"VCPU": 4}, "p2", "u1", consumer_type="MIGRATION")

    assert client.get("/usages?project_id=p1", version="1.8").status_code == 404
    assert client.get("/usages", version="1.9").status_code == 400
    assert client.get("/usages?project_id=p1&dummy=1", version="1.9").status_code == 400
    assert client.get("/usages?project_id=", version="1.9").status_code == 400
    assert client.get("/usages?project_id=p1", version="1.9").get_json() == {
        "usages": {"VCPU": 3, "MEMORY_MB": 512}
    }
    assert client.get("/usages?project_id=p1&user_id=u2", version="1.37").get_json() == {
        "usages": {"VCPU": 1}
    }
    assert client.get("/usages?project_id=nobody", version="1.9").get_json() == {"usages": {}}

    by_type = client.get("/usages?project_id=p1", version="1.38").get_json()["usages"]
    assert by_type == {
        "unknown": {"consumer_count": 1, "VCPU": 2, "MEMORY_MB": 512},
        "INSTANCE": {"consumer_count": 1, "VCPU": 1},
    }
    assert client.get("/usages?project_id=p1&consumer_type=all", version="1.38").get_json()[
        "usages"
    ] == {"all": {"consumer_count": 2, "VCPU": 3, "MEMORY_MB": 512}}
    assert client.get("/usages?project_id=p1&consumer_type=unknown", version="1.38").get_json()[
        "usages"
    ] == {"unknown": {"consumer_count": 1, "VCPU": 2, "MEMORY_MB": 512}}
    for other in ("ALL", "COW"):
        assert client.get(
            f"/usages?project_id=p1&consumer_type={other}", version="1.38"
        ).get_json() == {"usages": {}}
    assert (
        client.get("/usages?project_id=p1&consumer_type=bad-type", version="1.38").status_code
        == 400
    )
