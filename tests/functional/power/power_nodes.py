"""What the suspend tests share: CPU nodes registered in placement, their
power states as placement shows them, the nodes a scheduler's query still
sees, and pending build requests that ask for capacity."""

from joule import request_spec as spec_mod
from joule import vocabulary
from joule.placement_client import url_path
from powerpolicy import conf as conf_mod
from tests import builders
from tests.conftest import new_uuid

CPU = "AMD EPYC 9655 96-Core Processor"
# What the ComputeFilter makes placement leave out (scheduler/filters/compute.py).
ASLEEP = ",".join("!" + vocabulary.POWER_STATE_TRAITS[s] for s in sorted(vocabulary.NOT_ON))


def suspend_conf(static_hp_frac, min_spare_nodes, **driver):
    """The controller's configuration of the suspend tests: suspend on, a
    node idle for a minute goes off, the driver's own options beside."""
    return conf_mod.make_conf(
        overrides={
            "static_hp_frac": static_hp_frac,
            "suspend_enabled": True,
            "suspend_after": 60,
            "min_spare_nodes": min_spare_nodes,
            **driver,
        }
    )


def register(api, db, name):
    """A 64-VCPU CPU node of one family; returns its provider uuid."""
    rp = builders.create_provider(db, name=name)
    builders.set_inventory(db, rp, "VCPU", 64)
    builders.set_inventory(db, rp, "MEMORY_MB", 65536)
    api.put_node(rp, cell="cell1", labels={"role": "worker"})
    api.put_hardware(
        rp, {"cpu_model": CPU, "gpu_count": 0, "cpu_min_cap_watts": 150, "cpu_max_cap_watts": 400}
    )
    return rp


def states(api):
    """{node name: its twin's power state (None: never set)}."""
    return {n["name"]: (n["twin"] or {}).get("power_state") for n in api.list_nodes()}


def awake_roots(api):
    """The roots a scheduler's candidate query gets (sleeping nodes left out)."""
    body = api.request(
        "GET",
        url_path("allocation_candidates"),
        params={"resources": "VCPU:1", "root_required": ASLEEP},
    ).json()
    return {s["root_provider_uuid"] for s in body["provider_summaries"].values()}


def pending(api, request_id, count, resources):
    """``count`` pending standard build requests of ``resources`` each."""
    instances = [new_uuid() for _ in range(count)]
    api.request(
        "POST",
        url_path("build_requests"),
        json={
            "build_requests": [
                {
                    "instance_uuid": inst,
                    "request_id": request_id,
                    "workload_class": "standard",
                    "spec": {
                        "version": spec_mod.REQUEST_SPEC_VERSION,
                        "request_id": request_id,
                        "project_id": "p",
                        "user_id": "u",
                        "workload_class": "standard",
                        "resources": resources,
                        "instance_uuids": [inst],
                    },
                }
                for inst in instances
            ]
        },
        ok=(201,),
    )
    return instances
