"""The services over oslo.messaging's in-memory transport, in one process.

The same code path as the processes on RabbitMQ (tests/functional/
test_bus_rabbit.py): scheduler service, super conductor, cell conductors and
the submitter, talking over the bus, placement over REST.
"""

import pytest

from conductor import cmd as conductor_cmd
from conductor import conf as cconf
from conductor import submit
from joule import rpc
from scheduler import cmd as scheduler_cmd
from scheduler import conf as sconf
from tests import bus


@pytest.fixture
def services(live_server, db):
    bus.load_cluster(db, nodes=6, cores=8, cells=2)
    conf = cconf.make_conf(
        overrides={
            ("placement", "endpoint_override"): live_server.url,
            (None, "transport_url"): rpc.IN_MEMORY_TRANSPORT_URL,
            ("conductor", "simulated_failure_rate"): 0.2,
            ("conductor", "simulated_seed"): 7,
            ("conductor", "sweep_interval"): 0.5,
            ("rpc", "call_timeout"): 20,
        }
    )
    transport = rpc.transport_of(conf)
    svcs = [
        scheduler_cmd.build_service(conf, transport, "scheduler-1"),
        conductor_cmd.build_service(conf, transport, None, "super-1"),
    ]
    driver = svcs[1].conductor.driver  # one simulated cloud for every conductor
    svcs += [
        conductor_cmd.build_service(conf, transport, cell, f"{cell}-1", driver=driver)
        for cell in ("cell1", "cell2")
    ]
    for svc in svcs:
        svc.start()
    yield conf, transport, driver
    for svc in svcs:
        svc.stop()
    transport.cleanup()


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
