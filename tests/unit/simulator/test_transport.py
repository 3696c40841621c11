"""The simulator's transport: the placement client straight into placement's app."""

import pytest

from joule import placement_client
from simulator import cluster


@pytest.fixture
def client(tmp_path):
    with cluster.serve(str(tmp_path / "placement.sqlite")) as (client, _url, _db):
        yield client


def test_requests_reach_placement_with_query_body_and_microversion(client):
    client.ensure_trait("CUSTOM_SIM_TRANSPORT")
    # The path's own query and ``params`` are both sent.
    resp = client.request(
        "GET",
        placement_client.url_path("traits") + "?name=startswith:CUSTOM_SIM",
        params={"associated": "false"},
    )
    assert resp.json() == {"traits": ["CUSTOM_SIM_TRANSPORT"]}
    # The client's microversion header reached the app.
    assert resp.headers["openstack-api-version"] == f"placement {placement_client.MICROVERSION}"
    created = client.request(
        "POST",
        placement_client.url_path("resource_providers"),
        json={"name": "sim-rp"},
        ok=(200,),
    ).json()
    assert created["name"] == "sim-rp"


def test_errors_keep_placement_status_and_message(client):
    with pytest.raises(placement_client.NotFound) as exc:
        client.request("GET", placement_client.url_path("resource_providers", "0" * 32))
    assert exc.value.status == 404
    with pytest.raises(placement_client.BadRequest) as exc:
        client.request("POST", placement_client.url_path("resource_providers"), json={"x": 1})
    assert exc.value.status == 400 and "name" in str(exc.value)
    # Nothing was created by the refused request.
    listed = client.request("GET", placement_client.url_path("resource_providers")).json()
    assert listed["resource_providers"] == []
