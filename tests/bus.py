"""Helpers of the message-bus tests: a cluster in placement, specs, invariants,
and the services of a cloud over the in-memory bus in this process."""

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


def make_conf(endpoint, overrides=None):
    """The services' ConfigOpts: the in-memory bus, placement at ``endpoint``
    (REST), RPC calls of 20 s; ``overrides`` {(group, name): value}."""
    from conductor import conf as cconf
    from joule import rpc

    values = {
        ("placement", "endpoint_override"): endpoint,
        (None, "transport_url"): rpc.IN_MEMORY_TRANSPORT_URL,
        ("rpc", "call_timeout"): 20,
    }
    values.update(overrides or {})
    return cconf.make_conf(overrides=values)


def _super_conductor(conf, transport, driver, name):
    from conductor import cmd as conductor_cmd

    return conductor_cmd.build_service(conf, transport, None, name, driver=driver)


def services(
    conf,
    transport,
    cells=("cell1", "cell2"),
    driver=None,
    supers=1,
    scheduler=None,
    super_service=None,
):
    """The services of a cloud on ``transport``, not started; (services, driver).

    A scheduler (scheduler-worker's, or a service of the endpoint
    ``scheduler`` on the scheduler topic), ``supers`` super conductors
    (conductor-worker's, or ``super_service(conf, transport, driver, name)``)
    and a conductor for each cell, all with one simulated cloud: ``driver``,
    else one made from ``conf``.
    """
    from conductor import cmd as conductor_cmd
    from joule import rpc
    from joule import service as service_mod
    from scheduler import cmd as scheduler_cmd

    driver = driver or conductor_cmd.make_driver(conf)
    if scheduler is None:
        svcs = [scheduler_cmd.build_service(conf, transport, "scheduler-1")]
    else:
        svc = service_mod.Service(conf, transport, "scheduler-1")
        svc.add_server(rpc.topic(conf, rpc.SCHEDULER_TOPIC), [scheduler])
        svcs = [svc]
    super_service = super_service or _super_conductor
    svcs += [super_service(conf, transport, driver, f"super-{n}") for n in range(supers)]
    svcs += [
        conductor_cmd.build_service(conf, transport, cell, f"{cell}-1", driver=driver)
        for cell in cells
    ]
    return svcs, driver


@contextlib.contextmanager
def running(conf, **kwargs):
    """The services of ``services(conf, transport, **kwargs)`` started on a
    new transport of ``conf``; a Cloud. Stopped after, the transport cleaned up."""
    from joule import rpc

    transport = rpc.transport_of(conf)
    svcs, driver = services(conf, transport, **kwargs)
    for svc in svcs:
        svc.start()
    try:
        yield Cloud(conf, transport, driver, svcs)
    finally:
        for svc in svcs:
            svc.stop()
        transport.cleanup()


def in_process(endpoint, cells=("cell1", "cell2"), driver=None, supers=1, overrides=None):
    """A whole cloud in this process (sweeps every 0.5 s); overrides {(group, name): value}."""
    conf = make_conf(endpoint, {("conductor", "sweep_interval"): 0.5, **(overrides or {})})
    return running(conf, cells=cells, driver=driver, supers=supers)
