"""BuildFailureWeigher over a live placement and the in-process bus (SQLite
and PostgreSQL): conductors report build outcomes, a failing host sinks, a
success clears it."""

from conductor import driver as driver_mod
from tests import bus
from tests.scheduling import add_hosts
from tests.scheduling import spec


def _failed_builds(client, host):
    body = client.get("/allocation_candidates?resources=VCPU:1&node_data=true").get_json()
    return body["nodes"][host]["failed_builds"]


def test_failing_host_sinks_until_a_build_succeeds_there(db, client, live_server):
    # "bad" has by far the most free RAM and VCPU: every weigher but the
    # build-failure one prefers it.
    hosts = add_hosts(
        db,
        client,
        [
            ("bad", "c1", "performance", 32, 131072),
            ("good", "c1", "performance", 8, 16384),
            ("fine", "c1", "performance", 8, 16384),
        ],
    )
    driver = driver_mod.SimulatedDriver(failing_hosts={"bad"})
    with bus.in_process(
        live_server.url, cells=("c1",), driver=driver, overrides={("scheduler", "max_attempts"): 3}
    ) as cloud:
        _counts, [res] = cloud.submit([spec(workload_class="performance")])
        assert res["status"] == "placed" and res["rescheduled"] == 1
        assert _failed_builds(client, hosts["bad"]) == 1
        assert _failed_builds(client, res["host_uuid"]) == 0
        # From now on "bad" is last: no build is even tried there.
        _counts, results = cloud.submit([spec(workload_class="performance") for _ in range(4)])
        assert all(r["status"] == "placed" and r["rescheduled"] == 0 for r in results)
        assert hosts["bad"] not in {r["host_uuid"] for r in results}
        assert _failed_builds(client, hosts["bad"]) == 1
        # Repaired: once a build succeeds there (it is the only host left for
        # a request that needs its size), its count is cleared and it leads again.
        driver.failing_hosts.clear()
        _counts, [big] = cloud.submit(
            [spec(workload_class="performance", resources={"VCPU": 16, "MEMORY_MB": 512})]
        )
        assert big["status"] == "placed" and big["host_uuid"] == hosts["bad"]
        assert _failed_builds(client, hosts["bad"]) == 0
        _counts, [res] = cloud.submit([spec(workload_class="performance")])
        assert res["host_uuid"] == hosts["bad"]
