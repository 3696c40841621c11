"""A worker's kept walk against a live placement (SQLite and PostgreSQL).

The kept view goes stale in two ways a user would notice, and placement
catches both: a node turned eco after the walk (performance work must not
land on it) and capacity another worker took (never over-committed). In
both the request is still placed, on a fresh walk.
"""

import time
import uuid

import pytest

from joule import placement_client
from joule import vocabulary
from scheduler import conf as conf_mod
from scheduler import service
from tests import builders
from tests import specs

HEADERS = {"x-auth-token": "admin", "openstack-api-version": "placement latest"}


def _endpoint(url, seconds=600):
    conf = conf_mod.make_conf(
        overrides={
            ("scheduler", "batch_size"): 16,
            ("scheduler", "host_cache_seconds"): seconds,
            ("placement", "endpoint_override"): url,
            ("placement", "auth_type"): "noauth",
        }
    )
    return service.SchedulerEndpoint(
        conf, lambda: placement_client.PlacementClient.for_endpoint(url)
    )


def _node(client, db, name, vcpu, ram):
    rp = builders.create_provider(db, name=name)
    builders.set_inventory(db, rp, "VCPU", vcpu)
    builders.set_inventory(db, rp, "MEMORY_MB", ram)
    builders.set_twin(db, rp, vocabulary.PERFORMANCE)
    return rp


def _request(n, workload_class, vcpu=2):
    return specs.build_request_spec(
        str(uuid.uuid4()), f"req-{n}", workload_class, resources={"VCPU": vcpu, "MEMORY_MB": 1024}
    )


_host_of = specs.selected_host


def test_a_node_turned_eco_after_the_walk_gets_no_performance_work(client, db, live_server):
    first_choice = _node(client, db, "big", 64, 262144)
    turned_eco = _node(client, db, "big-too", 63, 262144)
    _node(client, db, "small", 8, 32768)
    endpoint = _endpoint(live_server.url)
    first = endpoint.select_destinations({}, _request(1, vocabulary.PERFORMANCE))
    assert _host_of(first) == first_choice  # the weighers prefer the largest
    # The power controller moves the (idle) second node to eco behind the
    # kept walk, in which it now ranks first (more left than the first).
    builders.set_twin(db, turned_eco, vocabulary.ECO, vocabulary.ECO)
    second = endpoint.select_destinations({}, _request(2, vocabulary.PERFORMANCE))
    # Placement refused the claim the kept view made on the eco node; the
    # request was placed on a fresh walk, which leaves eco nodes out.
    assert _host_of(second) == first_choice
    assert endpoint.host_cache.stats["hits"] >= 1
    assert endpoint.host_cache.stats["dropped"] >= 1
    usage = client.get(f"/resource_providers/{turned_eco}/usages").get_json()["usages"]
    assert usage.get("VCPU", 0) == 0


def test_capacity_another_worker_took_is_never_over_committed(client, db, live_server):
    hosts = [_node(client, db, f"h{i}", 4, 65536) for i in range(2)]
    mine = _endpoint(live_server.url)
    other = _endpoint(live_server.url)
    # My worker walks and keeps the view (2 + 2 VCPU free on two hosts after).
    _host_of(mine.select_destinations({}, _request(1, vocabulary.STANDARD)))
    # The other worker fills every host meanwhile.
    placed = [
        _host_of(other.select_destinations({}, _request(10 + n, vocabulary.STANDARD)))
        for n in range(3)
    ]
    assert sorted(set(placed)) == sorted(hosts)
    # My view still shows room; placement refuses; alone, nothing fits.
    answer = mine.select_destinations({}, _request(2, vocabulary.STANDARD))
    assert answer["status"] == "no_valid_host", answer
    usage = {
        rp: client.get(f"/resource_providers/{rp}/usages").get_json()["usages"]["VCPU"]
        for rp in hosts
    }
    assert usage == {rp: 4 for rp in hosts}


def _feeding_pair(url):
    """Two workers whose claims reach each other as the bus's fanout would
    deliver them (each gets every message, its own included)."""
    endpoints = []

    def publish(sender, claims):
        for endpoint in endpoints:
            endpoint.feed_endpoint.claims_made({}, sender, claims)

    conf = conf_mod.make_conf(
        overrides={
            ("scheduler", "batch_size"): 16,
            ("scheduler", "host_cache_seconds"): 600,
            ("placement", "endpoint_override"): url,
            ("placement", "auth_type"): "noauth",
        }
    )
    for _ in range(2):
        endpoints.append(
            service.SchedulerEndpoint(
                conf,
                lambda: placement_client.PlacementClient.for_endpoint(url),
                publish_claims=publish,
            )
        )
    return endpoints


def _wait_for(predicate, seconds=10):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "the other worker's claims never arrived"
        time.sleep(0.01)


@pytest.mark.parametrize("feed", [True, False])
def test_another_workers_claims_reach_my_kept_walk(client, db, live_server, feed):
    """With the claim feed my kept walk shows the host the other worker
    filled, so my next request goes elsewhere at once: no race lost, no new
    walk. Without it (the control), the same request loses a race on that
    host first."""
    spare = _node(client, db, "spare", 8, 65536)
    biggest = _node(client, db, "biggest", 16, 65536)
    mine, other = _feeding_pair(live_server.url)
    if not feed:
        for endpoint in (mine, other):
            endpoint.stop()
            endpoint.claim_feed = None
    try:
        # Mine walks and keeps the view: 2 VCPU on the biggest host.
        assert _host_of(mine.select_destinations({}, _request(1, vocabulary.STANDARD))) == biggest
        # The other worker takes all that is left of the biggest host (only
        # it has 14 free).
        taken = other.select_destinations({}, _request(2, vocabulary.STANDARD, vcpu=14))
        assert _host_of(taken) == biggest
        if feed:
            _wait_for(lambda: mine.host_cache.stats["foreign_claims"] >= 1)
        lost_before = mine.races_lost()
        walks_before = mine.host_cache.stats["misses"]
        placed = mine.select_destinations({}, _request(3, vocabulary.STANDARD))
        assert _host_of(placed) == spare
        if feed:
            assert mine.races_lost() == lost_before
            assert mine.host_cache.stats["misses"] == walks_before  # placed on the kept walk
            # Each took the other's claims, never its own a second time.
            _wait_for(lambda: other.host_cache.stats["foreign_claims"] >= 2)
            assert other.host_cache.stats["foreign_claims"] == 2
            assert mine.host_cache.stats["foreign_claims"] == 1
        else:
            assert mine.races_lost() == lost_before + 1
    finally:
        for endpoint in (mine, other):
            endpoint.stop()
    usage = client.get(f"/resource_providers/{biggest}/usages").get_json()["usages"]
    assert usage["VCPU"] == 16


def test_the_kept_walks_of_feeding_workers_match_placement(client, db, live_server):
    """Two workers, two kinds of request, hosts of two sizes: after they
    placed in turn, every host of every walk either keeps shows what
    placement holds (the feed neither loses nor repeats a claim)."""
    for n in range(6):
        _node(client, db, f"big-{n}", 64, 262144)
        _node(client, db, f"small-{n}", 16, 65536)
    mine, other = _feeding_pair(live_server.url)
    try:
        for n in range(40):
            endpoint = (mine, other)[n % 2]
            kind = (vocabulary.STANDARD, vocabulary.PERFORMANCE)[(n // 2) % 2]
            _host_of(endpoint.select_destinations({}, _request(n, kind, vcpu=1 + n % 3)))
        sent = mine.claim_feed.stats, other.claim_feed.stats
        _wait_for(lambda: all(s["sent"] == 20 for s in sent))
        _wait_for(lambda: mine.host_cache.stats["foreign_claims"] == 20)
        _wait_for(lambda: other.host_cache.stats["foreign_claims"] == 20)
        for endpoint in (mine, other):
            entries = list(endpoint.host_cache._entries.values())
            assert entries
            for entry in entries:
                for h in entry.ranker.hosts:
                    usage = client.get(f"/resource_providers/{h.uuid}/usages").get_json()
                    assert h.providers[h.uuid]["VCPU"][1] == usage["usages"].get("VCPU", 0), h.name
    finally:
        for endpoint in (mine, other):
            endpoint.stop()
