"""Helpers of the scheduler's functional tests: hosts in placement (providers
with VCPU and MEMORY_MB, node records and twins), a Scheduler and its
placement client on a live placement, a request spec."""

from joule import placement_client
from scheduler import conf as sconf_mod
from scheduler import worker
from tests import builders

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


def spec(**kw):
    data = {
        "version": "1.0",
        "resources": {"VCPU": 1, "MEMORY_MB": 512},
        "project_id": "proj",
        "user_id": "usr",
    }
    data.update(kw)
    return data
