"""Availability zones over a live placement (SQLite and PostgreSQL): a
request names a zone; alternates stay in the selected host's zone and cell."""

import pytest

from scheduler import worker
from tests import builders
from tests import specs
from tests.scheduling import make_scheduler

ZONE = "topology.kubernetes.io/zone"


def _hosts(db, client, layout):
    """layout: (name, cell, zone or None); returns {name: uuid}."""
    out = {}
    for name, cell, zone in layout:
        uuid = builders.create_provider(db, name=name)
        builders.set_inventory(db, uuid, "VCPU", 8)
        builders.set_inventory(db, uuid, "MEMORY_MB", 8192)
        labels = {ZONE: zone} if zone else {}
        resp = client.put(f"/nodes/{uuid}", json={"cell": cell, "labels": labels})
        assert resp.status_code in (200, 201), resp.get_json()
        out[name] = uuid
    return out


_spec = specs.spec_builder(version="1.3")


def test_zone_requested_and_alternates_stay_in_zone_and_cell(db, client, live_server):
    hosts = _hosts(
        db,
        client,
        [
            ("a1", "c1", "az1"),
            ("a2", "c1", "az1"),
            ("a3", "c2", "az1"),
            ("b1", "c1", "az2"),
            ("b2", "c1", "az2"),
            ("n1", "c1", None),
        ],
    )
    by_uuid = {u: n for n, u in hosts.items()}
    sched, _pc = make_scheduler(live_server, max_attempts=6)
    for _ in range(3):
        [hl] = sched.select_destinations(_spec(availability_zone="az2"))
        assert {by_uuid[s.host_uuid] for s in hl} == {"b1", "b2"}
    # No zone asked: alternates still share the selected host's zone and cell.
    for hl in sched.select_destinations(_spec(num_instances=4)):
        names = [by_uuid[s.host_uuid] for s in hl]
        zone = {"a": "az1", "b": "az2", "n": "nova"}[names[0][0]]
        cell = "c2" if names[0] == "a3" else "c1"
        for name in names[1:]:
            assert {"a": "az1", "b": "az2", "n": "nova"}[name[0]] == zone
            assert ("c2" if name == "a3" else "c1") == cell
    # Unlabelled hosts are in default_availability_zone.
    [hl] = sched.select_destinations(_spec(availability_zone="nova"))
    assert [by_uuid[s.host_uuid] for s in hl] == ["n1"]
    with pytest.raises(worker.NoValidHost) as err:
        sched.select_destinations(_spec(availability_zone="az9"))
    assert (
        "AvailabilityZoneFilter removed 6 (host is not in the requested availability "
        "zone)" in str(err.value)
    )


def test_zone_label_and_default_zone_are_options(db, client, live_server):
    uuid = builders.create_provider(db, name="x1")
    builders.set_inventory(db, uuid, "VCPU", 8)
    builders.set_inventory(db, uuid, "MEMORY_MB", 8192)
    client.put(f"/nodes/{uuid}", json={"cell": "c1", "labels": {"site/az": "west"}})
    sched, _pc = make_scheduler(
        live_server, availability_zone_label="site/az", default_availability_zone="elsewhere"
    )
    [hl] = sched.select_destinations(_spec(availability_zone="west"))
    assert hl[0].host_uuid == uuid
    with pytest.raises(worker.NoValidHost):
        sched.select_destinations(_spec(availability_zone="elsewhere"))
