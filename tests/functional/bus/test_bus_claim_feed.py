"""Scheduler workers tell each other their claims over the real RabbitMQ.

Two scheduler-worker services (scheduler.cmd.build_service, as the console
script builds them) run in this process on a RabbitMQ virtual host of the
test's own, against a live placement (SQLite and PostgreSQL). What one
worker claims reaches the other's kept walk through the scheduler topic's
fanout (scheduler.claim_feed), so the other's next request goes to a host
that still has room without losing a race on the one that filled up; a
worker never counts its own claims twice.
"""

import time
import uuid

from joule import rpc
from joule import vocabulary
from scheduler import cmd
from scheduler import conf as conf_mod
from tests import builders
from tests import specs


def _node(db, name, vcpu):
    rp = builders.create_provider(db, name=name)
    builders.set_inventory(db, rp, "VCPU", vcpu)
    builders.set_inventory(db, rp, "MEMORY_MB", 65536)
    builders.set_twin(db, rp, vocabulary.PERFORMANCE)
    return rp


def _request(n, vcpu):
    return specs.build_request_spec(
        str(uuid.uuid4()),
        f"req-{n}",
        vocabulary.STANDARD,
        resources={"VCPU": vcpu, "MEMORY_MB": 1024},
    )


_host_of = specs.selected_host


def _wait_for(predicate, seconds=20):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "the other worker's claims never arrived"
        time.sleep(0.02)


def _conf(vhost, live_server, more):
    """The workers' configuration on the test's vhost and placement, plus
    ``more`` ({(group, option): value})."""
    overrides = {
        (None, "transport_url"): f"rabbit://guest:guest@127.0.0.1:5672/{vhost}",
        ("placement", "endpoint_override"): live_server.url,
        ("placement", "auth_type"): "noauth",
    }
    return conf_mod.make_conf(overrides={**overrides, **more})


def test_claims_reach_the_other_workers_kept_walk_over_rabbitmq(db, live_server, vhost):
    spare = _node(db, "spare", 8)
    biggest = _node(db, "biggest", 16)
    conf = _conf(vhost, live_server, {("scheduler", "host_cache_seconds"): 600})
    transport = rpc.transport_of(conf)
    services = [cmd.build_service(conf, transport, f"scheduler-{n}") for n in range(2)]
    mine, other = (svc.endpoint for svc in services)
    for svc in services:
        svc.start()
    try:
        time.sleep(1.0)  # both consume the fanout queue before the first claim
        assert _host_of(mine.select_destinations({}, _request(1, 2))) == biggest
        _wait_for(lambda: other.host_cache.stats["foreign_claims"] >= 1)
        assert _host_of(other.select_destinations({}, _request(2, 14))) == biggest
        _wait_for(lambda: mine.host_cache.stats["foreign_claims"] >= 1)
        lost_before = mine.races_lost()
        walks_before = mine.host_cache.stats["misses"]
        assert _host_of(mine.select_destinations({}, _request(3, 2))) == spare
        assert mine.races_lost() == lost_before
        assert mine.host_cache.stats["misses"] == walks_before
        _wait_for(lambda: other.host_cache.stats["foreign_claims"] >= 2)
        time.sleep(0.5)  # a message of its own would have arrived by now
        assert mine.host_cache.stats["foreign_claims"] == 1
        assert other.host_cache.stats["foreign_claims"] == 2
        assert mine.claim_feed.stats["failed"] == other.claim_feed.stats["failed"] == 0
    finally:
        for svc in services:
            svc.stop(timeout=10)
        transport.cleanup()


def _requests_of(endpoint):
    return sum(s.stats["requests"] for s in endpoint._all)


def test_a_super_conductor_sends_each_kind_to_one_worker_and_around_a_silent_one(
    db, live_server, vhost
):
    """Workers learn of each other on the feed and say so (claims topic RPC 1.1); a
    super conductor's router sends every request of a kind to one of them;
    a call to a worker that stopped is retried on the shared topic."""
    from conductor import scheduler_routing
    from conductor import super_conductor

    for n in range(4):
        _node(db, f"node-{n}", 64)
    conf = _conf(vhost, live_server, {("rpc", "call_timeout"): 3, ("rpc", "call_retries"): 2})
    transport = rpc.transport_of(conf)
    names = ["scheduler-a", "scheduler-b"]
    services = {name: cmd.build_service(conf, transport, name) for name in names}
    for svc in services.values():
        svc.start()
    api = rpc.SchedulerAPI(conf, transport)
    bus = type("Bus", (), {"scheduler": api})()
    try:
        _wait_for(lambda: api.scheduler_workers(2) == names)
        router = scheduler_routing.Router(lambda: api)

        def kind(n, project):
            spec = _request(n, 1)
            spec["project_id"] = project
            return spec

        # Projects are kinds: find one kind owned by each worker.
        projects = {}
        for p in range(64):
            projects.setdefault(router.owner(kind(0, f"project-{p}")), f"project-{p}")
        assert set(projects) == set(names)
        n = 0
        for owner, project in projects.items():
            before = {name: _requests_of(services[name].endpoint) for name in names}
            items = []
            for _ in range(5):
                n += 1
                items.append((kind(n, project), None))
            answers = super_conductor.select_many_routed(bus, router, items)
            assert [a["status"] for a in answers] == ["placed"] * 5
            after = {name: _requests_of(services[name].endpoint) for name in names}
            assert after[owner] - before[owner] == 5
            assert all(after[w] == before[w] for w in names if w != owner)
        # A worker that stopped: the call sent to it is answered by the other.
        gone, left = names
        services[gone].stop(timeout=10)
        before = _requests_of(services[left].endpoint)
        released = []
        answers = api.select_destinations_many(
            [kind(100, projects[gone])],
            releases=[lambda: released.append(1)],
            server=gone,
            on_silent=lambda: router.suspect(gone),
        )
        assert answers[0]["status"] == "placed"
        assert _requests_of(services[left].endpoint) == before + 1
        assert released == [1]
        assert gone not in router.members()
    finally:
        for svc in services.values():
            svc.stop(timeout=10)
        transport.cleanup()
