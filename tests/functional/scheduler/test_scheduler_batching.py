"""Batches racing each other on a live placement (SQLite and PostgreSQL).

Three scheduler endpoints (three workers' worth, ``[scheduler] batch_size``
16) each get 32 concurrent select_destinations calls, as their executor
threads would from the bus. The cluster has exactly one VCPU per instance,
so the last claims are races between batches: every instance must be
placed exactly once, on one host, nothing over-committed, and the batches
must really have formed (the scheduling reports say so).
"""

import concurrent.futures
import json
import random
import uuid

import sqlalchemy as sa

from joule import placement_client
from placement import models as m
from scheduler import conf as conf_mod
from scheduler import service
from tests import builders
from tests import scheduling

WORKERS = 3
PER_WORKER = 32
HOSTS = 24
SLOTS = WORKERS * PER_WORKER // HOSTS  # VCPU per host: the cluster holds them all


def test_batches_racing_each_other_place_every_instance_exactly_once(db, live_server):
    for i in range(HOSTS):
        rp = builders.create_provider(db, name=f"batch-{i}")
        builders.set_inventory(db, rp, "VCPU", SLOTS)
        builders.set_inventory(db, rp, "MEMORY_MB", 8192)
    endpoints = []
    for _ in range(WORKERS):
        conf = conf_mod.make_conf(
            overrides={
                ("scheduler", "batch_size"): 16,
                ("scheduler", "max_attempts"): 2,
                ("placement", "endpoint_override"): live_server.url,
                ("placement", "auth_type"): "noauth",
            }
        )
        endpoints.append(
            service.SchedulerEndpoint(
                conf, lambda: placement_client.PlacementClient.for_endpoint(live_server.url)
            )
        )
    rng = random.Random(7)
    calls = []
    for w in range(WORKERS):
        for n in range(PER_WORKER):
            calls.append(
                (
                    endpoints[w],
                    {
                        "version": "1.0",
                        "request_id": f"req-{w}-{n}",
                        "instance_uuids": [str(uuid.uuid4())],
                        # Amounts differ (one walk for all of them), VCPU is exact.
                        "resources": {"VCPU": 1, "MEMORY_MB": rng.choice((128, 256, 512))},
                        "project_id": "p",
                        "user_id": "u",
                    },
                )
            )
    rng.shuffle(calls)
    with concurrent.futures.ThreadPoolExecutor(WORKERS * 16) as pool:
        answers = list(pool.map(lambda c: (c[1], c[0].select_destinations({}, c[1])), calls))

    for spec, answer in answers:
        assert answer["status"] == "placed", (spec["request_id"], answer)
        [[selected, *_alts]] = answer["selections"]["selections"]
        assert selected["instance_uuid"] == spec["instance_uuids"][0]
    instances = sorted(spec["instance_uuids"][0] for spec, _a in answers)

    with db.read() as conn:
        rows, inv, per_consumer, usage = scheduling.read_ledger(conn)
        reports = [json.loads(r.body) for r in conn.execute(sa.select(m.scheduling_reports.c.body))]
    memory = {
        r.consumer_id: r.used
        for r in rows
        if inv[(r.resource_provider_id, r.resource_class_id)] == 8192
    }
    # Each instance placed exactly once, on one host, with its own amounts.
    assert sorted(per_consumer) == instances
    assert all(len(hosts) == 1 for hosts in per_consumer.values())
    wanted = {s["instance_uuids"][0]: s["resources"]["MEMORY_MB"] for s, _a in answers}
    assert memory == wanted
    # No over-commit; the cluster is exactly full.
    assert all(used <= inv[key] for key, used in usage.items())
    assert sum(u for k, u in usage.items() if inv[k] == SLOTS) == WORKERS * PER_WORKER
    # Batches formed: some requests were placed together with others.
    assert len(reports) == WORKERS * PER_WORKER
    assert any((r.get("batch") or {}).get("requests", 1) > 1 for r in reports)
