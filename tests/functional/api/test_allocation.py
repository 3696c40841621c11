"""Allocations API: PUT/GET/DELETE /allocations/{consumer}, POST /allocations,
GET /resource_providers/{uuid}/allocations, and the workload class extension."""

import threading
import uuid as uuid_lib

import pytest

from tests import builders

PROJECT = "c8a4f2bb-6d2a-4f0e-9f5b-3c0f5c1e7a01"
USER = "e1b1a0c6-3c8c-47a8-b3f5-1d3a8c0a9b02"


def new_uuid():
    return str(uuid_lib.uuid4())


@pytest.fixture
def rp(db):
    """One provider with VCPU 8, MEMORY_MB 1024 (min 64, step 64), DISK_GB 100."""
    rp_uuid = builders.create_provider(db, name="cn1")
    builders.set_inventory(db, rp_uuid, "VCPU", 8, max_unit=8)
    builders.set_inventory(db, rp_uuid, "MEMORY_MB", 1024, min_unit=64, step_size=64)
    builders.set_inventory(db, rp_uuid, "DISK_GB", 100, reserved=10)
    return rp_uuid


def put(client, consumer, allocations, generation=None, version="1.28", **extra):
    body = {"allocations": allocations, "project_id": PROJECT, "user_id": USER}
    if version != "1.12":
        body["consumer_generation"] = generation
    body.update(extra)
    return client.put(f"/allocations/{consumer}", json=body, version=version)


def usages(client, rp_uuid):
    return client.get(f"/resource_providers/{rp_uuid}/usages").get_json()["usages"]


def generation_of(client, rp_uuid):
    return client.get(f"/resource_providers/{rp_uuid}/usages").get_json()[
        "resource_provider_generation"
    ]


def error(resp):
    return resp.get_json()["errors"][0]


def test_claim_read_back_and_release(client, rp):
    consumer = new_uuid()
    gen0 = generation_of(client, rp)
    resp = put(client, consumer, {rp: {"resources": {"VCPU": 2, "MEMORY_MB": 128}}})
    assert resp.status_code == 204, resp.get_data(as_text=True)
    assert generation_of(client, rp) == gen0 + 1

    body = client.get(f"/allocations/{consumer}", version="1.38").get_json()
    assert body == {
        "allocations": {rp: {"generation": gen0 + 1, "resources": {"VCPU": 2, "MEMORY_MB": 128}}},
        "project_id": PROJECT,
        "user_id": USER,
        "consumer_generation": 1,
        "consumer_type": "unknown",
    }
    assert usages(client, rp) == {"VCPU": 2, "MEMORY_MB": 128, "DISK_GB": 0}

    by_rp = client.get(f"/resource_providers/{rp}/allocations").get_json()
    assert by_rp["allocations"] == {
        consumer: {"resources": {"VCPU": 2, "MEMORY_MB": 128}, "consumer_generation": 1}
    }
    assert by_rp["resource_provider_generation"] == gen0 + 1

    assert client.delete(f"/allocations/{consumer}").status_code == 204
    assert usages(client, rp)["VCPU"] == 0
    assert client.get(f"/allocations/{consumer}").get_json() == {"allocations": {}}
    resp = client.delete(f"/allocations/{consumer}")
    assert resp.status_code == 404
    assert f"No allocations for consumer '{consumer}'" in error(resp)["detail"]
    # The consumer went with its last allocation: a new claim starts from null.
    assert put(client, consumer, {rp: {"resources": {"VCPU": 1}}}).status_code == 204


def test_body_shapes_by_microversion(client, rp):
    consumer = new_uuid()
    resp = client.put(
        f"/allocations/{consumer}",
        version="1.7",
        json={"allocations": [{"resource_provider": {"uuid": rp}, "resources": {"VCPU": 1}}]},
    )
    assert resp.status_code == 204
    # Before 1.12 only "allocations"; from 1.12 the incomplete-consumer ids show.
    assert set(client.get(f"/allocations/{consumer}", version="1.11").get_json()) == {"allocations"}
    body = client.get(f"/allocations/{consumer}", version="1.12").get_json()
    assert body["project_id"] == body["user_id"] == "00000000-0000-0000-0000-000000000000"
    assert "consumer_generation" not in body
    # 1.8 requires project and user; the list form is refused from 1.12.
    resp = client.put(
        f"/allocations/{consumer}",
        version="1.8",
        json={"allocations": [{"resource_provider": {"uuid": rp}, "resources": {"VCPU": 1}}]},
    )
    assert resp.status_code == 400
    assert "'project_id' is a required property" in error(resp)["detail"]
    resp = client.put(
        f"/allocations/{consumer}",
        version="1.12",
        json={
            "allocations": [{"resource_provider": {"uuid": rp}, "resources": {"VCPU": 1}}],
            "project_id": PROJECT,
            "user_id": USER,
        },
    )
    assert resp.status_code == 400
    # Provider allocations hide consumer generations before 1.28.
    by_rp = client.get(f"/resource_providers/{rp}/allocations", version="1.27").get_json()
    assert by_rp["allocations"][consumer] == {"resources": {"VCPU": 1}}


@pytest.mark.parametrize(
    "allocations,status,text",
    [
        ({"RP": {"resources": {"VCPU": 0}}}, 400, "0 is less than the minimum of 1"),
        ({"RP": {"resources": {"VCPU": -1}}}, 400, "JSON does not validate"),
        ({"RP": {"resources": {}}}, 400, "JSON does not validate"),
        ({"RP": {"resources": {"vcpu": 1}}}, 400, "does not match any of the regexes"),
        ({"RP": {"resources": {"COWS": 1}}}, 400, "No such resource class COWS"),
        ({"RP": {"resources": {"VGPU": 1}}}, 409, "Inventory for 'VGPU' on resource provider"),
        ({"RP": {"resources": {"VCPU": 9}}}, 409, "would violate inventory constraints"),
        ({"RP": {"resources": {"MEMORY_MB": 100}}}, 409, "would violate inventory constraints"),
        ({"RP": {"resources": {"MEMORY_MB": 32}}}, 409, "would violate inventory constraints"),
        ({"RP": {"resources": {"DISK_GB": 91}}}, 409, "would exceed the capacity"),
        (
            {"b0e5a0a3-58cf-4c2b-8fa2-2a1b5b0c1d9e": {"resources": {"VCPU": 1}}},
            400,
            "Allocation for resource provider 'b0e5a0a3-58cf-4c2b-8fa2-2a1b5b0c1d9e' that does "
            "not exist",
        ),
    ],
)
def test_bad_claims_refused_and_change_nothing(client, rp, allocations, status, text):
    holder = new_uuid()
    assert put(client, holder, {rp: {"resources": {"DISK_GB": 5}}}).status_code == 204
    before = (usages(client, rp), generation_of(client, rp))
    allocations = {(rp if k == "RP" else k): v for k, v in allocations.items()}
    consumer = new_uuid()
    resp = put(client, consumer, allocations)
    assert resp.status_code == status
    assert text in error(resp)["detail"]
    assert (usages(client, rp), generation_of(client, rp)) == before
    assert client.get(f"/allocations/{consumer}").get_json() == {"allocations": {}}
    # No consumer record was left behind: a null generation still works.
    assert put(client, consumer, {rp: {"resources": {"VCPU": 1}}}).status_code == 204


def test_capacity_counts_allocation_ratio_and_reserved(client, db):
    rp_uuid = builders.create_provider(db)
    builders.set_inventory(db, rp_uuid, "VCPU", 4, reserved=1, allocation_ratio=2.0)
    # (4 - 1) * 2 = 6 VCPU of capacity.
    for _ in range(6):
        assert put(client, new_uuid(), {rp_uuid: {"resources": {"VCPU": 1}}}).status_code == 204
    resp = put(client, new_uuid(), {rp_uuid: {"resources": {"VCPU": 1}}})
    assert resp.status_code == 409
    assert "would exceed the capacity" in error(resp)["detail"]


def test_over_capacity_provider_allows_shrinking_not_growing(client, db):
    rp_uuid = builders.create_provider(db)
    builders.set_inventory(db, rp_uuid, "VCPU", 8)
    consumer = new_uuid()
    assert put(client, consumer, {rp_uuid: {"resources": {"VCPU": 6}}}).status_code == 204
    # The operator shrinks the inventory under the running consumer.
    builders.set_inventory(db, rp_uuid, "VCPU", 4, max_unit=8)
    assert (
        put(client, consumer, {rp_uuid: {"resources": {"VCPU": 6}}}, generation=1).status_code
        == 204
    )  # keeps what it holds
    assert (
        put(client, consumer, {rp_uuid: {"resources": {"VCPU": 5}}}, generation=2).status_code
        == 204
    )  # shrinks, still over
    resp = put(client, new_uuid(), {rp_uuid: {"resources": {"VCPU": 1}}})
    assert resp.status_code == 409  # nobody else gets in
    resp = put(client, consumer, {rp_uuid: {"resources": {"VCPU": 6}}}, generation=3)
    assert resp.status_code == 409  # nor may it grow back
    assert usages(client, rp_uuid)["VCPU"] == 5


def test_consumer_generations(client, rp):
    consumer = new_uuid()
    resp = put(client, consumer, {rp: {"resources": {"VCPU": 1}}}, generation=5)
    assert resp.status_code == 409
    assert error(resp)["code"] == "placement.concurrent_update"
    assert "consumer generation conflict - expected null but got 5" in error(resp)["detail"]
    assert put(client, consumer, {rp: {"resources": {"VCPU": 1}}}).status_code == 204
    resp = put(client, consumer, {rp: {"resources": {"VCPU": 2}}}, generation=None)
    assert resp.status_code == 409
    assert "expected 1 but got None" in error(resp)["detail"]
    resp = put(client, consumer, {rp: {"resources": {"VCPU": 2}}}, generation=7)
    assert "expected 1 but got 7" in error(resp)["detail"]
    assert put(client, consumer, {rp: {"resources": {"VCPU": 2}}}, generation=1).status_code == 204
    # Empty allocations (1.28) remove the consumer.
    assert put(client, consumer, {}, generation=2).status_code == 204
    assert client.get(f"/allocations/{consumer}").get_json() == {"allocations": {}}
    assert usages(client, rp)["VCPU"] == 0
    # Before 1.28 an empty dict is refused and generations are not checked.
    resp = client.put(
        f"/allocations/{consumer}",
        version="1.27",
        json={"allocations": {}, "project_id": PROJECT, "user_id": USER},
    )
    assert resp.status_code == 400


def test_consumer_type_and_project_updates(client, rp):
    consumer = new_uuid()
    assert (
        put(
            client,
            consumer,
            {rp: {"resources": {"VCPU": 1}}},
            version="1.38",
            consumer_type="INSTANCE",
        ).status_code
        == 204
    )
    resp = put(client, consumer, {rp: {"resources": {"VCPU": 1}}}, generation=1, version="1.38")
    assert resp.status_code == 400
    assert "'consumer_type' is a required property" in error(resp)["detail"]
    resp = put(
        client,
        consumer,
        {rp: {"resources": {"VCPU": 1}}},
        generation=1,
        version="1.38",
        consumer_type="instance",
    )
    assert resp.status_code == 400
    # An older write keeps the type, and moves the consumer to another project.
    body = {
        "allocations": {rp: {"resources": {"VCPU": 1}}},
        "project_id": "other",
        "user_id": USER,
        "consumer_generation": 1,
    }
    assert client.put(f"/allocations/{consumer}", json=body, version="1.37").status_code == 204
    got = client.get(f"/allocations/{consumer}", version="1.38").get_json()
    assert (got["consumer_type"], got["project_id"], got["consumer_generation"]) == (
        "INSTANCE",
        "other",
        2,
    )


def test_put_validation_errors(client, rp):
    resp = client.put(
        "/allocations/not-a-uuid",
        json={
            "allocations": {rp: {"resources": {"VCPU": 1}}},
            "project_id": PROJECT,
            "user_id": USER,
            "consumer_generation": None,
        },
    )
    assert resp.status_code == 400
    assert "Malformed consumer_uuid: not-a-uuid" in error(resp)["detail"]
    consumer = new_uuid()
    resp = client.put(
        f"/allocations/{consumer}", data="{", headers={"content-type": "application/json"}
    )
    assert resp.status_code == 400
    assert "Malformed JSON" in error(resp)["detail"]
    resp = client.put(f"/allocations/{consumer}", data="x", headers={"content-type": "text/plain"})
    assert resp.status_code == 415
    resp = put(client, consumer, {rp: {"resources": {"VCPU": 1}}}, bad_field=1)
    assert resp.status_code == 400
    assert "'bad_field' was unexpected" in error(resp)["detail"]
    resp = put(
        client, consumer, {rp: {"resources": {"VCPU": 1}}}, version="1.33", mappings={"": [rp]}
    )
    assert resp.status_code == 400
    # Mappings are accepted from 1.34 (and not stored).
    assert (
        put(
            client,
            consumer,
            {rp: {"resources": {"VCPU": 1}}},
            version="1.34",
            mappings={"_NET": [rp]},
        ).status_code
        == 204
    )
    # Dashless consumer uuids are stored dashed.
    dashless = new_uuid()
    assert (
        put(client, dashless.replace("-", ""), {rp: {"resources": {"VCPU": 1}}}).status_code == 204
    )
    assert client.get(f"/allocations/{dashless}").get_json()["allocations"]


def test_post_allocations_is_atomic(client, db, rp):
    other = builders.create_provider(db, name="cn2")
    builders.set_inventory(db, other, "VCPU", 2, max_unit=4)
    a, b, moving = new_uuid(), new_uuid(), new_uuid()
    assert put(client, moving, {rp: {"resources": {"VCPU": 2}}}).status_code == 204
    resp = client.post(
        "/allocations",
        version="1.28",
        json={
            a: {
                "allocations": {rp: {"resources": {"VCPU": 1}}},
                "project_id": PROJECT,
                "user_id": USER,
                "consumer_generation": None,
            },
            b: {
                "allocations": {other: {"resources": {"VCPU": 3}}},
                "project_id": PROJECT,
                "user_id": USER,
                "consumer_generation": None,
            },
        },
    )
    assert resp.status_code == 409
    assert "would exceed the capacity" in error(resp)["detail"]
    assert client.get(f"/allocations/{a}").get_json() == {"allocations": {}}
    assert usages(client, rp)["VCPU"] == 2

    # Move "moving" from rp to other and add a, in one request.
    resp = client.post(
        "/allocations",
        version="1.28",
        json={
            moving: {
                "allocations": {other: {"resources": {"VCPU": 2}}},
                "project_id": PROJECT,
                "user_id": USER,
                "consumer_generation": 1,
            },
            a: {
                "allocations": {rp: {"resources": {"VCPU": 1}}},
                "project_id": PROJECT,
                "user_id": USER,
                "consumer_generation": None,
            },
        },
    )
    assert resp.status_code == 204
    assert usages(client, rp)["VCPU"] == 1
    assert usages(client, other)["VCPU"] == 2
    # Empty allocations remove a consumer in the same transaction.
    resp = client.post(
        "/allocations",
        version="1.28",
        json={
            moving: {
                "allocations": {},
                "project_id": PROJECT,
                "user_id": USER,
                "consumer_generation": 2,
            }
        },
    )
    assert resp.status_code == 204
    assert usages(client, other)["VCPU"] == 0
    # Three 1-VCPU claims on a 2-VCPU provider in one request do not fit together.
    resp = client.post(
        "/allocations",
        version="1.28",
        json={
            new_uuid(): {
                "allocations": {other: {"resources": {"VCPU": 1}}},
                "project_id": PROJECT,
                "user_id": USER,
                "consumer_generation": None,
            }
            for _ in range(3)
        },
    )
    assert resp.status_code == 409
    assert usages(client, other)["VCPU"] == 0


def test_post_allocations_errors(client, rp):
    assert client.post("/allocations", json={}, version="1.12").status_code == 404
    resp = client.post("/allocations", version="1.13", json={new_uuid(): {"cow": "moo"}})
    assert resp.status_code == 400
    resp = client.post(
        "/allocations",
        version="1.13",
        json={
            new_uuid(): {
                "allocations": {rp: {"resources": {"CUSTOM_PONY": 1}}},
                "project_id": PROJECT,
                "user_id": USER,
            }
        },
    )
    assert resp.status_code == 400
    assert (
        "Unable to allocate inventory No such resource class CUSTOM_PONY" in error(resp)["detail"]
    )
    resp = client.post(
        "/allocations",
        version="1.28",
        json={
            new_uuid(): {
                "allocations": {rp: {"resources": {"VCPU": 1}}},
                "project_id": PROJECT,
                "user_id": USER,
            }
        },
    )
    assert resp.status_code == 400
    assert client.get("/allocations").status_code == 405


def test_provider_allocations_404_and_cache_headers(client, rp):
    missing = new_uuid()
    resp = client.get(f"/resource_providers/{missing}/allocations")
    assert resp.status_code == 404
    assert f"No resource provider with uuid {missing} found" in error(resp)["detail"]
    resp = client.get(f"/resource_providers/{rp}/allocations", version="1.15")
    assert resp.headers["cache-control"] == "no-cache"
    assert "last-modified" in resp.headers
    resp = client.get(f"/resource_providers/{rp}/allocations", version="1.14")
    assert "last-modified" not in resp.headers


def test_workload_class_extension(client, db, rp):
    child = builders.create_provider(db, name="cn1-numa0", parent_uuid=rp)
    builders.set_inventory(db, child, "VCPU", 4)
    perf, std, legacy = new_uuid(), new_uuid(), new_uuid()
    assert (
        put(
            client,
            perf,
            {child: {"resources": {"VCPU": 1}}, rp: {"resources": {"DISK_GB": 1}}},
            workload_class="performance",
        ).status_code
        == 204
    )
    assert (
        put(client, std, {rp: {"resources": {"VCPU": 1}}}, workload_class="standard").status_code
        == 204
    )
    assert put(client, legacy, {rp: {"resources": {"VCPU": 1}}}).status_code == 204
    # Never shown to vanilla clients.
    assert "workload_class" not in client.get(f"/allocations/{perf}").get_json()
    resp = put(client, new_uuid(), {rp: {"resources": {"VCPU": 1}}}, workload_class="eco")
    assert resp.status_code == 400

    body = client.get("/workload_usages").get_json()
    assert body == {"resource_providers": {rp: {"performance": 1, "standard": 2}}, "links": []}
    body = client.get(f"/workload_usages?in_tree={child}").get_json()
    assert body == {"resource_providers": {rp: {"performance": 1, "standard": 2}}, "links": []}
    idle = builders.create_provider(db, name="idle")
    assert client.get(f"/workload_usages?in_tree={idle}").get_json() == {
        "resource_providers": {idle: {"performance": 0, "standard": 0}},
        "links": [],
    }
    assert client.get("/workload_usages?in_tree=nope").status_code == 400
    # A later write without the field keeps the class; one with it changes it.
    assert put(client, perf, {child: {"resources": {"VCPU": 2}}}, generation=1).status_code == 204
    assert client.get("/workload_usages").get_json()["resource_providers"][rp] == {
        "performance": 1,
        "standard": 2,
    }
    resp = client.post(
        "/allocations",
        version="1.28",
        json={
            perf: {
                "allocations": {child: {"resources": {"VCPU": 2}}},
                "project_id": PROJECT,
                "user_id": USER,
                "consumer_generation": 2,
                "workload_class": "standard",
            }
        },
    )
    assert resp.status_code == 204
    assert client.get("/workload_usages").get_json()["resource_providers"][rp] == {
        "performance": 0,
        "standard": 3,
    }


def test_two_threads_race_for_the_last_unit(live_server, db):
    """Exactly one of two simultaneous claims on the last VCPU wins; the other is
    told the capacity is gone (409, not a retry-exhaustion concurrent_update),
    and the provider holds exactly the winner's unit."""
    import requests

    rp_uuid = builders.create_provider(db)
    builders.set_inventory(db, rp_uuid, "VCPU", 1)
    barrier = threading.Barrier(2)
    answers = {}
    headers = {"x-auth-token": "admin", "openstack-api-version": "placement 1.28"}

    def claim(consumer):
        barrier.wait()
        answers[consumer] = requests.put(
            f"{live_server.url}/allocations/{consumer}",
            json={
                "allocations": {rp_uuid: {"resources": {"VCPU": 1}}},
                "project_id": PROJECT,
                "user_id": USER,
                "consumer_generation": None,
            },
            headers=headers,
            timeout=30,
        )

    threads = [threading.Thread(target=claim, args=(new_uuid(),)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.status_code for r in answers.values()) == [204, 409]
    (winner,) = [c for c, r in answers.items() if r.status_code == 204]
    (loser,) = [r for r in answers.values() if r.status_code == 409]
    error = loser.json()["errors"][0]
    assert error["code"] == "placement.undefined_code"
    assert "exceed the capacity" in error["detail"]
    base = f"{live_server.url}/resource_providers/{rp_uuid}"
    assert requests.get(f"{base}/usages", headers=headers, timeout=30).json()["usages"] == {
        "VCPU": 1
    }
    held = requests.get(f"{base}/allocations", headers=headers, timeout=30).json()
    assert list(held["allocations"]) == [winner]


def _stale_provider_reads(monkeypatch):
    """Make every attempt read a provider generation one behind the stored one, so
    its guard ``UPDATE ... WHERE generation = :seen`` matches no row: a forced,
    real conflict. Returns the list of attempts (one per provider read)."""
    from placement.objects import allocation as alloc_obj

    real = alloc_obj._provider_state
    attempts = []

    def stale(conn, *args, **kwargs):
        answer = real(conn, *args, **kwargs)
        attempts.append(1)
        state = answer[0] if isinstance(answer, tuple) else answer
        for entry in state.values():
            entry["generation"] -= 1
        return answer

    monkeypatch.setattr(alloc_obj, "_provider_state", stale)
    return attempts


@pytest.mark.parametrize("retries", [0, 3])
def test_conflict_retry_count_bounds_the_attempts(db, make_flask_client, rp, monkeypatch, retries):
    """[placement] allocation_conflict_retry_count retries, then a clean 409."""
    from tests.conftest import ApiClient

    client = ApiClient(make_flask_client(**{"placement.allocation_conflict_retry_count": retries}))
    before = generation_of(client, rp)
    guards = []

    from sqlalchemy import event

    def count_guards(conn, cursor, statement, params, context, executemany):
        if statement.startswith("UPDATE resource_providers SET generation"):
            guards.append(statement)

    event.listen(db.engine, "before_cursor_execute", count_guards)
    attempts = _stale_provider_reads(monkeypatch)
    try:
        resp = put(client, new_uuid(), {rp: {"resources": {"VCPU": 1}}})
    finally:
        event.remove(db.engine, "before_cursor_execute", count_guards)
    assert resp.status_code == 409
    assert error(resp)["code"] == "placement.concurrent_update"
    assert len(attempts) == retries + 1
    assert len(guards) == retries + 1
    monkeypatch.undo()
    assert usages(client, rp)["VCPU"] == 0
    assert generation_of(client, rp) == before


def test_rolled_back_attempt_leaves_no_cached_ids(client, db, rp, monkeypatch):
    """A project/user created by an attempt that rolled back is not remembered:
    the next claim with the same ids creates them again and succeeds."""
    consumer = new_uuid()
    body = {
        "allocations": {rp: {"resources": {"VCPU": 1}}},
        "consumer_generation": None,
        "project_id": "rolled-back-project",
        "user_id": "rolled-back-user",
    }
    _stale_provider_reads(monkeypatch)
    assert client.put(f"/allocations/{consumer}", json=body, version="1.28").status_code == 409
    monkeypatch.undo()
    from placement.objects import allocation as alloc_obj

    cache = alloc_obj._id_cache(db)
    assert "rolled-back-project" not in cache.projects
    assert "rolled-back-user" not in cache.users
    assert client.put(f"/allocations/{consumer}", json=body, version="1.28").status_code == 204
    got = client.get(f"/allocations/{consumer}", version="1.28").get_json()
    assert (got["project_id"], got["user_id"]) == ("rolled-back-project", "rolled-back-user")
    assert "rolled-back-project" in cache.projects
    # And the cached ids serve the next claim of another consumer.
    other = new_uuid()
    assert client.put(f"/allocations/{other}", json=body, version="1.28").status_code == 204
    got = client.get(f"/allocations/{other}", version="1.28").get_json()
    assert (got["project_id"], got["user_id"]) == ("rolled-back-project", "rolled-back-user")


def test_existing_consumer_checks_in_order(client, rp):
    """The consumer read rides on the provider read: the answers keep their order
    (consumer generation, then unknown provider, then capacity)."""
    consumer = new_uuid()
    assert put(client, consumer, {rp: {"resources": {"VCPU": 1}}}).status_code == 204
    missing = new_uuid()
    resp = put(client, consumer, {missing: {"resources": {"VCPU": 1}}}, generation=1)
    assert resp.status_code == 400
    assert f"resource provider '{missing}' that does not exist" in error(resp)["detail"]
    resp = put(client, consumer, {missing: {"resources": {"VCPU": 1}}}, generation=7)
    assert resp.status_code == 409
    assert "expected 1 but got 7" in error(resp)["detail"]
    resp = put(client, consumer, {rp: {"resources": {"VCPU": 2}}}, generation=None)
    assert resp.status_code == 409
    assert "consumer generation conflict" in error(resp)["detail"]
    assert put(client, new_uuid(), {rp: {"resources": {"VCPU": 7}}}).status_code == 204
    resp = put(client, consumer, {rp: {"resources": {"VCPU": 2}}}, generation=1)
    assert resp.status_code == 409
    assert "exceed the capacity" in error(resp)["detail"]
    assert usages(client, rp)["VCPU"] == 8
    # On the full provider, rewriting its own unit fits (its committed usage is its own).
    assert put(client, consumer, {rp: {"resources": {"VCPU": 1}}}, generation=1).status_code == 204
    assert usages(client, rp)["VCPU"] == 8
