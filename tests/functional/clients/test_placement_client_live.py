"""joule.placement_client against a live placement: ids never leave their route.

Every client method that puts a caller's id into a URL is called with ids
built to escape (``../traits/CUSTOM_X`` and friends). Placement must see each
as one segment of the route the method targets: nothing is created or
changed anywhere else, and the client gets a clean 4xx as a typed error.
"""

import pytest

from joule import placement_client
from joule.placement_client import url_path
from tests.conftest import new_uuid

ESCAPES = [
    "../traits/CUSTOM_X",
    "..%2Ftraits%2FCUSTOM_X",
    "..",
    ".",
    "x/../../traits/CUSTOM_X",
    "CUSTOM_X?name=CUSTOM_X",
    "x#frag",
    "../resource_providers",
]


def _traits(api):
    return set(api.request("GET", url_path("traits")).json()["traits"])


def _state(api):
    return (
        _traits(api),
        api.request("GET", url_path("resource_providers")).json()["resource_providers"],
        api.list_build_requests(),
    )


@pytest.mark.parametrize("bad_id", ESCAPES)
def test_no_id_leaves_the_route_it_targets(live_server, bad_id):
    api = placement_client.PlacementClient.for_endpoint(live_server.url)
    before = _state(api)
    assert "CUSTOM_X" not in before[0]
    calls = [
        lambda: api.put_report(bad_id, "proj", {"ok": True}),
        lambda: api.finish_build_request(bad_id, "placed"),
        lambda: api.put_allocations(bad_id, {"allocations": {}}, "p", "u"),
        lambda: api.get_allocations(bad_id),
        lambda: api.put_node(bad_id, cell="c1"),
        lambda: api.put_hardware(bad_id, {"cpu_model": "x"}),
        lambda: api.provider_inventories(bad_id),
    ]
    for call in calls:
        try:
            call()
        except (placement_client.BadRequest, placement_client.NotFound):
            pass  # refused inside the targeted route: what we want
        # Anything else (a 2xx, or a 405 from a route it should never reach)
        # shows up as a difference below or as an unexpected exception here.
    api.delete_allocations(bad_id)  # 404 counts as done
    assert _state(api) == before


def test_a_scheduling_report_id_is_one_segment(live_server):
    """The reported attack: request_id "../traits/CUSTOM_X" used to create the trait."""
    api = placement_client.PlacementClient.for_endpoint(live_server.url)
    with pytest.raises((placement_client.BadRequest, placement_client.NotFound)):
        api.put_report("../traits/CUSTOM_X", new_uuid(), {"hosts": []})
    assert "CUSTOM_X" not in _traits(api)
    # A plain id still works end to end.
    api.put_report("req-plain-1", new_uuid(), {"hosts": []})


def test_twin_writes_larger_than_the_body_limit_go_in_chunks(live_server, db):
    """A 5,000-node first tick is about 1.3 MB of twins, over the 1 MiB body limit.

    The client splits the write so no body reaches the limit; here the chunk
    is shrunk to 3 so 7 nodes take three POSTs, and every twin is stored.
    """
    from tests import builders

    rps = [builders.create_provider(db, name=f"cn-chunk-{i}") for i in range(7)]
    api = placement_client.PlacementClient.for_endpoint(live_server.url)
    api.TWINS_PER_REQUEST = 3
    posts = []
    real_json = api._json

    def counting(method, path, **kw):
        if method == "POST":
            posts.append(len(kw["json"]["twins"]))
        return real_json(method, path, **kw)

    api._json = counting
    stored = api.write_twins([{"uuid": rp, "profile": "eco"} for rp in rps])
    assert posts == [3, 3, 1]
    assert sorted(t["uuid"] for t in stored) == sorted(rps)
    twins = {n["uuid"]: n["twin"] for n in api.list_nodes()}
    assert all(twins[rp]["profile"] == "eco" for rp in rps)
