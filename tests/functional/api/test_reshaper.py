"""POST /reshaper: inventories and allocations move within a tree atomically."""

import uuid as uuid_lib

import pytest

from tests import builders

PROJECT, USER = "proj-r", "user-r"
# The reshaper is a service API (upstream's default rule).
SERVICE = {"x-roles": "admin,service"}


def new_uuid():
    return str(uuid_lib.uuid4())


def gen(client, rp):
    return client.get(f"/resource_providers/{rp}/usages").get_json()["resource_provider_generation"]


def usages(client, rp):
    return client.get(f"/resource_providers/{rp}/usages").get_json()["usages"]


@pytest.fixture
def tree(db, client):
    """A root with VCPU 10 and DISK_GB 2048, a child without inventory, and two
    consumers holding 6 VCPU and 1000 DISK_GB on the root."""
    root = builders.create_provider(db, name="root")
    child = builders.create_provider(db, name="child", parent_uuid=root)
    builders.set_inventory(db, root, "VCPU", 10)
    builders.set_inventory(db, root, "DISK_GB", 2048, max_unit=1200)
    vm, disk = new_uuid(), new_uuid()
    for consumer, res in ((vm, {"VCPU": 6}), (disk, {"DISK_GB": 1000})):
        resp = client.put(
            f"/allocations/{consumer}",
            version="1.28",
            json={
                "allocations": {root: {"resources": res}},
                "project_id": PROJECT,
                "user_id": USER,
                "consumer_generation": None,
            },
        )
        assert resp.status_code == 204
    return root, child, vm, disk


def alloc(rp_resources, generation, **extra):
    body = {
        "allocations": {rp: {"resources": res} for rp, res in rp_resources.items()},
        "project_id": PROJECT,
        "user_id": USER,
        "consumer_generation": generation,
    }
    body.update(extra)
    return body


def test_move_vcpu_to_child_and_back(client, tree):
    root, child, vm, disk = tree
    g_root, g_child = gen(client, root), gen(client, child)
    resp = client.post(
        "/reshaper",
        headers=SERVICE,
        version="1.30",
        json={
            "inventories": {
                root: {
                    "resource_provider_generation": g_root,
                    "inventories": {"DISK_GB": {"total": 2048, "max_unit": 1200}},
                },
                child: {
                    "resource_provider_generation": g_child,
                    "inventories": {"VCPU": {"total": 10, "max_unit": 8}},
                },
            },
            "allocations": {
                vm: alloc({child: {"VCPU": 6}}, 1),
                disk: alloc({root: {"DISK_GB": 1000}}, 1),
            },
        },
    )
    assert resp.status_code == 204, resp.get_data(as_text=True)
    assert usages(client, root) == {"DISK_GB": 1000}
    assert usages(client, child) == {"VCPU": 6}
    # interim inventory + allocations + final inventory, as upstream counts.
    assert gen(client, root) == g_root + 3
    assert gen(client, child) == g_child + 3

    resp = client.post(
        "/reshaper",
        headers=SERVICE,
        version="1.38",
        json={
            "inventories": {
                root: {
                    "resource_provider_generation": g_root + 3,
                    "inventories": {
                        "DISK_GB": {"total": 2048, "max_unit": 1200},
                        "VCPU": {"total": 10},
                    },
                },
                child: {"resource_provider_generation": g_child + 3, "inventories": {}},
            },
            "allocations": {
                vm: alloc({}, 2, consumer_type="INSTANCE"),
                new_uuid(): alloc({root: {"VCPU": 6}}, None, consumer_type="INSTANCE"),
            },
        },
    )
    assert resp.status_code == 204, resp.get_data(as_text=True)
    assert usages(client, root) == {"DISK_GB": 1000, "VCPU": 6}
    assert usages(client, child) == {}
    assert client.get(f"/allocations/{vm}").get_json() == {"allocations": {}}


@pytest.mark.parametrize(
    "case,status,code,text",
    [
        ("inuse", 409, "placement.inventory.inuse", "in use"),
        ("bad_gen", 409, "placement.concurrent_update", "actual: G, given: 99"),
        ("consumer_gen", 409, "placement.concurrent_update", "consumer generation conflict"),
        ("no_fit", 409, "placement.undefined_code", "Unable to allocate inventory"),
        ("bad_class", 400, "placement.undefined_code", "No such resource class DISK_OF_STEEL"),
        ("missing_rp", 400, "placement.resource_provider.not_found", "in inventories not found"),
        ("bad_field", 400, "placement.undefined_code", "'bad_field' was unexpected"),
    ],
)
def test_refusals_change_nothing(client, tree, case, status, code, text):
    root, child, vm, disk = tree
    g_root = gen(client, root)
    inventories = {
        root: {"resource_provider_generation": g_root, "inventories": {"VCPU": {"total": 10}}}
    }
    allocations = {}
    if case == "bad_gen":
        inventories[root]["resource_provider_generation"] = 99
        text = text.replace("G", str(g_root))
    elif case == "consumer_gen":
        allocations = {new_uuid(): alloc({root: {"VCPU": 1}}, 99)}
    elif case == "no_fit":
        inventories[root]["inventories"]["DISK_GB"] = {"total": 2048, "max_unit": 1200}
        allocations = {new_uuid(): alloc({root: {"VCPU": 5}}, None)}
    elif case == "bad_class":
        inventories[root]["inventories"]["DISK_OF_STEEL"] = {"total": 10}
    elif case == "missing_rp":
        inventories = {new_uuid(): {"resource_provider_generation": 0, "inventories": {}}}
    elif case == "bad_field":
        inventories[root]["inventories"]["VCPU"]["bad_field"] = 1
    before = (usages(client, root), gen(client, root))
    resp = client.post(
        "/reshaper",
        headers=SERVICE,
        version="1.30",
        json={"inventories": inventories, "allocations": allocations},
    )
    assert resp.status_code == status, resp.get_data(as_text=True)
    err = resp.get_json()["errors"][0]
    assert err["code"] == code
    assert text in err["detail"]
    assert (usages(client, root), gen(client, root)) == before
    inv = client.get(f"/allocations/{vm}").get_json()
    assert inv["allocations"][root]["resources"] == {"VCPU": 6}


def test_version_and_shape_gates(client, tree):
    root = tree[0]
    body = {
        "inventories": {root: {"resource_provider_generation": 0, "inventories": {}}},
        "allocations": {},
    }
    assert client.post("/reshaper", json=body, headers=SERVICE, version="1.29").status_code == 404
    assert client.get("/reshaper").status_code == 405
    resp = client.post(
        "/reshaper", json={"inventories": body["inventories"]}, headers=SERVICE, version="1.30"
    )
    assert resp.status_code == 400
    resp = client.post(
        "/reshaper",
        headers=SERVICE,
        version="1.36",
        json={
            "inventories": body["inventories"],
            "allocations": {new_uuid(): alloc({root: {"VCPU": 1}}, None, consumer_type="RESHAPED")},
        },
    )
    assert resp.status_code == 400
    assert "'consumer_type' was unexpected" in resp.get_json()["errors"][0]["detail"]


def test_record_generation_is_ignored_as_upstream(client, tree):
    """A record is the PUT .../inventories record: an inner
    resource_provider_generation is allowed and ignored (upstream passes it
    on as an unused keyword)."""
    root = tree[0]
    g_root = gen(client, root)
    resp = client.post(
        "/reshaper",
        headers=SERVICE,
        version="1.30",
        json={
            "inventories": {
                root: {
                    "resource_provider_generation": g_root,
                    "inventories": {
                        "VCPU": {"total": 12, "resource_provider_generation": 12345},
                        "DISK_GB": {"total": 2048, "max_unit": 1200},
                    },
                }
            },
            "allocations": {},
        },
    )
    assert resp.status_code == 204, resp.get_data(as_text=True)
    inv = client.get(f"/resource_providers/{root}/inventories").get_json()
    assert inv["inventories"]["VCPU"]["total"] == 12
    assert "resource_provider_generation" not in inv["inventories"]["VCPU"]
