"""The build request and scheduling report extensions over the API."""

import uuid

from joule import request_spec
from tests import specs


def _new():
    return str(uuid.uuid4())


spec_of = specs.build_request_spec


def _br(client, instance=None, wc="performance", request_id="req-1"):
    instance = instance or _new()
    resp = client.post(
        "/build_requests",
        json={
            "instance_uuid": instance,
            "request_id": request_id,
            "workload_class": wc,
            "spec": spec_of(instance, request_id, wc),
        },
    )
    return instance, resp


def test_build_request_lifecycle_and_pending_count(client):
    perf, resp = _br(client)
    assert resp.status_code == 201, resp.get_json()
    assert resp.get_json()["status"] == "pending"
    assert resp.headers["Location"] == f"/build_requests/{perf}"
    _std, _ = _br(client, wc="standard")
    done, _ = _br(client)

    host = _new()
    resp = client.put(f"/build_requests/{done}", json={"status": "placed", "host_uuid": host})
    assert resp.status_code == 200
    assert resp.get_json()["host_uuid"] == host

    pending = client.get("/build_requests?status=pending&workload_class=performance")
    assert [b["instance_uuid"] for b in pending.get_json()["build_requests"]] == [perf]
    one = client.get(f"/build_requests/{perf}").get_json()
    # Stored as the contract dumps it: defaults filled, the receiver's version.
    assert one["spec"] == {
        **spec_of(perf, "req-1", "performance"),
        "num_instances": 1,
        "consumer_type": "INSTANCE",
        "version": request_spec.REQUEST_SPEC_VERSION,
    }
    assert one["workload_class"] == "performance"


def test_build_request_errors_leave_state_unchanged(client):
    inst, _ = _br(client)
    # duplicate instance
    _, resp = _br(client, instance=inst)
    assert resp.status_code == 409
    assert resp.get_json()["errors"][0]["code"] == "placement.build_request.duplicate"
    # bad bodies
    for body in ({"status": "running"}, {"status": "placed"}, {"status": "failed", "x": 1}):
        resp = client.put(f"/build_requests/{inst}", json=body)
        assert resp.status_code == 400, body
    resp = client.post(
        "/build_requests", json={"instance_uuid": "nope", "request_id": "r", "spec": {}}
    )
    assert resp.status_code == 400
    assert "JSON does not validate" in resp.get_json()["errors"][0]["detail"]
    # unknown instance
    resp = client.put(f"/build_requests/{_new()}", json={"status": "failed"})
    assert resp.status_code == 404
    assert resp.get_json()["errors"][0]["code"] == "placement.build_request.not_found"
    assert client.get("/build_requests/not-a-uuid").status_code == 404
    # bad query
    assert client.get("/build_requests?status=bogus").status_code == 400
    assert client.get(f"/build_requests/{inst}").get_json()["status"] == "pending"
    # finished once; a repeated identical finish is fine, a different one is 409
    assert (
        client.put(f"/build_requests/{inst}", json={"status": "failed", "reason": "x"}).status_code
        == 200
    )
    assert client.put(f"/build_requests/{inst}", json={"status": "failed"}).status_code == 200
    resp = client.put(f"/build_requests/{inst}", json={"status": "placed", "host_uuid": _new()})
    assert resp.status_code == 409
    assert resp.get_json()["errors"][0]["code"] == "placement.build_request.invalid_transition"
    assert client.get(f"/build_requests/{inst}").get_json()["status"] == "failed"


def test_scheduling_report_roundtrip_and_visibility(client):
    body = {"project_id": "proj-a", "report": {"candidates_seen": 3, "removed": {"x": 1}}}
    resp = client.put("/scheduling_reports/req-abc", json=body)
    assert resp.status_code == 201
    assert client.put("/scheduling_reports/req-abc", json=body).status_code == 200
    got = client.get("/scheduling_reports/req-abc")
    assert got.status_code == 200
    assert got.get_json()["report"] == body["report"]
    assert got.get_json()["request_id"] == "req-abc"
    missing = client.get("/scheduling_reports/req-nope")
    assert missing.status_code == 404
    assert missing.get_json()["errors"][0]["code"] == "placement.scheduling_report.not_found"
    # A non-admin of another project cannot read it, even as a reader.
    resp = client.get(
        "/scheduling_reports/req-abc", headers={"x-auth-token": "bob:proj-b", "x-roles": "reader"}
    )
    assert resp.status_code == 403
    # Bad bodies.
    assert client.put("/scheduling_reports/req-x", json={"report": []}).status_code == 400
    assert client.put("/scheduling_reports/req-x", json={"nope": {}}).status_code == 400
    assert client.get("/scheduling_reports/req-x").status_code == 404


def _post_spec(client, instance, spec, request_id="req-1", **envelope):
    return client.post(
        "/build_requests",
        json={"instance_uuid": instance, "request_id": request_id, "spec": spec, **envelope},
    )


def test_build_request_spec_is_checked_with_the_scheduler_contract(client):
    inst = _new()
    good = spec_of(inst, "req-1", "standard")
    cases = [
        (
            {**good, "request_id": "../traits/CUSTOM_X"},
            "request_id: '../traits/CUSTOM_X' is not a valid request id",
        ),
        ({**good, "colour": "red"}, "colour: unknown field"),
        ({**good, "version": "2.0"}, "request_spec 2.0 is newer than this receiver"),
        ({k: v for k, v in good.items() if k != "version"}, "version: is required"),
        (
            {**good, "resources": {"VCPU": 0}, "user_id": "a b"},
            "resources.VCPU: must be a positive integer",
        ),
        ({**good, "request_id": "req-other"}, "the spec's request_id 'req-other' is not"),
        ({**good, "instance_uuids": [_new()]}, f"instance {inst} is not one of the spec's"),
    ]
    for spec, message in cases:
        resp = _post_spec(client, inst, spec)
        assert resp.status_code == 400, (spec, resp.get_json())
        err = resp.get_json()["errors"][0]
        assert err["code"] == "placement.build_request.invalid_spec"
        assert "Invalid spec: " in err["detail"] and message in err["detail"], err["detail"]
    resp = _post_spec(client, inst, good, workload_class="performance")
    assert (
        resp.status_code == 400
        and "is not the spec's 'standard'" in resp.get_json()["errors"][0]["detail"]
    )
    # Nothing was recorded for any of them.
    assert client.get(f"/build_requests/{inst}").status_code == 404
    assert client.get("/build_requests").get_json()["build_requests"] == []
    # The envelope's request_id follows the same id rule (jsonschema, 400).
    resp = _post_spec(client, inst, good, request_id="req/1")
    assert resp.status_code == 400 and "does not match" in resp.get_json()["errors"][0]["detail"]
    # The workload class defaults to the spec's.
    resp = _post_spec(client, inst, {**good, "workload_class": "performance"})
    assert resp.status_code == 201 and resp.get_json()["workload_class"] == "performance"


def test_report_ids_outside_the_request_id_rule_are_not_found(client):
    for bad in ("a%20b", "-x", "x" * 65):
        resp = client.put(f"/scheduling_reports/{bad}", json={"report": {}})
        assert resp.status_code == 404, bad
        assert resp.get_json()["errors"][0]["code"] == "placement.scheduling_report.not_found"


def test_bulk_build_requests_name_the_record_whose_spec_is_bad(client):
    first, second = _new(), _new()
    records = [
        {"instance_uuid": i, "request_id": "req-b", "spec": spec_of(i, "req-b", "standard")}
        for i in (first, second)
    ]
    records[1]["spec"]["cell"] = "cell/../x"
    resp = client.post("/build_requests", json={"build_requests": records})
    assert resp.status_code == 400
    err = resp.get_json()["errors"][0]
    assert err["code"] == "placement.build_request.invalid_spec"
    assert (
        "build_requests.1: Invalid spec: cell: 'cell/../x' is not a valid cell name"
        in err["detail"]
    )
    assert client.get("/build_requests").get_json()["build_requests"] == []


def test_bulk_scheduling_reports_all_or_nothing(client):
    assert client.put("/scheduling_reports/req-old", json={"report": {"v": 1}}).status_code == 201
    body = {
        "reports": [
            {"request_id": "req-old", "project_id": "proj-a", "report": {"v": 2}},
            {"request_id": "req-new", "project_id": "proj-a", "report": {"v": 3}},
        ]
    }
    resp = client.post("/scheduling_reports", json=body)
    assert resp.status_code == 200, resp.get_json()
    assert resp.get_json() == {"created": 1, "replaced": 1}
    assert client.get("/scheduling_reports/req-old").get_json()["report"] == {"v": 2}
    got = client.get("/scheduling_reports/req-new").get_json()
    assert got["report"] == {"v": 3} and got["project_id"] == "proj-a"
    # One bad item: 400 naming it, nothing written.
    for bad, words in (
        ({"request_id": "req/x", "report": {}}, "reports[1]"),
        ({"request_id": "req-old", "report": {}}, "repeated"),
        ({"request_id": "req-y", "report": []}, "is not of type"),
        ({"request_id": "req-y"}, "required"),
    ):
        items = [{"request_id": "req-old", "report": {"v": 9}}, bad]
        resp = client.post("/scheduling_reports", json={"reports": items})
        assert resp.status_code == 400, bad
        assert words in resp.get_json()["errors"][0]["detail"], resp.get_json()
        assert client.get("/scheduling_reports/req-old").get_json()["report"] == {"v": 2}
        assert client.get("/scheduling_reports/req-y").status_code == 404
    assert client.post("/scheduling_reports", json={"reports": []}).status_code == 400
    # Policy: the same rule as PUT.
    resp = client.post(
        "/scheduling_reports",
        json={"reports": [{"request_id": "req-z", "report": {}}]},
        headers={"x-auth-token": "bob:proj-b", "x-roles": "reader"},
    )
    assert resp.status_code == 403
