"""POST /nodes/{uuid}/heartbeat: the node agent's liveness and twin status.

The stamp and the ages come from the database's clock; a heartbeat moves
neither the node record's nor the twin's generation, so the power
controller's and the operator's writes never conflict with it.
"""

import time

from tests import builders
from tests.conftest import new_uuid

STATUS = {
    "observed_generation": 0,
    "profile": "eco",
    "cpu": {
        "method": "rapl",
        "result": "applied",
        "requested_watts": 240.0,
        "applied_watts": 240.0,
        "measured_watts": 101.5,
        "reason": None,
        "domains": [
            {"name": "package-0", "limit_watts": 120.0, "measured_watts": 50.0},
            {"name": "package-1", "limit_watts": 120.0, "measured_watts": 51.5},
        ],
    },
    "gpu": {"method": "none", "result": "uncapped", "domains": []},
}


def _code(resp):
    return resp.get_json()["errors"][0]["code"]


def _node(client, db, name="cn1"):
    rp = builders.create_provider(db, name=name)
    assert client.put(f"/nodes/{rp}", json={"cell": "cell1"}).status_code == 201
    return rp


def test_heartbeat_stamps_and_ages_by_the_database_clock(client, db):
    rp = _node(client, db)
    node = client.get(f"/nodes/{rp}").get_json()
    assert node["heartbeat_at"] is None and node["heartbeat_age_seconds"] is None

    resp = client.post(f"/nodes/{rp}/heartbeat", json={})
    assert resp.status_code == 200, resp.get_json()
    body = resp.get_json()
    assert body["twin"] is None and body["heartbeat_at"].endswith("Z")
    time.sleep(0.3)
    node = client.get(f"/nodes/{rp}").get_json()
    assert node["heartbeat_at"] == body["heartbeat_at"]
    assert 0.2 <= node["heartbeat_age_seconds"] < 30
    assert node["generation"] == 0  # not moved by the heartbeat
    (listed,) = client.get("/nodes").get_json()["nodes"]
    assert listed["heartbeat_at"] == body["heartbeat_at"]
    assert 0.2 <= listed["heartbeat_age_seconds"] < 30

    # The candidates' node data carries the age too (the scheduler's input).
    builders.set_inventory(db, rp, "VCPU", 4)
    data = client.get("/allocation_candidates?resources=VCPU:1&node_data=true").get_json()
    assert 0.2 <= data["nodes"][rp]["heartbeat_age"] < 30

    # A second heartbeat moves the stamp forward.
    later = client.post(f"/nodes/{rp}/heartbeat", json={}).get_json()["heartbeat_at"]
    assert later > body["heartbeat_at"]
    assert client.get(f"/nodes/{rp}").get_json()["heartbeat_age_seconds"] < 0.2 + 5


def test_heartbeat_writes_the_twin_status_without_moving_its_generation(client, db):
    rp = _node(client, db)
    # Without a twin the status has nowhere to go; the heartbeat still counts.
    resp = client.post(f"/nodes/{rp}/heartbeat", json={"twin_status": STATUS})
    assert resp.status_code == 200 and resp.get_json()["twin"] is None

    twin = client.put(f"/nodes/{rp}/twin", json={"profile": "eco", "cpu_cap_watts": 240})
    assert twin.status_code == 201
    resp = client.post(f"/nodes/{rp}/heartbeat", json={"twin_status": STATUS})
    got = resp.get_json()["twin"]
    assert got["generation"] == 0 and got["cpu_cap_watts"] == 240
    assert got["status"] == STATUS and got["status_updated_at"].endswith("Z")
    assert client.get(f"/nodes/{rp}/twin").get_json()["status"] == STATUS
    # The controller's next write, with the generation it read, still goes through
    # and keeps the status (only the agent writes it).
    resp = client.post(
        "/nodes/twins",
        json={"twins": [{"uuid": rp, "profile": "performance", "generation": 0}]},
    )
    assert resp.status_code == 200, resp.get_json()
    twin = client.get(f"/nodes/{rp}/twin").get_json()
    assert twin["generation"] == 1 and twin["status"] == STATUS
    # A twin write may not set the status.
    resp = client.put(
        f"/nodes/{rp}/twin", json={"profile": "eco", "generation": 1, "status": STATUS}
    )
    assert resp.status_code == 400


def test_heartbeat_errors(client, db):
    rp = builders.create_provider(db, name="bare")
    resp = client.post(f"/nodes/{rp}/heartbeat", json={})
    assert resp.status_code == 404 and _code(resp) == "placement.node.not_found"
    resp = client.post(f"/nodes/{new_uuid()}/heartbeat", json={})
    assert resp.status_code == 404
    assert _code(resp) == "placement.resource_provider.not_found"
    child = builders.create_provider(db, name="child", parent_uuid=rp)
    assert client.post(f"/nodes/{child}/heartbeat", json={}).status_code == 400
    rp = _node(client, db, "cn2")
    for bad in (
        {"twin_status": {"cpu": {"method": "magic", "result": "applied"}}},
        {"twin_status": {"cpu": {"method": "rapl"}}},
        {"twin_status": {"cpu": {"method": "rapl", "result": "applied", "applied_watts": -1}}},
        {"twin_status": {"unknown": 1}},
        {"other": 1},
        {"twin_status": {"cpu": {"method": "rapl", "result": "applied", "domains": [{}]}}},
        {"twin_status": {"instances": {"running": 1}}},
        {"twin_status": {"instances": {"running": -1, "running_performance": 0}}},
        {"twin_status": {"instances": {"running": 1, "running_performance": 0, "x": 1}}},
    ):
        resp = client.post(f"/nodes/{rp}/heartbeat", json=bad)
        assert resp.status_code == 400, bad
        assert resp.get_json()["errors"][0]["code"] == "placement.undefined_code"
    assert client.get(f"/nodes/{rp}").get_json()["heartbeat_at"] is None


def test_the_agents_instance_counts_travel_in_the_twin_status(client, db):
    rp = _node(client, db, "cn3")
    assert client.put(f"/nodes/{rp}/twin", json={"profile": "performance"}).status_code == 201
    status = {**STATUS, "instances": {"running": 3, "running_performance": 2}}
    resp = client.post(f"/nodes/{rp}/heartbeat", json={"twin_status": status})
    assert resp.status_code == 200, resp.get_json()
    assert client.get(f"/nodes/{rp}/twin").get_json()["status"]["instances"] == {
        "running": 3,
        "running_performance": 2,
    }
