"""Provider aggregates over HTTP: the 1.1 list body and the 1.19 form with generations."""

from tests.conftest import new_uuid


def test_aggregates_before_and_after_1_19(client):
    rp = client.post("/resource_providers", json={"name": "rp"}).get_json()["uuid"]
    url = f"/resource_providers/{rp}/aggregates"
    agg1, agg2 = new_uuid(), new_uuid()
    assert client.get(url, version="1.0").status_code == 404

    # Before 1.19 the request body is a bare list, the response an object
    # (API reference; nova's report client reads resp.json()["aggregates"]).
    resp = client.put(url, json=[agg1, agg2], version="1.1")
    assert resp.status_code == 200 and resp.get_json() == {"aggregates": [agg1, agg2]}
    got = client.get(url, version="1.18").get_json()
    assert list(got) == ["aggregates"] and sorted(got["aggregates"]) == sorted([agg1, agg2])
    # The pre-1.19 form moves no generation.
    assert client.get(f"/resource_providers/{rp}").get_json()["generation"] == 0

    body = client.get(url).get_json()
    assert sorted(body["aggregates"]) == sorted([agg1, agg2])
    assert body["resource_provider_generation"] == 0
    resp = client.put(url, json={"aggregates": [agg2], "resource_provider_generation": 0})
    assert resp.get_json() == {"aggregates": [agg2], "resource_provider_generation": 1}
    stale = client.put(url, json={"aggregates": [], "resource_provider_generation": 0})
    assert stale.status_code == 409
    assert stale.get_json()["errors"][0]["code"] == "placement.concurrent_update"

    for body, text in [
        ([agg1], "JSON does not validate"),
        ({"aggregates": ["harry"], "resource_provider_generation": 1}, "is not a 'uuid'"),
        (
            {"aggregates": [agg1, agg1], "resource_provider_generation": 1},
            "has non-unique elements",
        ),
        ({"aggregates": [agg1]}, "'resource_provider_generation' is a required"),
    ]:
        resp = client.put(url, json=body)
        assert resp.status_code == 400 and text in resp.get_json()["errors"][0]["detail"]
    assert client.get(url).get_json() == {"aggregates": [agg2], "resource_provider_generation": 1}
    assert client.get(f"/resource_providers/{new_uuid()}/aggregates").status_code == 404
