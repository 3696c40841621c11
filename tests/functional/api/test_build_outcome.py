"""Build outcomes per host (extension): the count the BuildFailureWeigher reads."""

import uuid

from tests import builders


def test_failures_count_up_a_success_clears_and_candidates_show_it(client, db):
    host = builders.create_provider(db, name="bo-host")
    builders.set_inventory(db, host, "VCPU", 4)
    child = builders.create_provider(db, name="bo-child", parent_uuid=host)
    url = f"/nodes/{host}/build_outcome"
    assert client.post(url, json={"succeeded": True}).get_json() == {"failed_builds": 0}
    assert client.post(url, json={"succeeded": False}).get_json() == {"failed_builds": 1}
    assert client.post(url, json={"succeeded": False}).get_json() == {"failed_builds": 2}
    body = client.get("/allocation_candidates?resources=VCPU:1&node_data=true").get_json()
    assert body["nodes"][host]["failed_builds"] == 2
    assert client.post(url, json={"succeeded": True}).get_json() == {"failed_builds": 0}
    body = client.get("/allocation_candidates?resources=VCPU:1&node_data=true").get_json()
    assert body["nodes"][host]["failed_builds"] == 0
    # Bad input: the API's errors, nothing counted.
    for bad in ({}, {"succeeded": "no"}, {"succeeded": True, "x": 1}):
        resp = client.post(url, json=bad)
        assert (
            resp.status_code == 400
            and "JSON does not validate" in resp.get_json()["errors"][0]["detail"]
        )
    resp = client.post(f"/nodes/{child}/build_outcome", json={"succeeded": False})
    assert resp.status_code == 400
    resp = client.post(f"/nodes/{uuid.uuid4()}/build_outcome", json={"succeeded": False})
    assert resp.status_code == 404
    assert resp.get_json()["errors"][0]["code"] == "placement.resource_provider.not_found"
    assert client.post(url, json={"succeeded": False}).get_json() == {"failed_builds": 1}


def test_bulk_outcomes_in_order_all_or_nothing(client, db):
    one = builders.create_provider(db, name="bo-bulk-1")
    two = builders.create_provider(db, name="bo-bulk-2")
    child = builders.create_provider(db, name="bo-bulk-child", parent_uuid=one)
    url = "/nodes/build_outcomes"

    def report(*pairs):
        return client.post(url, json={"outcomes": [{"uuid": u, "succeeded": s} for u, s in pairs]})

    resp = report((one, False), (two, False), (one, False), (two, True), (two, False))
    assert resp.status_code == 200
    assert resp.get_json() == {"failed_builds": {one: 2, two: 1}}
    # A success clears what came before it in the same call.
    assert report((one, False), (one, True)).get_json() == {"failed_builds": {one: 0}}
    # An unknown host or a child: refused, nothing counted (not even the others).
    missing = str(uuid.uuid4())
    resp = report((two, False), (missing, False))
    assert resp.status_code == 404
    assert resp.get_json()["errors"][0]["code"] == "placement.resource_provider.not_found"
    assert missing in resp.get_json()["errors"][0]["detail"]
    assert report((two, False), (child, False)).status_code == 400
    for bad in (
        {},
        {"outcomes": []},
        {"outcomes": [{"uuid": two}]},
        {"outcomes": [{"uuid": "nope", "succeeded": True}]},
        {"outcomes": [{"uuid": two, "succeeded": False, "x": 1}]},
    ):
        resp = client.post(url, json=bad)
        assert resp.status_code == 400, bad
        assert "JSON does not validate" in resp.get_json()["errors"][0]["detail"]
    # Refused calls counted nothing: two was at 1.
    assert report((two, False)).get_json() == {"failed_builds": {two: 2}}


def test_a_placed_finish_with_build_succeeded_clears_the_hosts_failures(client, db):
    host = builders.create_provider(db, name="bo-finish-host")
    other = builders.create_provider(db, name="bo-finish-other")
    client.post(
        "/nodes/build_outcomes",
        json={"outcomes": [{"uuid": h, "succeeded": False} for h in (host, host, other)]},
    )
    instances = [str(uuid.uuid4()) for _ in range(3)]
    records = [
        {
            "instance_uuid": i,
            "request_id": "req-bo",
            "spec": {
                "version": "1.0",
                "request_id": "req-bo",
                "instance_uuids": instances,
                "resources": {"VCPU": 1},
                "project_id": "p",
                "user_id": "u",
            },
        }
        for i in instances
    ]
    assert client.post("/build_requests", json={"build_requests": records}).status_code == 201
    a, b, c = instances
    # build_succeeded on a failed finish: 400, nothing finished or cleared.
    resp = client.put(
        "/build_requests",
        json={
            "build_requests": [
                {
                    "instance_uuid": a,
                    "status": "placed",
                    "host_uuid": host,
                    "build_succeeded": True,
                },
                {"instance_uuid": b, "status": "failed", "build_succeeded": True},
            ]
        },
    )
    assert resp.status_code == 400 and "build_succeeded" in resp.get_json()["errors"][0]["detail"]
    assert client.get(f"/build_requests/{a}").get_json()["status"] == "pending"
    resp = client.put(
        "/build_requests",
        json={
            "build_requests": [
                {
                    "instance_uuid": a,
                    "status": "placed",
                    "host_uuid": host,
                    "build_succeeded": True,
                },
                # Placed without the flag (a takeover that did not build): the count stays.
                {"instance_uuid": b, "status": "placed", "host_uuid": other},
            ]
        },
    )
    assert resp.status_code == 200
    counts = client.post(
        "/nodes/build_outcomes",
        json={"outcomes": [{"uuid": h, "succeeded": False} for h in (host, other)]},
    ).get_json()
    assert counts == {"failed_builds": {host: 1, other: 2}}
    # The single form takes it too.
    resp = client.put(
        f"/build_requests/{c}",
        json={"status": "placed", "host_uuid": host, "build_succeeded": True},
    )
    assert resp.status_code == 200
    counts = client.post(
        "/nodes/build_outcomes", json={"outcomes": [{"uuid": host, "succeeded": False}]}
    ).get_json()
    assert counts == {"failed_builds": {host: 1}}
