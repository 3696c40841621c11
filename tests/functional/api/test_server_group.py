"""Server groups (extension): the API, validation, and the claim-time policy
check in the allocation write."""

import uuid

from tests import builders

POLICY_VIOLATION = "placement.server_group.policy_violation"


def _new():
    return str(uuid.uuid4())


def _err(resp):
    return resp.get_json()["errors"][0]


def _group(client, policy, rules=None, **extra):
    body = {"name": f"g-{policy}", "policy": policy, "project_id": "p", "user_id": "u", **extra}
    if rules is not None:
        body["rules"] = rules
    resp = client.post("/server_groups", json=body)
    assert resp.status_code == 201, resp.get_json()
    return resp.get_json()


def _hosts(db, count, vcpu=8):
    """``count`` root providers with a child NUMA provider holding the VCPU,
    so the host a member runs on is the root, not the provider it uses."""
    out = []
    for i in range(count):
        root = builders.create_provider(db, name=f"host-{i}-{_new()[:6]}")
        child = builders.create_provider(db, name=f"numa-{i}-{_new()[:6]}", parent_uuid=root)
        builders.set_inventory(db, child, "VCPU", vcpu)
        out.append((root, child))
    return out


def _claim(client, consumer, rp, group=None, generation=None, amount=1):
    body = builders.allocation_body(rp, generation=generation, amount=amount, group=group)
    return client.put(f"/allocations/{consumer}", json=body)


def test_create_show_list_delete(client):
    group = _group(client, "anti-affinity", rules={"max_server_per_host": 2})
    assert group["policy"] == "anti-affinity"
    assert group["rules"] == {"max_server_per_host": 2}
    assert group["members"] == [] and group["hosts"] == {} and group["generation"] == 0
    shown = client.get(f"/server_groups/{group['uuid']}").get_json()
    assert shown["uuid"] == group["uuid"] and shown["name"] == "g-anti-affinity"
    other = _group(client, "affinity", project_id="q")
    listed = client.get("/server_groups").get_json()["server_groups"]
    assert [g["uuid"] for g in listed] == [group["uuid"], other["uuid"]]
    mine = client.get("/server_groups?project_id=q").get_json()["server_groups"]
    assert [g["uuid"] for g in mine] == [other["uuid"]]
    assert client.delete(f"/server_groups/{group['uuid']}").status_code == 204
    resp = client.get(f"/server_groups/{group['uuid']}")
    assert resp.status_code == 404
    assert _err(resp)["code"] == "placement.server_group.not_found"


def test_bad_bodies_are_400_and_store_nothing(client):
    bad = [
        {"name": "g", "policy": "affinity", "project_id": "p"},  # no user
        {"name": "g", "policy": "best-effort", "project_id": "p", "user_id": "u"},
        {"name": "", "policy": "affinity", "project_id": "p", "user_id": "u"},
        {
            "name": "g",
            "policy": "anti-affinity",
            "project_id": "p",
            "user_id": "u",
            "rules": {"max_server_per_host": 0},
        },
        {
            "name": "g",
            "policy": "anti-affinity",
            "project_id": "p",
            "user_id": "u",
            "rules": {"max_server_per_host": "2"},
        },
        {
            "name": "g",
            "policy": "anti-affinity",
            "project_id": "p",
            "user_id": "u",
            "rules": {"min_server_per_host": 2},
        },
        {
            "name": "g",
            "policy": "affinity",
            "project_id": "p",
            "user_id": "u",
            "policies": ["affinity"],
        },
        {
            "name": "g",
            "policy": "affinity",
            "project_id": "p",
            "user_id": "u",
            "uuid": "not-a-uuid",
        },
    ]
    for body in bad:
        resp = client.post("/server_groups", json=body)
        assert resp.status_code == 400, body
        assert "JSON does not validate" in _err(resp)["detail"], body
    # nova 2.64: only anti-affinity takes rules.
    resp = client.post(
        "/server_groups",
        json={
            "name": "g",
            "policy": "affinity",
            "project_id": "p",
            "user_id": "u",
            "rules": {"max_server_per_host": 2},
        },
    )
    assert resp.status_code == 400
    assert "Only the anti-affinity policy supports rules" in _err(resp)["detail"]
    assert client.get("/server_groups").get_json()["server_groups"] == []


def test_duplicate_uuid_is_409(client):
    wanted = _new()
    _group(client, "affinity", uuid=wanted)
    resp = client.post(
        "/server_groups",
        json={
            "name": "again",
            "policy": "affinity",
            "project_id": "p",
            "user_id": "u",
            "uuid": wanted,
        },
    )
    assert resp.status_code == 409
    assert _err(resp)["code"] == "placement.server_group.duplicate"


def test_anti_affinity_refuses_a_second_member_on_a_host_at_claim(client, db):
    (root_a, numa_a), (root_b, numa_b) = _hosts(db, 2)
    group = _group(client, "anti-affinity")["uuid"]
    first, second = _new(), _new()
    assert _claim(client, first, numa_a, group).status_code == 204
    resp = _claim(client, second, numa_a, group)
    assert resp.status_code == 409
    err = _err(resp)
    assert err["code"] == POLICY_VIOLATION
    assert f"host {root_a} already runs 1 member(s)" in err["detail"]
    # Nothing of the refused claim was written.
    assert client.get(f"/allocations/{second}").get_json()["allocations"] == {}
    assert _claim(client, second, numa_b, group).status_code == 204
    shown = client.get(f"/server_groups/{group}").get_json()
    assert shown["members"] == [first, second]
    assert shown["hosts"] == {root_a: [first], root_b: [second]}
    assert shown["generation"] == 2


def test_max_server_per_host(client, db):
    ((root, numa),) = _hosts(db, 1)
    group = _group(client, "anti-affinity", rules={"max_server_per_host": 2})["uuid"]
    assert _claim(client, _new(), numa, group).status_code == 204
    assert _claim(client, _new(), numa, group).status_code == 204
    resp = _claim(client, _new(), numa, group)
    assert resp.status_code == 409
    assert "max_server_per_host 2" in _err(resp)["detail"]
    assert "already runs 2 member(s)" in _err(resp)["detail"]


def test_affinity_keeps_members_on_the_first_host(client, db):
    (root_a, numa_a), (_root_b, numa_b) = _hosts(db, 2)
    group = _group(client, "affinity")["uuid"]
    assert _claim(client, _new(), numa_a, group).status_code == 204
    resp = _claim(client, _new(), numa_b, group)
    assert resp.status_code == 409 and _err(resp)["code"] == POLICY_VIOLATION
    assert f"its members run on host(s) {root_a}" in _err(resp)["detail"]
    assert _claim(client, _new(), numa_a, group).status_code == 204


def test_soft_policies_record_members_without_refusing(client, db):
    ((root, numa),) = _hosts(db, 1)
    for policy in ("soft-affinity", "soft-anti-affinity"):
        group = _group(client, policy)["uuid"]
        a, b = _new(), _new()
        assert _claim(client, a, numa, group).status_code == 204
        assert _claim(client, b, numa, group).status_code == 204
        assert client.get(f"/server_groups/{group}").get_json()["hosts"] == {root: sorted([a, b])}


def test_a_move_is_checked_and_a_release_frees_the_host(client, db):
    (root_a, numa_a), (root_b, numa_b) = _hosts(db, 2)
    group = _group(client, "anti-affinity")["uuid"]
    first, second = _new(), _new()
    assert _claim(client, first, numa_a, group).status_code == 204
    assert _claim(client, second, numa_b, group).status_code == 204
    # Moving the second member onto the first's host (no group named: it is
    # a member already) is refused.
    gen = client.get(f"/allocations/{second}").get_json()["consumer_generation"]
    resp = _claim(client, second, numa_a, generation=gen)
    assert resp.status_code == 409 and _err(resp)["code"] == POLICY_VIOLATION
    # Once the first releases its allocations, the host is free for the group.
    assert client.delete(f"/allocations/{first}").status_code == 204
    assert _claim(client, second, numa_a, generation=gen).status_code == 204
    assert client.get(f"/server_groups/{group}").get_json()["hosts"] == {root_a: [second]}


def test_member_of_one_group_only_and_unknown_group(client, db):
    ((_root, numa),) = _hosts(db, 1)
    g1 = _group(client, "soft-affinity")["uuid"]
    g2 = _group(client, "soft-affinity")["uuid"]
    inst = _new()
    assert _claim(client, inst, numa, g1).status_code == 204
    gen = client.get(f"/allocations/{inst}").get_json()["consumer_generation"]
    resp = _claim(client, inst, numa, g2, generation=gen)
    assert resp.status_code == 409
    assert _err(resp)["code"] == "placement.server_group.member_conflict"
    missing = _new()
    resp = _claim(client, _new(), numa, missing)
    assert resp.status_code == 400
    assert f"server group {missing} not found" in _err(resp)["detail"]
    resp = _claim(client, _new(), numa, "nope")
    assert resp.status_code == 400 and "JSON does not validate" in _err(resp)["detail"]


def test_remove_member(client, db):
    ((root, numa),) = _hosts(db, 1)
    group = _group(client, "anti-affinity")["uuid"]
    inst = _new()
    assert _claim(client, inst, numa, group).status_code == 204
    assert client.delete(f"/server_groups/{group}/members/{inst}").status_code == 204
    shown = client.get(f"/server_groups/{group}").get_json()
    assert shown["members"] == [] and shown["generation"] == 2
    # No longer a member: its host no longer counts.
    assert _claim(client, _new(), numa, group).status_code == 204
    resp = client.delete(f"/server_groups/{group}/members/{inst}")
    assert resp.status_code == 404


def test_sharing_provider_is_not_a_host(client, db):
    ((root_a, numa_a), (root_b, numa_b)) = _hosts(db, 2)
    shared = builders.create_provider(db, name=f"shared-{_new()[:6]}")
    builders.set_inventory(db, shared, "DISK_GB", 1000)
    builders.set_traits(db, shared, "MISC_SHARES_VIA_AGGREGATE")
    group = _group(client, "anti-affinity")["uuid"]
    for consumer, numa in ((_new(), numa_a), (_new(), numa_b)):
        body = {
            "allocations": {
                numa: {"resources": {"VCPU": 1}},
                shared: {"resources": {"DISK_GB": 10}},
            },
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
            "server_group": group,
        }
        assert client.put(f"/allocations/{consumer}", json=body).status_code == 204
    assert set(client.get(f"/server_groups/{group}").get_json()["hosts"]) == {root_a, root_b}
