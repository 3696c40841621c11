"""What a worker tells the others it claimed (scheduler.claim_feed)."""

import threading
import time
import types

import pytest

from scheduler import claim_feed
from scheduler import conf as conf_mod
from scheduler import service


def _selection(host, rp, **resources):
    return types.SimpleNamespace(
        host_uuid=host,
        allocation_request={"allocations": {rp: {"resources": resources}}},
    )


def test_the_claims_of_selections_are_the_selected_hosts_only():
    selections = [
        [_selection("h1", "h1", VCPU=2, MEMORY_MB=512), _selection("alt", "alt", VCPU=2)],
        [_selection("h2", "gpu-rp", VGPU=1)],
    ]
    assert claim_feed.claims_of(selections) == [
        ["h1", {"h1": {"VCPU": 2, "MEMORY_MB": 512}}],
        ["h2", {"gpu-rp": {"VGPU": 1}}],
    ]


@pytest.mark.parametrize(
    "claims",
    [
        {"h1": {}},
        [["h1"]],
        [[1, {}]],
        [["h1", []]],
        [["h1", {"rp": 3}]],
        [["h1", {"rp": {"VCPU": "2"}}]],
        [["h1", {"rp": {"VCPU": -1}}]],
        [["h1", {"rp": {"VCPU": True}}]],
        [["h1", {"rp": {"VCPU": 1.5}}]],
        [["h1", {}]] * (claim_feed.MAX_CLAIMS_PER_MESSAGE + 1),
    ],
)
def test_a_malformed_message_is_refused_and_changes_no_view(claims):
    assert claim_feed.problem(claims)
    conf = conf_mod.make_conf(overrides={("scheduler", "batch_size"): 16})
    endpoint = service.SchedulerEndpoint(conf, lambda: None, publish_claims=lambda *a: None)
    applied = []
    endpoint.host_cache.apply_claims = lambda claims, sender=None: applied.append(claims)
    endpoint.feed_endpoint.claims_made({}, "another-worker", claims)
    assert applied == []
    endpoint.stop()


def test_a_good_message_is_applied_and_our_own_is_not():
    conf = conf_mod.make_conf(overrides={("scheduler", "batch_size"): 16})
    endpoint = service.SchedulerEndpoint(conf, lambda: None, publish_claims=lambda *a: None)
    applied = []
    endpoint.host_cache.apply_claims = lambda claims, sender=None: applied.append((claims, sender))
    claims = [["h1", {"h1": {"VCPU": 2}}]]
    endpoint.feed_endpoint.claims_made({}, endpoint.claim_feed.sender, claims)
    assert applied == []
    endpoint.feed_endpoint.claims_made({}, "another-worker", claims)
    assert applied == [(claims, "another-worker")]
    endpoint.stop()


def test_a_worker_that_keeps_no_walks_neither_sends_nor_takes_claims():
    conf = conf_mod.make_conf(
        overrides={("scheduler", "batch_size"): 16, ("scheduler", "host_cache_seconds"): 0}
    )
    endpoint = service.SchedulerEndpoint(conf, lambda: None, publish_claims=lambda *a: None)
    assert endpoint.claim_feed is None and endpoint.feed_endpoint is None


def test_claims_made_together_travel_in_one_message_and_a_failed_send_is_counted():
    sent = []
    gate = threading.Event()

    def publish(sender, claims):
        if not claims:
            return  # the worker saying it is there (at start)
        gate.wait(5)
        sent.append((sender, claims))
        if len(sent) == 2:
            raise ConnectionError("the bus is down")

    feed = claim_feed.ClaimFeed(publish, sender="me")
    try:
        feed.publish(claim_feed.claims_of([[_selection("h1", "h1", VCPU=1)]]))
        feed.publish(
            claim_feed.claims_of(
                [[_selection("h2", "h2", VCPU=1)], [_selection("h3", "h3", VCPU=1)]]
            )
        )
        gate.set()
        _wait(lambda: feed.stats["messages"] == 1)
        assert sent == [
            (
                "me",
                [
                    ["h1", {"h1": {"VCPU": 1}}],
                    ["h2", {"h2": {"VCPU": 1}}],
                    ["h3", {"h3": {"VCPU": 1}}],
                ],
            )
        ]
        feed.publish(claim_feed.claims_of([[_selection("h4", "h4", VCPU=1)]]))
        _wait(lambda: feed.stats["failed"] == 1)
        # The thread survives a failed send.
        feed.publish(claim_feed.claims_of([[_selection("h5", "h5", VCPU=1)]]))
        _wait(lambda: feed.stats["messages"] == 2)
        assert feed.stats["sent"] == 4
    finally:
        feed.stop()


def test_a_worker_says_it_is_there_at_start_and_while_it_claims_nothing():
    sent = []
    feed = claim_feed.ClaimFeed(lambda *m: sent.append(m), sender="me", presence_seconds=0.05)
    try:
        _wait(lambda: len(sent) >= 3)
        assert all(m == ("me", []) for m in sent)
        assert feed.stats["presence"] >= 3 and feed.stats["messages"] == 0
    finally:
        feed.stop()


def test_a_worker_heard_for_the_first_time_is_answered_at_once_and_routable():
    conf = conf_mod.make_conf(overrides={("scheduler", "batch_size"): 16})
    sent = []
    endpoint = service.SchedulerEndpoint(
        conf, lambda: None, publish_claims=lambda *m: sent.append(m), name="w1"
    )
    try:
        _wait(lambda: ("w1", []) in sent)  # at start
        assert endpoint.feed_endpoint.scheduler_workers({}) == ["w1"]
        del sent[:]
        endpoint.feed_endpoint.claims_made({}, "w0", [])
        _wait(lambda: ("w1", []) in sent)  # w0 learns of us without waiting
        assert endpoint.feed_endpoint.scheduler_workers({}) == ["w0", "w1"]
        del sent[:]
        endpoint.feed_endpoint.claims_made({}, "w0", [])  # known: no answer
        time.sleep(0.1)
        assert sent == []
    finally:
        endpoint.stop()


def test_a_worker_not_heard_for_a_while_is_not_routed_to():
    conf = conf_mod.make_conf(overrides={("scheduler", "batch_size"): 16})
    endpoint = service.SchedulerEndpoint(
        conf, lambda: None, publish_claims=lambda *m: None, name="w1"
    )
    try:
        clock = [100.0]
        endpoint.host_cache.clock = lambda: clock[0]
        endpoint.feed_endpoint.claims_made({}, "w2", [])
        assert endpoint.feed_endpoint.scheduler_workers({}) == ["w1", "w2"]
        clock[0] += claim_feed.ROUTE_PEER_SECONDS + 1
        assert endpoint.feed_endpoint.scheduler_workers({}) == ["w1"]
    finally:
        endpoint.stop()
    # A worker that keeps no walks names none: nothing to gain from routing.
    conf = conf_mod.make_conf(
        overrides={("scheduler", "batch_size"): 16, ("scheduler", "host_cache_seconds"): 0}
    )
    quiet = service.SchedulerEndpoint(conf, lambda: None, name="w3")
    assert quiet.feed_endpoint is None and quiet.scheduler_workers() == []


def _wait(predicate, seconds=5):
    import time

    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.005)
