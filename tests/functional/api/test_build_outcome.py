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
