"""The /nodes extension: node records, hardware, twins and the profile trait."""

import sqlalchemy as sa

from placement import models as m
from tests import builders
from tests.conftest import new_uuid

HW = {
    "cpu_model": "AMD EPYC 9654 96-Core Processor",
    "cpu_sockets": 2,
    "cpu_cores": 192,
    "memory_gib": 1536,
    "gpu_vendor": "nvidia",
    "gpu_model": "NVIDIA H100 NVL",
    "gpu_count": 8,
    "gpu_min_cap_watts": 200.0,
    "gpu_max_cap_watts": 400.0,
    "cpu_min_cap_watts": None,
    "cpu_max_cap_watts": None,
}


def _traits(db, rp_uuid):
    rp, rpt, tr = m.resource_providers, m.resource_provider_traits, m.traits
    with db.read() as conn:
        return set(
            conn.execute(
                sa.select(tr.c.name)
                .select_from(
                    rpt.join(tr, tr.c.id == rpt.c.trait_id).join(
                        rp, rp.c.id == rpt.c.resource_provider_id
                    )
                )
                .where(rp.c.uuid == rp_uuid)
            ).scalars()
        )


def _rp_generation(db, rp_uuid):
    rp = m.resource_providers
    with db.read() as conn:
        return conn.execute(sa.select(rp.c.generation).where(rp.c.uuid == rp_uuid)).scalar_one()


def _detail(resp):
    return resp.get_json()["errors"][0]["detail"]


NODE_NOT_FOUND = "placement.node.not_found"


def _code(resp):
    return resp.get_json()["errors"][0]["code"]


def test_node_record_lifecycle(client, db):
    rp = builders.create_provider(db, name="cn1")
    assert client.get("/nodes").get_json() == {"nodes": [], "links": []}
    resp = client.get(f"/nodes/{rp}")
    # The provider exists but has no node data: the extension's own code.
    assert resp.status_code == 404 and _code(resp) == NODE_NOT_FOUND

    resp = client.put(f"/nodes/{rp}", json={"cell": "cell1", "labels": {"rack": "r1"}})
    assert resp.status_code == 201
    node = resp.get_json()
    assert node == {
        "uuid": rp,
        "name": "cn1",
        "cell": "cell1",
        "labels": {"rack": "r1"},
        "reserved": False,
        "unschedulable": False,
        "generation": 0,
        "hardware": None,
        "twin": None,
        "profile_traits": [],
        "heartbeat_at": None,
        "heartbeat_age_seconds": None,
    }

    # A stale generation changes nothing.
    resp = client.put(f"/nodes/{rp}", json={"cell": "cell2", "generation": 5})
    assert resp.status_code == 409
    assert _code(resp) == "placement.concurrent_update"
    # Leaving generation out on an existing record is stale too.
    assert client.put(f"/nodes/{rp}", json={"cell": "cell2"}).status_code == 409
    assert client.get(f"/nodes/{rp}").get_json()["cell"] == "cell1"

    resp = client.put(
        f"/nodes/{rp}", json={"cell": "cell2", "unschedulable": True, "generation": 0}
    )
    assert resp.status_code == 200
    assert resp.get_json()["generation"] == 1
    listed = client.get("/nodes").get_json()["nodes"]
    assert [(n["uuid"], n["cell"], n["unschedulable"]) for n in listed] == [(rp, "cell2", True)]
    assert client.get("/nodes?cell=cell1").get_json() == {"nodes": [], "links": []}

    assert client.delete(f"/nodes/{rp}").status_code == 204
    resp = client.get(f"/nodes/{rp}")
    assert resp.status_code == 404 and _code(resp) == NODE_NOT_FOUND
    resp = client.delete(f"/nodes/{rp}")
    assert resp.status_code == 404 and _code(resp) == NODE_NOT_FOUND


def test_hardware(client, db):
    rp = builders.create_provider(db)
    resp = client.get(f"/nodes/{rp}/hardware")
    assert resp.status_code == 404 and _code(resp) == NODE_NOT_FOUND
    resp = client.put(f"/nodes/{rp}/hardware", json=HW)
    assert resp.status_code == 201
    assert client.get(f"/nodes/{rp}/hardware").get_json() == HW
    node = client.get(f"/nodes/{rp}").get_json()
    assert node["hardware"] == HW and node["generation"] is None
    assert client.put(f"/nodes/{rp}/hardware", json={**HW, "gpu_count": 4}).status_code == 200
    assert client.get(f"/nodes/{rp}/hardware").get_json()["gpu_count"] == 4


def test_twin_writes_profile_trait_in_same_transaction(client, db):
    rp = builders.create_provider(db)
    builders.set_traits(db, rp, "HW_CPU_X86_AVX2")
    gen0 = _rp_generation(db, rp)
    resp = client.put(f"/nodes/{rp}/twin", json={"profile": "performance", "gpu_cap_watts": 400})
    assert resp.status_code == 201
    twin = resp.get_json()
    assert twin == {
        "profile": "performance",
        "cpu_cap_watts": None,
        "gpu_cap_watts": 400,
        "managed_by": None,
        "schedulable_class": "performance",
        "generation": 0,
    }
    assert _traits(db, rp) == {"HW_CPU_X86_AVX2", "CUSTOM_POWER_PROFILE_PERFORMANCE"}
    assert _rp_generation(db, rp) == gen0 + 1
    # Plain placement clients see it too.
    assert (
        "CUSTOM_POWER_PROFILE_PERFORMANCE"
        in client.get(f"/resource_providers/{rp}/traits").get_json()["traits"]
    )

    resp = client.put(
        f"/nodes/{rp}/twin",
        json={"profile": "eco", "schedulable_class": "draining", "generation": 0},
    )
    assert resp.status_code == 200
    assert resp.get_json()["generation"] == 1
    assert _traits(db, rp) == {"HW_CPU_X86_AVX2", "CUSTOM_POWER_PROFILE_ECO"}
    assert _rp_generation(db, rp) == gen0 + 2

    # Same profile again: the trait set is unchanged, so is the provider generation.
    resp = client.put(f"/nodes/{rp}/twin", json={"profile": "eco", "generation": 1})
    assert resp.get_json()["schedulable_class"] == "eco"
    assert _rp_generation(db, rp) == gen0 + 2

    # Stale twin generation: 409, nothing changes (twin nor trait).
    resp = client.put(f"/nodes/{rp}/twin", json={"profile": "performance", "generation": 1})
    assert resp.status_code == 409
    assert _code(resp) == "placement.concurrent_update"
    assert client.get(f"/nodes/{rp}/twin").get_json()["profile"] == "eco"
    assert _traits(db, rp) == {"HW_CPU_X86_AVX2", "CUSTOM_POWER_PROFILE_ECO"}

    # Deleting the node data removes the profile trait with it.
    assert client.delete(f"/nodes/{rp}").status_code == 204
    assert _traits(db, rp) == {"HW_CPU_X86_AVX2"}


def test_node_reads_show_the_profile_traits_the_provider_carries(client, db):
    """What the power controller compares with the twin on every tick."""
    a = builders.create_provider(db, name="a")
    b = builders.create_provider(db, name="b")
    builders.set_traits(db, b, "HW_CPU_X86_AVX2")
    client.post(
        "/nodes/twins",
        json={"twins": [{"uuid": a, "profile": "performance"}, {"uuid": b, "profile": "eco"}]},
    )

    def shown():
        listed = {n["name"]: n["profile_traits"] for n in client.get("/nodes").get_json()["nodes"]}
        single = {
            name: client.get(f"/nodes/{rp}").get_json()["profile_traits"]
            for name, rp in (("a", a), ("b", b))
        }
        assert listed == single
        return listed

    assert shown() == {"a": ["CUSTOM_POWER_PROFILE_PERFORMANCE"], "b": ["CUSTOM_POWER_PROFILE_ECO"]}
    # Changed behind the twin's back with the upstream trait API: node reads say so.
    for rp, traits in (
        (a, ["CUSTOM_POWER_PROFILE_ECO", "CUSTOM_POWER_PROFILE_PERFORMANCE"]),
        (b, ["HW_CPU_X86_AVX2"]),
    ):
        gen = client.get(f"/resource_providers/{rp}/traits").get_json()[
            "resource_provider_generation"
        ]
        resp = client.put(
            f"/resource_providers/{rp}/traits",
            json={"traits": traits, "resource_provider_generation": gen},
        )
        assert resp.status_code == 200, resp.get_json()
    assert shown() == {
        "a": ["CUSTOM_POWER_PROFILE_ECO", "CUSTOM_POWER_PROFILE_PERFORMANCE"],
        "b": [],
    }
    resp = client.put(f"/nodes/{b}", json={"cell": "c"})
    assert resp.get_json()["profile_traits"] == []


def test_bulk_twins_all_or_nothing(client, db):
    a = builders.create_provider(db, name="a")
    b = builders.create_provider(db, name="b")
    resp = client.post(
        "/nodes/twins",
        json={"twins": [{"uuid": a, "profile": "performance"}, {"uuid": b, "profile": "eco"}]},
    )
    assert resp.status_code == 200
    assert [(t["uuid"], t["generation"]) for t in resp.get_json()["twins"]] == [(a, 0), (b, 0)]
    # b's generation is stale: a is not written either.
    resp = client.post(
        "/nodes/twins",
        json={
            "twins": [
                {"uuid": a, "profile": "eco", "generation": 0},
                {"uuid": b, "profile": "performance", "generation": 7},
            ]
        },
    )
    assert resp.status_code == 409
    assert b in _detail(resp)
    assert client.get(f"/nodes/{a}/twin").get_json()["profile"] == "performance"
    assert _traits(db, a) == {"CUSTOM_POWER_PROFILE_PERFORMANCE"}
    nodes = {n["name"]: n for n in client.get("/nodes").get_json()["nodes"]}
    assert nodes["a"]["twin"]["profile"] == "performance"
    assert nodes["b"]["twin"]["schedulable_class"] == "eco"


def test_bulk_twins_mixed_values_and_partial_profile_changes(client, db):
    """The bulk path (one statement per step on PostgreSQL) stores every value
    as sent: int and float caps in one batch, nulls, odd strings; and only the
    providers whose profile trait changes get a new generation."""
    names = [f"bulk-{i}" for i in range(6)]
    rps = [builders.create_provider(db, name=n) for n in names]
    caps = [150, 212.5, None, 0, 1000000, 99.25]
    resp = client.post(
        "/nodes/twins",
        json={
            "twins": [
                {
                    "uuid": rp,
                    "profile": "performance" if i % 2 else "eco",
                    "cpu_cap_watts": caps[i],
                    "gpu_cap_watts": caps[-1 - i],
                    "managed_by": None if i == 3 else f'ctl "{i}" \u00e9',
                }
                for i, rp in enumerate(rps)
            ]
        },
    )
    assert resp.status_code == 200, resp.get_data(as_text=True)
    gens = {rp: _rp_generation(db, rp) for rp in rps}
    for i, rp in enumerate(rps):
        twin = client.get(f"/nodes/{rp}/twin").get_json()
        assert twin["cpu_cap_watts"] == caps[i] and twin["gpu_cap_watts"] == caps[-1 - i]
        assert twin["managed_by"] == (None if i == 3 else f'ctl "{i}" \u00e9')
        assert twin["generation"] == 0
        assert _traits(db, rp) == {
            "CUSTOM_POWER_PROFILE_PERFORMANCE" if i % 2 else "CUSTOM_POWER_PROFILE_ECO"
        }
    # Flip the first two, keep the rest: only the flipped providers move.
    resp = client.post(
        "/nodes/twins",
        json={
            "twins": [
                {
                    "uuid": rp,
                    "generation": 0,
                    "cpu_cap_watts": 1.5,
                    "profile": ("eco" if i % 2 else "performance")
                    if i < 2
                    else ("performance" if i % 2 else "eco"),
                }
                for i, rp in enumerate(rps)
            ]
        },
    )
    assert resp.status_code == 200, resp.get_data(as_text=True)
    assert [t["generation"] for t in resp.get_json()["twins"]] == [1] * 6
    for i, rp in enumerate(rps):
        twin = client.get(f"/nodes/{rp}/twin").get_json()
        assert twin["cpu_cap_watts"] == 1.5 and twin["gpu_cap_watts"] is None
        assert twin["generation"] == 1
        assert _rp_generation(db, rp) == gens[rp] + (1 if i < 2 else 0)
    assert _traits(db, rps[0]) == {"CUSTOM_POWER_PROFILE_PERFORMANCE"}
    assert _traits(db, rps[1]) == {"CUSTOM_POWER_PROFILE_ECO"}
    assert _traits(db, rps[2]) == {"CUSTOM_POWER_PROFILE_ECO"}


def test_nested_and_unknown_providers(client, db):
    root = builders.create_provider(db)
    child = builders.create_provider(db, parent_uuid=root)
    for path in (f"/nodes/{child}", f"/nodes/{child}/twin", f"/nodes/{child}/hardware"):
        body = {"profile": "eco"} if path.endswith("twin") else {}
        resp = client.put(path, json=body)
        assert resp.status_code == 400, path
        assert "not a root provider" in _detail(resp)
    resp = client.post("/nodes/twins", json={"twins": [{"uuid": child, "profile": "eco"}]})
    assert resp.status_code == 400
    for bad in (new_uuid(), "not-a-uuid"):
        resp = client.put(f"/nodes/{bad}", json={})
        assert resp.status_code == 404
        assert _code(resp) == "placement.resource_provider.not_found"
    resp = client.post("/nodes/twins", json={"twins": [{"uuid": new_uuid(), "profile": "eco"}]})
    assert resp.status_code == 404
    assert client.get("/nodes").get_json() == {"nodes": [], "links": []}


def test_validation(client, db):
    rp = builders.create_provider(db)
    cases = [
        (f"/nodes/{rp}", {"labels": {"a": 1}}, "JSON does not validate"),
        (f"/nodes/{rp}", {"color": "red"}, "Additional properties are not allowed"),
        (f"/nodes/{rp}", {"reserved": "yes"}, "is not of type 'boolean'"),
        (f"/nodes/{rp}/hardware", {"gpu_count": -1}, "less than the minimum"),
        (f"/nodes/{rp}/hardware", {"gpu_count": 2}, "gpu_model is empty"),
        (
            f"/nodes/{rp}/hardware",
            {"cpu_min_cap_watts": 300, "cpu_max_cap_watts": 200},
            "cpu_min_cap_watts (300) is greater than cpu_max_cap_watts (200)",
        ),
        (f"/nodes/{rp}/twin", {}, "'profile' is a required property"),
        (f"/nodes/{rp}/twin", {"profile": "turbo"}, "is not one of"),
        (
            f"/nodes/{rp}/twin",
            {"profile": "performance", "schedulable_class": "draining"},
            "contradicts profile 'performance'",
        ),
        (
            f"/nodes/{rp}/twin",
            {"profile": "eco", "schedulable_class": "performance"},
            "contradicts profile 'eco'",
        ),
        (f"/nodes/{rp}/twin", {"profile": "eco", "gpu_cap_watts": -5}, "less than the minimum"),
    ]
    for path, body, message in cases:
        resp = client.put(path, json=body)
        assert resp.status_code == 400, (path, body)
        assert message in _detail(resp), (body, _detail(resp))
    for item, message in (
        ({"uuid": rp, "profile": "turbo"}, "'turbo' is not one of"),
        ({"uuid": rp, "profile": "eco", "generation": -1}, "less than the minimum"),
        ({"uuid": "nope", "profile": "eco"}, "is not a 'uuid'"),
        ({"profile": "eco"}, "'uuid' is a required property"),
    ):
        resp = client.post("/nodes/twins", json={"twins": [item]})
        assert resp.status_code == 400 and message in _detail(resp), (item, _detail(resp))
    resp = client.post(
        "/nodes/twins",
        json={"twins": [{"uuid": rp, "profile": "eco"}, {"uuid": rp, "profile": "eco"}]},
    )
    assert resp.status_code == 400 and "appears twice" in _detail(resp)
    for envelope, message in (
        ([], "is not of type 'object'"),
        ({}, "'twins' is a required property"),
        ({"twins": {}}, "is not of type 'array'"),
        ({"twins": [1]}, "1 is not of type 'object'"),
        ({"twins": [], "more": 1}, "Additional properties"),
    ):
        resp = client.post("/nodes/twins", json=envelope)
        assert resp.status_code == 400 and message in _detail(resp), (envelope, _detail(resp))
    resp = client.put(f"/nodes/{rp}", data="{", headers={"content-type": "application/json"})
    assert resp.status_code == 400 and "Malformed JSON" in _detail(resp)
    assert (
        client.put(f"/nodes/{rp}", data="x", headers={"content-type": "text/plain"}).status_code
        == 415
    )
    assert client.get("/nodes?color=red").status_code == 400
    # Nothing was stored by any of these.
    assert client.get("/nodes").get_json() == {"nodes": [], "links": []}
    assert _traits(db, rp) == set()


def test_policy_denies_non_admin(client, db):
    rp = builders.create_provider(db)
    client.token = "someuser:someproject"
    assert client.get("/nodes").status_code == 403
    assert client.put(f"/nodes/{rp}/twin", json={"profile": "eco"}).status_code == 403
    client.token = "admin"
    assert client.get(f"/nodes/{rp}/twin").status_code == 404


def test_twin_power_state_with_its_trait_kept_when_left_out_refused_while_busy(client, db):
    rp = builders.create_provider(db)
    builders.set_inventory(db, rp, "VCPU", 8)
    resp = client.put(f"/nodes/{rp}/twin", json={"profile": "eco", "power_state": "suspending"})
    assert resp.status_code == 201
    assert resp.get_json()["power_state"] == "suspending"
    assert _traits(db, rp) == {"CUSTOM_POWER_PROFILE_ECO", "CUSTOM_POWER_STATE_SUSPENDING"}
    # A write that does not name the power state (an operator's profile
    # change, a controller with suspend off) keeps it: off is not on by omission.
    resp = client.put(f"/nodes/{rp}/twin", json={"profile": "performance", "generation": 0})
    assert resp.status_code == 200
    assert resp.get_json()["power_state"] == "suspending"
    assert _traits(db, rp) == {"CUSTOM_POWER_PROFILE_PERFORMANCE", "CUSTOM_POWER_STATE_SUSPENDING"}
    listed = client.get("/nodes").get_json()["nodes"][0]["twin"]
    assert listed["power_state"] == "suspending"
    # Back on, then busy: powering a node off that holds allocations is a 409
    # and changes nothing.
    resp = client.put(
        f"/nodes/{rp}/twin", json={"profile": "eco", "power_state": "on", "generation": 1}
    )
    assert resp.status_code == 200
    assert _traits(db, rp) == {"CUSTOM_POWER_PROFILE_ECO", "CUSTOM_POWER_STATE_ON"}
    consumer = new_uuid()
    resp = client.put(
        f"/allocations/{consumer}",
        json={
            "allocations": {rp: {"resources": {"VCPU": 1}}},
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": None,
        },
        headers={"OpenStack-API-Version": "placement 1.28"},
    )
    assert resp.status_code == 204
    for state in ("suspending", "off"):
        resp = client.put(
            f"/nodes/{rp}/twin", json={"profile": "eco", "power_state": state, "generation": 2}
        )
        assert resp.status_code == 409, resp.get_json()
        assert "hold allocations" in _detail(resp)
    assert client.get(f"/nodes/{rp}/twin").get_json()["power_state"] == "on"
    assert _traits(db, rp) == {"CUSTOM_POWER_PROFILE_ECO", "CUSTOM_POWER_STATE_ON"}
    # A power state that is not one: 400, nothing stored.
    resp = client.put(
        f"/nodes/{rp}/twin", json={"profile": "eco", "power_state": "asleep", "generation": 2}
    )
    assert resp.status_code == 400
    resp = client.post(
        "/nodes/twins",
        json={"twins": [{"uuid": rp, "profile": "eco", "power_state": 3, "generation": 2}]},
    )
    assert resp.status_code == 400
    assert client.get(f"/nodes/{rp}/twin").get_json()["generation"] == 2
    # null clears it (and its trait).
    resp = client.put(
        f"/nodes/{rp}/twin", json={"profile": "eco", "power_state": None, "generation": 2}
    )
    assert resp.status_code == 200
    assert "power_state" not in resp.get_json()
    assert _traits(db, rp) == {"CUSTOM_POWER_PROFILE_ECO"}
