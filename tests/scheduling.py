"""Helpers of the scheduler's functional tests: hosts in placement (providers
with VCPU and MEMORY_MB, node records and twins), a Scheduler and its
placement client on a live placement, a request spec, and what placement's
ledger holds afterwards."""

import sqlalchemy as sa

from joule import placement_client
from placement import models as m
from scheduler import conf as sconf_mod
from scheduler import worker
from tests import builders
from tests import specs

PROFILE = {"performance": "performance", "eco": "eco", "draining": "eco"}


def add_hosts(db, client, specs):
    """Create root providers with VCPU/MEMORY_MB, node records and twins.

    ``specs``: (name, cell, schedulable_class, vcpu, ram_mb). Returns {name: uuid}.
    """
    out = {}
    for name, cell, klass, vcpu, ram in specs:
        uuid = builders.create_provider(db, name=name)
        builders.set_inventory(db, uuid, "VCPU", vcpu)
        builders.set_inventory(db, uuid, "MEMORY_MB", ram)
        resp = client.put(f"/nodes/{uuid}", json={"cell": cell, "labels": {"rack": name[:1]}})
        assert resp.status_code in (200, 201), resp.get_json()
        if klass is not None:
            resp = client.put(
                f"/nodes/{uuid}/twin", json={"profile": PROFILE[klass], "schedulable_class": klass}
            )
            assert resp.status_code in (200, 201), resp.get_json()
        out[name] = uuid
    return out


def make_scheduler(live_server, session=None, **opts):
    overrides = {("placement", "endpoint_override"): live_server.url}
    overrides.update(
        {
            ("scheduler" if k == "max_attempts" else "filter_scheduler", k): v
            for k, v in opts.items()
        }
    )
    conf = sconf_mod.make_conf(overrides=overrides)
    client = placement_client.PlacementClient.from_conf(conf, session=session)
    return worker.Scheduler(conf, client), client


spec = specs.request_spec


def read_ledger(conn):
    """The allocations read on ``conn``: (the rows, the inventory totals by
    (provider id, class id), the providers of each consumer, the amounts used
    by (provider id, class id))."""
    rows = conn.execute(sa.select(m.allocations)).all()
    inv = {
        (r.resource_provider_id, r.resource_class_id): r.total
        for r in conn.execute(sa.select(m.inventories))
    }
    per_consumer = {}
    usage = {}
    for r in rows:
        per_consumer.setdefault(r.consumer_id, set()).add(r.resource_provider_id)
        key = (r.resource_provider_id, r.resource_class_id)
        usage[key] = usage.get(key, 0) + r.used
    return rows, inv, per_consumer, usage
