"""Resource providers over HTTP: create, show, rename, nest, delete, list filters."""

import uuid as uuid_lib

from tests import builders
from tests.conftest import new_uuid


def _detail(resp):
    return resp.get_json()["errors"][0]["detail"]


def _code(resp):
    return resp.get_json()["errors"][0].get("code")


def test_create_versions_and_duplicates(client):
    uuid = new_uuid()
    old = client.post("/resource_providers", json={"name": "cn1", "uuid": uuid}, version="1.19")
    assert old.status_code == 201
    assert old.headers["location"].endswith(f"/resource_providers/{uuid}")
    assert old.get_data() == b"" and "content-type" not in old.headers

    # 1.20 returns the provider; an undashed uuid is stored dashed.
    raw = uuid_lib.uuid4()
    new = client.post("/resource_providers", json={"name": "cn2", "uuid": raw.hex})
    assert new.status_code == 200
    body = new.get_json()
    assert body["uuid"] == str(raw) and body["generation"] == 0
    assert body["parent_provider_uuid"] is None and body["root_provider_uuid"] == str(raw)
    assert {link["rel"] for link in body["links"]} == {
        "self",
        "inventories",
        "usages",
        "aggregates",
        "traits",
        "allocations",
    }

    dup = client.post("/resource_providers", json={"name": "cn1", "uuid": str(raw)})
    assert dup.status_code == 409 and _code(dup) == "placement.duplicate_name"
    assert f"uuid: {raw}, name: cn1 already exists" in _detail(dup)

    bad = client.post("/resource_providers", json={"name": "x" * 201})
    assert bad.status_code == 400 and "Failed validating 'maxLength'" in _detail(bad)
    bad = client.post("/resource_providers", json={"name": "x", "uuid": "not-a-uuid"})
    assert bad.status_code == 400 and "Failed validating 'format'" in _detail(bad)
    bad = client.post("/resource_providers", data="{", headers={"content-type": "application/json"})
    assert bad.status_code == 400 and "Malformed JSON" in _detail(bad)
    bad = client.post("/resource_providers", data="name=x", headers={"content-type": "text/plain"})
    assert bad.status_code == 415
    # Nothing of the refused requests was stored.
    assert len(client.get("/resource_providers").get_json()["resource_providers"]) == 2


def test_links_and_fields_follow_microversion(client):
    uuid = client.post("/resource_providers", json={"name": "rp"}).get_json()["uuid"]
    body = client.get(f"/resource_providers/{uuid}", version="1.0").get_json()
    assert [link["rel"] for link in body["links"]] == ["self", "inventories", "usages"]
    assert "root_provider_uuid" not in body
    body = client.get(f"/resource_providers/{uuid}", version="1.10").get_json()
    assert len(body["links"]) == 5
    resp = client.get(f"/resource_providers/{uuid}", version="1.15")
    assert resp.headers["cache-control"] == "no-cache" and "last-modified" in resp.headers
    assert "last-modified" not in client.get(f"/resource_providers/{uuid}", version="1.14").headers
    missing = client.get(f"/resource_providers/{new_uuid()}")
    assert missing.status_code == 404 and "No resource provider with uuid" in _detail(missing)


def test_rename_and_parenting_rules(client):
    def create(name, parent=None):
        body = {"name": name}
        if parent:
            body["parent_provider_uuid"] = parent
        return client.post("/resource_providers", json=body).get_json()["uuid"]

    root, other = create("root"), create("other")
    child = create("child", root)
    grandchild = create("grandchild", child)

    resp = client.put(f"/resource_providers/{child}", json={"name": "other"})
    assert resp.status_code == 409 and _code(resp) == "placement.duplicate_name"
    resp = client.put(f"/resource_providers/{child}", json={"name": "kid"})
    assert resp.status_code == 200 and resp.get_json()["name"] == "kid"

    # Before 1.37 a provider with a parent keeps it.
    resp = client.put(
        f"/resource_providers/{child}",
        json={"name": "kid", "parent_provider_uuid": other},
        version="1.36",
    )
    assert resp.status_code == 400
    assert "re-parenting a provider is not currently allowed" in _detail(resp)
    resp = client.put(
        f"/resource_providers/{child}",
        json={"name": "kid", "parent_provider_uuid": None},
        version="1.36",
    )
    assert "un-parenting a provider is not currently allowed" in _detail(resp)
    # No loops, even through a grandchild.
    resp = client.put(
        f"/resource_providers/{root}", json={"name": "root", "parent_provider_uuid": grandchild}
    )
    assert resp.status_code == 400 and "creating loop" in _detail(resp)

    # 1.37: moving a subtree moves its root with it.
    resp = client.put(
        f"/resource_providers/{child}", json={"name": "kid", "parent_provider_uuid": other}
    )
    assert resp.status_code == 200 and resp.get_json()["root_provider_uuid"] == other
    gc = client.get(f"/resource_providers/{grandchild}").get_json()
    assert gc["root_provider_uuid"] == other and gc["parent_provider_uuid"] == child
    resp = client.put(
        f"/resource_providers/{child}", json={"name": "kid", "parent_provider_uuid": None}
    )
    assert resp.get_json()["root_provider_uuid"] == child
    assert client.get(f"/resource_providers/{grandchild}").get_json()["root_provider_uuid"] == child
    tree = client.get(f"/resource_providers?in_tree={grandchild}").get_json()
    assert {rp["uuid"] for rp in tree["resource_providers"]} == {child, grandchild}

    resp = client.post(
        "/resource_providers", json={"name": "orphan", "parent_provider_uuid": new_uuid()}
    )
    assert resp.status_code == 400 and "parent provider UUID does not exist" in _detail(resp)
    resp = client.post(
        "/resource_providers", json={"name": "p", "parent_provider_uuid": root}, version="1.13"
    )
    assert resp.status_code == 400 and "Additional properties" in _detail(resp)


def test_delete_rules(client, db):
    parent = builders.create_provider(db, "parent")
    child = builders.create_provider(db, "child", parent_uuid=parent)
    builders.set_inventory(db, child, "VCPU", 8)
    builders.allocate(db, new_uuid(), {child: {"VCPU": 2}})

    resp = client.delete(f"/resource_providers/{parent}")
    assert resp.status_code == 409
    assert _code(resp) == "placement.resource_provider.cannot_delete_parent"
    resp = client.delete(f"/resource_providers/{child}")
    assert resp.status_code == 409 and _code(resp) == "placement.resource_provider.inuse"
    assert "Resource provider has allocations" in _detail(resp)
    assert client.get(f"/resource_providers/{child}").status_code == 200

    other = builders.create_provider(db, "other")
    builders.set_inventory(db, other, "DISK_GB", 10)
    builders.set_traits(db, other, "HW_CPU_X86_AVX")
    builders.set_aggregates(db, other, new_uuid())
    assert client.delete(f"/resource_providers/{other}").status_code == 204
    resp = client.delete(f"/resource_providers/{other}")
    assert resp.status_code == 404 and "found for delete" in _detail(resp)


def test_list_filters(client, db):
    agg_a, agg_b = new_uuid(), new_uuid()
    big = builders.create_provider(db, "big")
    small = builders.create_provider(db, "small")
    bare = builders.create_provider(db, "bare")
    builders.set_inventory(db, big, "VCPU", 16)
    builders.set_inventory(db, small, "VCPU", 4, reserved=1)
    builders.allocate(db, new_uuid(), {big: {"VCPU": 10}})
    builders.set_traits(db, big, "HW_CPU_X86_AVX", "STORAGE_DISK_SSD")
    builders.set_traits(db, small, "STORAGE_DISK_SSD")
    builders.set_aggregates(db, big, agg_a)
    builders.set_aggregates(db, small, agg_a, agg_b)

    def names(query, version=None):
        resp = client.get(f"/resource_providers?{query}", version=version)
        assert resp.status_code == 200, resp.get_data(as_text=True)
        return sorted(rp["name"] for rp in resp.get_json()["resource_providers"])

    assert names("name=small") == ["small"]
    assert names(f"uuid={bare}") == ["bare"]
    # Capacity-aware: big has 6 free, small 3 free.
    assert names("resources=VCPU:3") == ["big", "small"]
    assert names("resources=VCPU:4") == ["big"]
    assert names("resources=VCPU:7") == []
    assert names("required=STORAGE_DISK_SSD") == ["big", "small"]
    assert names("required=STORAGE_DISK_SSD,!HW_CPU_X86_AVX") == ["small"]
    assert names("required=in:HW_CPU_X86_AVX,HW_CPU_X86_SSE") == ["big"]
    assert names(f"member_of={agg_a}") == ["big", "small"]
    assert names(f"member_of={agg_a}&member_of={agg_b}") == ["small"]
    assert names(f"member_of=in:{agg_b},{new_uuid()}") == ["small"]
    assert names(f"member_of=!{agg_b}") == ["bare", "big"]
    assert names(f"in_tree={new_uuid()}") == []

    for query, version, text in [
        ("resources=VCPU:1", "1.3", "Invalid query string parameters"),
        ("resources=NOPE:1", None, "Invalid resource class in resources parameter"),
        ("resources=VCPU", None, "Badly formed resources parameter"),
        ("required=NOT_A_TRAIT", None, "No such trait(s): NOT_A_TRAIT."),
        ("required=!HW_CPU_X86_AVX", "1.21", "Expected 'required' parameter value"),
        ("required=in:A,B", "1.38", "only supported since microversion 1.39"),
        (f"member_of=!{agg_a}", "1.31", "Forbidden member_of parameters are not supported"),
        (f"member_of={agg_a}&member_of={agg_b}", "1.23", "Multiple member_of parameters"),
        ("member_of=bogus", None, "Expected 'member_of' parameter to contain valid UUID"),
        ("in_tree=bogus", None, "Invalid query string parameters"),
        ("spam=eggs", None, "Additional properties are not allowed"),
    ]:
        resp = client.get(f"/resource_providers?{query}", version=version)
        assert resp.status_code == 400, query
        assert text in _detail(resp), (query, _detail(resp))


def test_nul_characters_are_client_errors(client):
    # PostgreSQL cannot store or even compare NUL: these must not reach SQL.
    rp = client.post("/resource_providers", json={"name": "rp"}).get_json()["uuid"]
    assert client.post("/resource_providers", json={"name": "a\u0000"}).status_code == 400
    assert client.put(f"/resource_providers/{rp}", json={"name": "a\u0000"}).status_code == 400
    assert client.get("/resource_providers?name=%00").status_code == 400
    assert client.get("/resource_providers?required=A%00").status_code == 400
    assert client.get("/resource_providers?resources=A%00:1").status_code == 400
    assert client.get("/resource_providers/%00").status_code == 404
    assert client.get("/resource_classes/A%00").status_code == 404
    assert client.get("/traits/A%00").status_code == 404
    assert client.get("/traits?name=in:A%00").status_code == 400
    assert (
        client.put(
            f"/resource_providers/{rp}/traits",
            json={"traits": ["A\u0000"], "resource_provider_generation": 0},
        ).status_code
        == 400
    )
    assert client.delete(f"/resource_providers/{rp}/inventories/A%00").status_code == 404
