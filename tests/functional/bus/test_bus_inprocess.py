"""The services over oslo.messaging's in-memory transport, in one process.

The same code path as the processes on RabbitMQ (tests/functional/bus/
test_bus_rabbit.py): scheduler service, super conductor, cell conductors and
the submitter, talking over the bus, placement over REST.
"""

import time

import pytest

from conductor import conf as cconf
from conductor import submit
from joule import rpc
from joule.rpc import oslo_messaging
from scheduler import conf as sconf
from tests import bus


@pytest.fixture
def services(live_server, db):
    bus.load_cluster(db, nodes=6, cores=8, cells=2)
    overrides = {
        ("conductor", "simulated_failure_rate"): 0.2,
        ("conductor", "simulated_seed"): 7,
    }
    # One simulated cloud for every conductor.
    with bus.in_process(live_server.url, overrides=overrides) as cloud:
        yield cloud.conf, cloud.transport, cloud.driver


def test_requests_flow_through_the_bus(services, db):
    conf, transport, driver = services
    lines = []
    sub = submit.Submitter(conf, transport, sconf.placement_client_of(conf), lines.append)
    specs = bus.spec_lines(12, instances_per_request=2)
    specs.append('{"version": "1.0", "project_id": "p"}')  # no resources: invalid
    counts = sub.run(sub.parse(specs), timeout=120)
    assert counts["unanswered"] == 0, counts
    assert counts["invalid"] == 1 and counts["instances"] == 24
    assert counts["placed"] + counts["failed"] == 24
    assert counts["rescheduled"] > 0  # 20% of builds fail: claims moved
    done = [line for line in lines if line.get("status") in ("placed", "failed")]
    running = {i: h for i, h in driver._running.items()}
    bus.check_invariants(db, done, running)


class _CellsOf11:
    """A cell conductor not upgraded yet: build_many of RPC 1.1."""

    target = oslo_messaging.Target(version="1.1")

    def __init__(self):
        self.got = []

    def build_many(self, ctxt, builds, reply_topic=None):
        self.got.append(([b["instance_uuid"] for b in builds], reply_topic))


class _SubmitterOf10:
    """A build-submit not upgraded yet: instance_done only (1.0)."""

    target = oslo_messaging.Target(version="1.0")

    def __init__(self):
        self.got = []

    def instance_done(self, ctxt, outcome):
        self.got.append(outcome["instance_uuid"])


def test_receivers_not_upgraded_take_every_message_of_their_version():
    """A build_many whose builds answer one submitter is 1.1, so a cell
    conductor of 1.1 takes it (one whose builds name their own reply topic
    is 1.2, refused there); a lone outcome is instance_done (1.0), so an old
    submitter takes it (several in one instances_done, 1.1, are refused
    there, and read from placement by the submitter's poll)."""
    conf = cconf.make_conf(overrides={(None, "transport_url"): rpc.IN_MEMORY_TRANSPORT_URL})
    transport = rpc.transport_of(conf)
    cells, submitter = _CellsOf11(), _SubmitterOf10()
    servers = [
        rpc.make_server(conf, transport, rpc.cell_topic(conf, "cell1"), [cells], "cell-old"),
        rpc.make_server(conf, transport, "build-submit.old", [submitter], "submit-old"),
    ]
    for server in servers:
        server.start()
    try:
        build = {"request_spec": {}, "selections": {}, "generation": 1}
        conductors, outcomes = rpc.ConductorAPI(conf, transport), rpc.OutcomeAPI(transport)
        conductors.build_many("cell1", [{**build, "instance_uuid": "a", "reply_topic": "t2"}], "t1")
        outcomes.instances_done(
            "build-submit.old", [{"instance_uuid": "b"}, {"instance_uuid": "c"}]
        )
        conductors.build_many("cell1", [{**build, "instance_uuid": "d"}], "t1")
        outcomes.instances_done("build-submit.old", [{"instance_uuid": "e"}])
        deadline = time.monotonic() + 10
        while not (cells.got and submitter.got) and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)  # what was refused has long been handled by now
        assert cells.got == [(["d"], "t1")]
        assert submitter.got == ["e"]
    finally:
        for server in servers:
            server.stop()
            server.wait()
        transport.cleanup()


def test_a_paced_submitter_offers_its_rate_and_times_each_outcome(services, db):
    """``--rate``: 12 one-instance requests at 8 instances per second are cast
    over about 1.4 s, not at once; each outcome says how long after its own
    request's cast it came."""
    conf, transport, driver = services
    lines = []
    sub = submit.Submitter(conf, transport, sconf.placement_client_of(conf), lines.append)
    requests = sub.parse(bus.spec_lines(12, instances_per_request=1))
    casts = []
    real_send_all = sub._send_all

    cast_at = {}

    def send_all(reqs, per_message):
        casts.append((time.monotonic(), len(reqs)))
        for r in reqs:
            cast_at.setdefault(r.spec.request_id, time.monotonic())
        real_send_all(reqs, per_message)

    sub._send_all = send_all
    counts = sub.run(requests, timeout=120, rate=8.0)
    ended = time.monotonic()
    assert counts["unanswered"] == 0 and counts["placed"] + counts["failed"] == 12, counts
    assert sum(n for _t, n in casts) == 12
    assert len(casts) >= 6  # paced, not one burst
    spread = casts[-1][0] - casts[0][0]
    assert 1.0 <= spread <= 3.0, casts  # the 12th is due 11/8 s after the first
    done = [line for line in lines if line.get("status") in ("placed", "failed")]
    assert all(0 <= line["seconds"] < 60 for line in done)
    # Each is timed from its own request's cast, not from the run's start.
    for line in done:
        assert line["seconds"] <= ended - cast_at[line["request_id"]] + 0.01, line
