"""End to end over a live placement server (SQLite and PostgreSQL): the scheduler
and conductor talk REST only, as in production."""

import pytest
import requests

from conductor import driver as driver_mod
from joule import placement_client
from joule.request_spec import InvalidRequestSpec
from scheduler import claim as claim_mod
from scheduler import conf as sconf_mod
from scheduler import worker
from tests import bus
from tests.scheduling import add_hosts
from tests.scheduling import make_scheduler
from tests.scheduling import spec


def holders(client, rp_uuid):
    return set(client.get(f"/resource_providers/{rp_uuid}/allocations").get_json()["allocations"])


def test_performance_never_on_eco_or_draining(db, client, live_server):
    hosts = add_hosts(
        db,
        client,
        [
            ("p1", "c1", "performance", 4, 4096),
            ("p2", "c1", "performance", 4, 4096),
            ("e1", "c1", "eco", 16, 16384),
            ("e2", "c1", "eco", 16, 16384),
            ("d1", "c1", "draining", 16, 16384),
        ],
    )
    by_uuid = {u: n for n, u in hosts.items()}
    sched, _pc = make_scheduler(live_server, page_size=2)
    perf = sched.select_destinations(spec(workload_class="performance", num_instances=6))
    assert {by_uuid[hl[0].host_uuid] for hl in perf} <= {"p1", "p2"}
    for hl in perf:
        assert all(by_uuid[s.host_uuid] in ("p1", "p2") for s in hl)
    std = sched.select_destinations(spec(num_instances=4))
    assert {by_uuid[hl[0].host_uuid] for hl in std} <= {"e1", "e2", "d1"}
    # The ledger agrees: no performance consumer on eco/draining hosts.
    perf_consumers = {hl[0].instance_uuid for hl in perf}
    for name in ("e1", "e2", "d1"):
        assert not holders(client, hosts[name]) & perf_consumers
    # Performance work beyond the performance hosts' capacity: a clear refusal.
    with pytest.raises(worker.NoValidHost) as err:
        sched.select_destinations(
            spec(workload_class="performance", num_instances=3, request_id="req-too-many")
        )
    # Placement left the eco and draining hosts out (by their profile trait)
    # for the JoulieFilter: never downloaded, and the refusal says why.
    assert "JoulieFilter had placement leave out hosts with CUSTOM_POWER_PROFILE_ECO" in str(
        err.value
    )
    report = client.get("/scheduling_reports/req-too-many").get_json()["report"]
    assert report["removed_per_filter"]["JoulieFilter"] == 0
    assert report["placement_excluded"]
    assert report["result"] == "no_valid_host"
    assert report["pages_fetched"] == 1  # only p1 and p2 fit, 2 per page
    assert report["hosts_seen"] == 2


def test_alternates_same_cell_with_their_own_allocation_requests(db, client, live_server):
    hosts = add_hosts(
        db,
        client,
        [
            ("a1", "cellA", "performance", 8, 32768),
            ("a2", "cellA", "performance", 8, 16384),
            ("a3", "cellA", "performance", 8, 16384),
            ("b1", "cellB", "performance", 8, 24576),
            ("b2", "cellB", "performance", 8, 8192),
        ],
    )
    cells = {u: n[0] for n, u in hosts.items()}
    sched, _pc = make_scheduler(live_server, max_attempts=3)
    out = sched.select_destinations(spec(num_instances=2, request_id="req-alts"))
    assert len(out) == 2
    for selected, *alts in out:
        assert selected.claimed and alts
        assert all(not a.claimed for a in alts)
        assert all(cells[a.host_uuid] == cells[selected.host_uuid] for a in alts)
        assert len(alts) <= 2
        for a in alts:
            assert list(a.allocation_request["allocations"]) == [a.host_uuid]
            assert a.instance_uuid == selected.instance_uuid
        # Only the selected host holds the instance.
        allocs = client.get(f"/allocations/{selected.instance_uuid}").get_json()["allocations"]
        assert list(allocs) == [selected.host_uuid]
    report = client.get("/scheduling_reports/req-alts").get_json()
    assert report["report"]["result"] == "placed"
    assert len(report["report"]["claims"]) == 2


def test_failed_build_moves_claim_and_all_failed_leaves_nothing(db, client, live_server):
    hosts = add_hosts(
        db,
        client,
        [
            ("bad", "c1", "performance", 8, 65536),
            ("good", "c1", "performance", 8, 16384),
            ("other", "c2", "performance", 8, 8192),
        ],
    )
    driver = driver_mod.SimulatedDriver(failing_hosts={"bad"})
    # Without the build-failure weigher "bad" stays first (its own test is
    # test_scheduler_build_failures.py), so the second request fails on 2 hosts.
    with bus.in_process(
        live_server.url,
        cells=("c1", "c2"),
        driver=driver,
        overrides={
            ("scheduler", "max_attempts"): 3,
            ("filter_scheduler", "build_failure_weight_multiplier"): 0.0,
        },
    ) as cloud:
        counts, [res] = cloud.submit([spec(workload_class="performance")])
        assert res["status"] == "placed" and res["host_uuid"] == hosts["good"]
        assert res["rescheduled"] == 1 and counts["rescheduled"] == 1
        assert holders(client, hosts["bad"]) == set()
        allocs = client.get(f"/allocations/{res['instance_uuid']}").get_json()
        assert list(allocs["allocations"]) == [hosts["good"]]
        br = client.get(f"/build_requests/{res['instance_uuid']}").get_json()
        assert br["status"] == "placed" and br["host_uuid"] == hosts["good"]
        assert br["owner"] is None and br["lease_expires_at"] is None

        driver.failure_rate = 1.0
        _counts, [res] = cloud.submit([spec(workload_class="performance")])
    assert res["status"] == "failed" and "failed on all 2 host(s)" in res["reason"]
    assert client.get(f"/allocations/{res['instance_uuid']}").get_json()["allocations"] == {}
    br = client.get(f"/build_requests/{res['instance_uuid']}").get_json()
    assert br["status"] == "failed" and "injected failure" in br["reason"]
    pending = client.get("/build_requests?status=pending").get_json()["build_requests"]
    assert pending == []


class DropAfterWrite(requests.Session):
    """Forwards every request, but loses the answer of the Nth claim: the
    placement outage hits after the write landed, the worst case."""

    def __init__(self, fail_claim):
        super().__init__()
        self.claims = 0
        self.fail_claim = fail_claim

    def request(self, method, url, *args, **kwargs):
        resp = super().request(method, url, *args, **kwargs)
        if method == "PUT" and "/allocations/" in url:
            self.claims += 1
            if self.claims == self.fail_claim:
                raise requests.ConnectionError("Connection aborted")
        return resp


def test_outage_mid_claim_leaves_no_half_made_claim(db, client, live_server):
    hosts = add_hosts(db, client, [(f"h{i}", "c1", "performance", 4, 8192) for i in range(3)])
    sched, _pc = make_scheduler(live_server, session=DropAfterWrite(fail_claim=2))
    s = spec(num_instances=3)
    with pytest.raises(worker.PlacementUnavailable, match="unreachable"):
        sched.select_destinations(s)
    for uuid in hosts.values():
        assert holders(client, uuid) == set()


def test_bad_spec_and_unreachable_placement_are_clear(db, client, live_server):
    sched, _pc = make_scheduler(live_server)
    with pytest.raises(InvalidRequestSpec, match="resources.VCPU: must be a positive integer"):
        sched.select_destinations(spec(resources={"VCPU": -1}))
    with pytest.raises(worker.SchedulerError, match="placement rejected the request"):
        sched.select_destinations(spec(resources={"CUSTOM_NOPE": 1}))
    conf = sconf_mod.make_conf(
        overrides={
            ("placement", "endpoint_override"): "http://127.0.0.1:9",
            ("placement", "connect_retries"): 0,
        }
    )
    down = worker.Scheduler(conf, placement_client.PlacementClient.from_conf(conf))
    with pytest.raises(
        worker.PlacementUnavailable,
        match=r"placement at http://127.0.0.1:9 is unreachable "
        r"\(GET /allocation_candidates\): connection refused",
    ):
        down.select_destinations(spec())


def test_unclaim_is_idempotent_against_placement(db, client, live_server):
    hosts = add_hosts(db, client, [("u1", "c1", "performance", 4, 4096)])
    sched, pc = make_scheduler(live_server)
    claim_mod.unclaim(pc, "6a6f8f3c-1111-4222-8333-944444444444")  # never claimed
    [[sel]] = sched.select_destinations(spec(request_id="req-u"))
    claim_mod.unclaim(pc, sel.instance_uuid)
    claim_mod.unclaim(pc, sel.instance_uuid)
    assert holders(client, hosts["u1"]) == set()


def test_resubmitted_spec_without_instance_uuids_is_not_placed_twice(db, client, live_server):
    add_hosts(db, client, [("r1", "c1", None, 8, 8192), ("r2", "c1", None, 8, 8192)])
    sched, _pc = make_scheduler(live_server)
    line = spec(request_id="req-resubmitted", num_instances=2)
    placed = sched.select_destinations(dict(line))
    assert len(placed) == 2
    # The stream is sent again after a crash: same instances, refused, not doubled.
    with pytest.raises(worker.ConsumerInUse):
        sched.select_destinations(dict(line))
    total = sum(
        u["usages"].get("VCPU", 0)
        for u in (
            client.get(f"/resource_providers/{rp['uuid']}/usages").get_json()
            for rp in client.get("/resource_providers").get_json()["resource_providers"]
        )
    )
    assert total == 2


def test_failure_reason_names_every_host_tried(db, client, live_server):
    """Issue 14 item 7: a build that fails everywhere says how many hosts were
    tried and names each of them (it once said "all 1 host(s)" after 3)."""
    hosts = add_hosts(
        db,
        client,
        [
            ("alpha", "c1", "performance", 8, 16384),
            ("bravo", "c1", "performance", 8, 16384),
            ("charlie", "c1", "performance", 8, 16384),
        ],
    )
    driver = driver_mod.SimulatedDriver(failing_hosts={"alpha", "bravo", "charlie"})
    with bus.in_process(
        live_server.url,
        cells=("c1",),
        driver=driver,
        overrides={("scheduler", "max_attempts"): 3},
    ) as cloud:
        _counts, [res] = cloud.submit([spec(workload_class="performance")])
    assert res["status"] == "failed"
    assert "failed on all 3 host(s) tried (3 build(s) failed" in res["reason"]
    for name in hosts:
        assert f"build on {name} failed" in res["reason"]
    assert client.get(f"/allocations/{res['instance_uuid']}").get_json()["allocations"] == {}


@pytest.mark.parametrize("random_start", [True, False])
def test_only_fitting_hosts_with_the_highest_ids_are_found_in_one_request(
    db, client, live_server, random_start
):
    """Issue 12: every request sees every host that fits. Twelve hosts
    first, then the only two that fit, with the highest ids (only they are
    in rack "b", which the NodeSelectorFilter asks for: placement returns
    every host, the scheduler's filter removes all but those); pages of
    three and a walk capped at three hosts: each select_destinations call
    (one request) reads on, wrapping around, until it has them."""
    add_hosts(db, client, [(f"s{i:02d}", "cell1", "eco", 8, 16384) for i in range(12)])
    big = add_hosts(db, client, [(f"b{i}", "cell1", "eco", 8, 16384) for i in range(2)])
    sched, _ = make_scheduler(
        live_server, page_size=3, max_placement_results=3, random_walk_start=random_start
    )
    seen = set()
    for n in range(6):
        picked = sched.select_destinations(spec(request_id=f"big-{n}", node_selector={"rack": "b"}))
        chosen = picked[0][0]
        assert chosen.host_uuid in big.values(), (n, chosen.host_uuid)
        seen.add(chosen.host_uuid)
        report = client.get(f"/scheduling_reports/big-{n}").get_json()["report"]
        assert report["result"] == "placed"
        assert report["hosts_seen"] == 14  # every host read, in one request
        claim_mod.unclaim(sched.client, chosen.instance_uuid)
    assert seen <= set(big.values())
