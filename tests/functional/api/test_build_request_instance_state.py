"""How a placed instance ended (PUT /build_requests/{uuid}/instance_state):
once, for the host it is placed on, the same report again a no-op; every
refusal leaves the record as it was."""

import uuid

from tests import specs

NOT_THERE = "placement.build_request.not_placed_there"
FINISHED = "placement.build_request.invalid_transition"


def _placed(client, host):
    instance = str(uuid.uuid4())
    resp = client.post(
        "/build_requests",
        json={
            "instance_uuid": instance,
            "request_id": "req-end",
            "spec": specs.build_request_spec(instance, "req-end"),
        },
    )
    assert resp.status_code == 201, resp.get_json()
    resp = client.put(f"/build_requests/{instance}", json={"status": "placed", "host_uuid": host})
    assert resp.status_code == 200, resp.get_json()
    return instance


def _end(client, instance, **body):
    return client.put(f"/build_requests/{instance}/instance_state", json=body)


def _code(resp):
    return resp.get_json()["errors"][0]["code"]


def test_an_instance_ends_once_on_its_host(client):
    host = str(uuid.uuid4())
    inst = _placed(client, host)
    before = client.get(f"/build_requests/{inst}").get_json()
    assert (before["instance_state"], before["exit_status"], before["state_updated_at"]) == (
        None,
        None,
        None,
    )
    resp = _end(
        client, inst, state="errored", host_uuid=host, exit_status=3, reason="exit status 3"
    )
    assert resp.status_code == 200, resp.get_json()
    rec = resp.get_json()
    assert (rec["instance_state"], rec["exit_status"], rec["state_reason"]) == (
        "errored",
        3,
        "exit status 3",
    )
    assert rec["status"] == "placed" and rec["state_updated_at"].endswith("Z")
    assert rec["generation"] == before["generation"] + 1
    # The same report again (a lost answer): the record unchanged.
    again = _end(client, inst, state="errored", host_uuid=host, exit_status=3, reason="again")
    assert again.status_code == 200 and again.get_json() == rec
    # Another end: refused, nothing changed.
    other = _end(client, inst, state="finished", host_uuid=host, exit_status=0)
    assert other.status_code == 409 and _code(other) == FINISHED
    assert client.get(f"/build_requests/{inst}").get_json() == rec


def test_an_end_from_another_host_or_of_an_unplaced_record_is_refused(client):
    host = str(uuid.uuid4())
    inst = _placed(client, host)
    elsewhere = _end(client, inst, state="finished", host_uuid=str(uuid.uuid4()), exit_status=0)
    assert elsewhere.status_code == 409 and _code(elsewhere) == NOT_THERE
    assert "is placed on" in elsewhere.get_json()["errors"][0]["detail"]
    pending = str(uuid.uuid4())
    client.post(
        "/build_requests",
        json={
            "instance_uuid": pending,
            "request_id": "req-end",
            "spec": specs.build_request_spec(pending, "req-end"),
        },
    )
    resp = _end(client, pending, state="deleted", host_uuid=host)
    assert resp.status_code == 409 and _code(resp) == NOT_THERE
    assert client.get(f"/build_requests/{inst}").get_json()["instance_state"] is None
    missing = _end(client, str(uuid.uuid4()), state="lost", host_uuid=host)
    assert missing.status_code == 404


def test_a_bad_end_is_a_400_naming_the_field(client):
    host = str(uuid.uuid4())
    inst = _placed(client, host)
    for body in (
        {"state": "running", "host_uuid": host},
        {"state": "finished"},
        {"state": "finished", "host_uuid": "not-a-uuid"},
        {"state": "finished", "host_uuid": host, "exit_status": "0"},
        {"state": "finished", "host_uuid": host, "colour": "red"},
    ):
        resp = _end(client, inst, **body)
        assert resp.status_code == 400, (body, resp.get_json())
    assert client.get(f"/build_requests/{inst}").get_json()["instance_state"] is None
