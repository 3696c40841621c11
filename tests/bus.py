"""Helpers of the message-bus tests: a cluster in placement, specs, invariants."""

import contextlib
import json
import uuid

import sqlalchemy as sa

from joule import inventory as inventory_mod
from placement import models as m
from placement.objects import cluster_inventory


def load_cluster(db, nodes=8, cores=64, cells=2):
    """``nodes`` identical CPU nodes, round-robin over ``cells`` cells."""
    data = {
        "nodes": [
            {
                "node_name_prefix": "node",
                "replicas": nodes,
                "cpu": "EPYC",
                "cpu_sockets": 1,
                "cpu_cores": cores,
                "memory_gib": 256,
                "gpu_count": 0,
            }
        ]
    }
    cluster_inventory.load(db, inventory_mod.parse(data), cells=cells)


def spec_lines(requests, instances_per_request=1, vcpu=1, prefix="req"):
    out = []
    for n in range(requests):
        out.append(
            json.dumps(
                {
                    "version": "1.0",
                    "request_id": f"{prefix}-{n}",
                    "project_id": "p",
                    "user_id": "u",
                    "resources": {"VCPU": vcpu, "MEMORY_MB": 256},
                    "instance_uuids": [str(uuid.uuid4()) for _ in range(instances_per_request)],
                }
            )
        )
    return out


def ledger(db):
    """(allocations {consumer: {rp_uuid: {rc: used}}}, build requests {uuid: row},
    over-committed providers)."""
    with db.read() as conn:
        allocs = {}
        for consumer, rp, rc, used in conn.execute(
            sa.select(
                m.allocations.c.consumer_id,
                m.resource_providers.c.uuid,
                m.resource_classes.c.name,
                m.allocations.c.used,
            )
            .join(
                m.resource_providers,
                m.resource_providers.c.id == m.allocations.c.resource_provider_id,
            )
            .join(m.resource_classes, m.resource_classes.c.id == m.allocations.c.resource_class_id)
        ):
            allocs.setdefault(consumer, {}).setdefault(rp, {})[rc] = used
        records = {r.instance_uuid: r for r in conn.execute(sa.select(m.build_requests))}
        usage = conn.execute(
            sa.select(
                m.inventories.c.resource_provider_id,
                m.inventories.c.total,
                m.inventories.c.allocation_ratio,
                m.inventories.c.reserved,
                sa.func.coalesce(
                    sa.select(sa.func.sum(m.allocations.c.used))
                    .where(
                        m.allocations.c.resource_provider_id
                        == m.inventories.c.resource_provider_id,
                        m.allocations.c.resource_class_id == m.inventories.c.resource_class_id,
                    )
                    .scalar_subquery(),
                    0,
                ),
            )
        ).all()
    over = [r for r in usage if r[4] > (r[1] - r[3]) * r[2]]
    return allocs, records, over


def check_invariants(db, results, running=None):
    """The acceptance invariants; returns the counts by status.

    results: the build-submit outcome lines; running: {instance: host} from
    the simulated hypervisors (None: not checked).
    """
    allocs, records, over = ledger(db)
    assert over == [], f"over-committed providers: {over}"
    by_instance = {}
    for line in results:
        assert line["instance_uuid"] not in by_instance, f"two outcomes: {line}"
        by_instance[line["instance_uuid"]] = line
    counts = {"placed": 0, "failed": 0}
    for instance, rec in records.items():
        assert rec.status in ("placed", "failed"), f"{instance} left {rec.status}"
        counts[rec.status] += 1
        line = by_instance.get(instance)
        if line is not None:
            assert line["status"] == rec.status
        if rec.status == "placed":
            assert set(allocs.get(instance, {})) == {rec.host_uuid}, (
                f"{instance} placed on {rec.host_uuid}, allocations {allocs.get(instance)}"
            )
            if running is not None:
                assert running.get(instance) == rec.host_uuid, instance
        else:
            assert rec.reason, f"{instance} failed without a reason"
            assert instance not in allocs, f"failed {instance} holds {allocs[instance]}"
            if running is not None:
                assert instance not in running, f"failed {instance} runs"
    assert set(allocs) <= set(records), "allocations without a build request"
    return counts


class Cloud:
    """Scheduler, super conductor and cell conductors over the in-memory bus."""

    def __init__(self, conf, transport, driver, services):
        self.conf = conf
        self.transport = transport
        self.driver = driver
        self.services = services

    def submit(self, specs, timeout=120):
        """Submit spec dicts (or JSON lines); return (counts, outcome lines)."""
        from conductor import submit as submit_mod
        from scheduler import conf as sconf

        lines = []
        sub = submit_mod.Submitter(
            self.conf, self.transport, sconf.placement_client_of(self.conf), lines.append
        )
        text = [s if isinstance(s, str) else json.dumps(s) for s in specs]
        counts = sub.run(sub.parse(text), timeout=timeout, poll_interval=0.5)
        return counts, lines


@contextlib.contextmanager
def in_process(endpoint, cells=("cell1", "cell2"), driver=None, supers=1, overrides=None):
    """A whole cloud in this process; overrides {(group, name): value}."""
    from conductor import cmd as conductor_cmd
    from conductor import conf as cconf
    from joule import rpc
    from scheduler import cmd as scheduler_cmd

    values = {
        ("placement", "endpoint_override"): endpoint,
        (None, "transport_url"): rpc.IN_MEMORY_TRANSPORT_URL,
        ("conductor", "sweep_interval"): 0.5,
        ("rpc", "call_timeout"): 20,
    }
    values.update(overrides or {})
    conf = cconf.make_conf(overrides=values)
    transport = rpc.transport_of(conf)
    driver = driver or conductor_cmd.make_driver(conf)
    svcs = [scheduler_cmd.build_service(conf, transport, "scheduler-1")]
    svcs += [
        conductor_cmd.build_service(conf, transport, None, f"super-{n}", driver=driver)
        for n in range(supers)
    ]
    svcs += [
        conductor_cmd.build_service(conf, transport, cell, f"{cell}-1", driver=driver)
        for cell in cells
    ]
    for svc in svcs:
        svc.start()
    try:
        yield Cloud(conf, transport, driver, svcs)
    finally:
        for svc in svcs:
            svc.stop()
        transport.cleanup()
