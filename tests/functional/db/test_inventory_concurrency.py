"""16 clients replace one provider's inventory with the same generation at once.

Exactly one may win; every other one must get 409 placement.concurrent_update
and the stored inventory must be the winner's, on both backends (the server
is threaded, so the requests really overlap).
"""

import concurrent.futures
import threading

from tests import processes

CLIENTS = 16


def _request(method, url, body=None):
    return processes.api_request(method, url, body, version="1.39")


def test_same_generation_only_one_wins(live_server):
    status, rp = _request("POST", f"{live_server.url}/resource_providers", {"name": "contended"})
    assert status == 200
    url = f"{live_server.url}/resource_providers/{rp['uuid']}/inventories"
    barrier = threading.Barrier(CLIENTS)

    def put(i):
        body = {
            "resource_provider_generation": 0,
            "inventories": {"VCPU": {"total": 10 + i}, "MEMORY_MB": {"total": 1000 + i}},
        }
        barrier.wait()
        return i, _request("PUT", url, body)

    with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
        results = list(pool.map(put, range(CLIENTS)))

    winners = [(i, body) for i, (status, body) in results if status == 200]
    losers = [body for _i, (status, body) in results if status != 200]
    assert len(winners) == 1, results
    assert len(losers) == CLIENTS - 1
    for body in losers:
        assert body["errors"][0]["status"] == 409
        assert body["errors"][0]["code"] == "placement.concurrent_update"

    winner, _ = winners[0]
    status, stored = _request("GET", url)
    assert stored["resource_provider_generation"] == 1
    assert {rc: inv["total"] for rc, inv in stored["inventories"].items()} == {
        "VCPU": 10 + winner,
        "MEMORY_MB": 1000 + winner,
    }
