"""A super conductor's concurrent requests share select_destinations_many
calls (scheduler RPC 1.2), and a scheduler that does not know the method
still gets every request, one call each; a submitter's requests travel
several to a message (build_instances_many, conductor RPC 1.1), and a super
conductor that does not know that message still gets every request.

In-process services over oslo.messaging's in-memory transport, placement
over REST (the same code path as on RabbitMQ: tests/functional/bus/
test_bus_rabbit.py).
"""

import json
import threading

import pytest

from conductor import conf as cconf
from conductor import service as cond_service
from conductor import submit
from joule import rpc
from joule import service as service_mod
from joule.rpc import oslo_messaging
from scheduler import conf as sconf
from scheduler import service as sched_service
from tests import bus


class _Counting:
    """Wraps a scheduler endpoint: counts the calls and the requests in each."""

    def __init__(self, endpoint):
        self.endpoint = endpoint
        self.lock = threading.Lock()
        self.single = 0
        self.many = []  # requests per select_destinations_many call

    def select_destinations(self, ctxt, request_spec):
        with self.lock:
            self.single += 1
        return self.endpoint.select_destinations(ctxt, request_spec)

    def select_destinations_many(self, ctxt, request_specs):
        with self.lock:
            self.many.append(len(request_specs))
        return self.endpoint.select_destinations_many(ctxt, request_specs)

    def build_outcomes(self, ctxt, failed_builds):
        return self.endpoint.build_outcomes(ctxt, failed_builds)


class _Counting11(_Counting):
    """A scheduler of RPC 1.1: no select_destinations_many."""

    target = oslo_messaging.Target(version="1.1")
    select_destinations_many = None


_Counting.target = oslo_messaging.Target(version="1.2")


class _OldSuperEndpoint:
    """A super conductor of RPC 1.0: build_instances only."""

    target = oslo_messaging.Target(version="1.0")

    def __init__(self, conductor):
        self.endpoint = cond_service.SuperConductorEndpoint(conductor)

    def build_instances(self, ctxt, request_spec, reply_topic=None):
        return self.endpoint.build_instances(ctxt, request_spec, reply_topic)


def _old_super(conf, transport, driver, name):
    """A super conductor service that serves _OldSuperEndpoint (bus.services)."""
    sup = service_mod.Service(conf, transport, name)
    sup.conductor = cond_service.Conductor(
        conf, sconf.placement_client_of(conf), transport, driver, "s"
    )
    sup.add_server(rpc.topic(conf, rpc.CONDUCTOR_TOPIC), [_OldSuperEndpoint(sup.conductor)])
    return sup


def _per_message(conf, n):
    """build-submit's --requests-per-message, on a conf made without its CLI."""
    opt = next(o for o in submit.cli_opts if o.dest == "requests_per_message")
    conf.register_opt(opt)
    conf.set_override("requests_per_message", n)


def _run(live_server, db, counting_cls, requests, per_message=1, old_super=False):
    bus.load_cluster(db, nodes=6, cores=64, cells=2)
    # Room for the requests to gather while a call is in flight.
    conf = bus.make_conf(live_server.url, {("conductor", "batch_window_ms"): 20.0})
    _per_message(conf, per_message)
    endpoint = sched_service.SchedulerEndpoint(conf, lambda: sconf.placement_client_of(conf))
    counting = counting_cls(endpoint)
    super_service = _old_super if old_super else None
    messages = []
    with bus.running(conf, scheduler=counting, super_service=super_service) as cloud:
        svcs = cloud.services
        real = svcs[1].conductor.build_instances_many
        svcs[1].conductor.build_instances_many = lambda specs, topic: (
            messages.append(len(specs)),
            real(specs, topic),
        )
        lines = []
        sub = submit.Submitter(conf, cloud.transport, sconf.placement_client_of(conf), lines.append)
        counts = sub.run(
            sub.parse(bus.spec_lines(requests)), timeout=120, resend_after=1.0, poll_interval=0.5
        )
    done = [line for line in lines if line.get("status") in ("placed", "failed")]
    bus.check_invariants(db, done, dict(cloud.driver._running))
    counting.messages = messages
    return counts, counting, svcs


def test_concurrent_requests_share_one_scheduler_call(live_server, db):
    counts, counting, _ = _run(live_server, db, _Counting, 40)
    assert counts["unanswered"] == 0 and counts["placed"] == 40, counts
    assert counting.single == 0
    assert sum(counting.many) == 40
    # Requests the super conductor held together went in one message.
    assert max(counting.many) > 1 and len(counting.many) < 40, counting.many


def test_a_scheduler_without_the_bulk_call_gets_one_call_per_request(live_server, db):
    counts, counting, svcs = _run(live_server, db, _Counting11, 12)
    assert counts["unanswered"] == 0 and counts["placed"] == 12, counts
    assert counting.many == [] and counting.single == 12
    assert svcs[1].conductor.scheduler._many_unsupported


@pytest.fixture
def endpoint(live_server, db):
    bus.load_cluster(db, nodes=4, cores=64, cells=2)
    conf = cconf.make_conf(overrides={("placement", "endpoint_override"): live_server.url})
    return sched_service.SchedulerEndpoint(conf, lambda: sconf.placement_client_of(conf))


def test_bulk_answers_one_per_request_in_order(endpoint, db):
    good = [json.loads(line) for line in bus.spec_lines(3, prefix="bulk")]
    answers = endpoint.select_destinations_many({}, [good[0], {"version": "1.0"}, good[1], good[2]])
    assert [a["status"] for a in answers] == ["placed", "invalid", "placed", "placed"]
    placed = [a["selections"] for a in answers if a["status"] == "placed"]
    assert [s["request_id"] for s in placed] == [g["request_id"] for g in good]
    assert "request_specs must be a list" in endpoint.select_destinations_many({}, "x")["error"]


def test_a_submitters_requests_travel_several_to_a_message(live_server, db):
    counts, counting, _ = _run(live_server, db, _Counting, 30, per_message=8)
    assert counts["unanswered"] == 0 and counts["placed"] == 30, counts
    assert counting.messages == [8, 8, 8, 6]  # one message per 8 requests
    assert sum(counting.many) == 30 and counting.single == 0


def test_a_super_conductor_without_the_bulk_message_gets_the_resends(live_server, db):
    """Its RPC server refuses the 1.1 message; the submitter, seeing no
    record of those requests, sends each again alone (1.0)."""
    counts, counting, _ = _run(live_server, db, _Counting, 10, per_message=4, old_super=True)
    assert counts["unanswered"] == 0 and counts["placed"] == 10, counts
    assert counting.messages == []
    assert sum(counting.many) + counting.single == 10
