"""Scheduler hints over a live placement (SQLite and PostgreSQL): same_host,
different_host, force_hosts / force_nodes, and how a refusal is explained."""

import uuid

import pytest

from scheduler import worker
from tests import specs
from tests.scheduling import add_hosts
from tests.scheduling import make_scheduler


def _spec(hints, **kw):
    return specs.spec_builder(version="1.2", scheduler_hints=hints)(**kw)


def _place(sched, **kw):
    return sched.select_destinations(_spec({}, **kw))[0][0].host_uuid


@pytest.fixture
def four(db, client):
    return add_hosts(db, client, [(f"h{i}", "c1", None, 8, 8192) for i in range(4)])


def test_same_host_and_different_host(client, live_server, four):
    sched, _pc = make_scheduler(live_server)
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    host_a = sched.select_destinations(_spec({}, instance_uuids=[a]))[0][0].host_uuid
    host_b = sched.select_destinations(_spec({"different_host": [a]}, instance_uuids=[b]))[0][
        0
    ].host_uuid
    assert host_b != host_a
    # Spreading weighers would pick an empty host; the hint keeps it with a.
    for _ in range(3):
        placed = sched.select_destinations(_spec({"same_host": [a]}, num_instances=2))
        assert {hl[0].host_uuid for hl in placed} == {host_a}
        # Alternates obey the hint too: there is no other host to offer.
        assert all(len(hl) == 1 for hl in placed)
    away = sched.select_destinations(_spec({"different_host": [a, b]}, num_instances=2))
    assert {hl[0].host_uuid for hl in away}.isdisjoint({host_a, host_b})
    # same_host naming only an instance that holds nothing: no host, explained.
    with pytest.raises(worker.NoValidHost) as err:
        sched.select_destinations(_spec({"same_host": [str(uuid.uuid4())]}))
    assert (
        "SameHostFilter removed 4 (host runs none of the instances named in the "
        "same_host hint)" in str(err.value)
    )
    with pytest.raises(worker.NoValidHost) as err:
        sched.select_destinations(_spec({"same_host": [a], "different_host": [a]}))
    assert "DifferentHostFilter removed 1" in str(err.value)


def test_force_hosts_and_nodes(client, live_server, four):
    sched, _pc = make_scheduler(live_server)
    for _ in range(3):
        assert _place(sched, scheduler_hints={"force_hosts": ["h2"]}) == four["h2"]
        assert _place(sched, scheduler_hints={"force_nodes": [four["h3"]]}) == four["h3"]
    both = sched.select_destinations(_spec({"force_hosts": ["h0", "h1"]}, num_instances=4))
    assert {hl[0].host_uuid for hl in both} == {four["h0"], four["h1"]}
    # A forced host still passes the other filters: an unschedulable one refuses.
    gen = client.get(f"/nodes/{four['h1']}").get_json()["generation"]
    resp = client.put(
        f"/nodes/{four['h1']}", json={"cell": "c1", "unschedulable": True, "generation": gen}
    )
    assert resp.status_code == 200, resp.get_json()
    assert client.get(f"/nodes/{four['h1']}").get_json()["unschedulable"] is True
    with pytest.raises(worker.NoValidHost) as err:
        sched.select_destinations(_spec({"force_hosts": ["h1"]}))
    text = str(err.value)
    assert "ForceHostsFilter removed 3" in text and "ComputeFilter removed 1" in text
