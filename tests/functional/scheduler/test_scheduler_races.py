"""Races: 8 scheduler processes (python -m scheduler.batch) claim concurrently on one placement.

The cluster holds exactly as many instances as are requested, so the last
claims are real races for the last free slots: every request must be placed
exactly once, no provider over-committed, lost races retried, not failed.
The suite runs 200 requests to stay lean; the 2,000-request run is
benchmarks/schedule_races.py.
"""

import json
import os
import subprocess
import sys
import uuid

import sqlalchemy as sa

from placement import models as m
from tests import builders

WORKERS = 8
PER_WORKER = 25
HOSTS = 25
SLOTS = WORKERS * PER_WORKER // HOSTS  # VCPU per host: the cluster holds them all


def test_eight_workers_place_every_request_exactly_once(db, live_server, tmp_path):
    rps = []
    for i in range(HOSTS):
        rp = builders.create_provider(db, name=f"race-{i}")
        builders.set_inventory(db, rp, "VCPU", SLOTS)
        builders.set_inventory(db, rp, "MEMORY_MB", SLOTS * 256)
        rps.append(rp)

    procs = []
    env = dict(
        os.environ,
        OS_PLACEMENT__ENDPOINT_OVERRIDE=live_server.url,
        OS_FILTER_SCHEDULER__WRITE_REPORTS="false",
        OS_SCHEDULER__MAX_ATTEMPTS="1",
    )
    instances = []
    for w in range(WORKERS):
        path = tmp_path / f"specs-{w}.jsonl"
        with open(path, "w") as f:
            for _ in range(PER_WORKER):
                inst = str(uuid.uuid4())
                instances.append(inst)
                f.write(
                    json.dumps(
                        {
                            "version": "1.0",
                            "resources": {"VCPU": 1, "MEMORY_MB": 256},
                            "instance_uuids": [inst],
                            "project_id": "p",
                            "user_id": "u",
                        }
                    )
                    + "\n"
                )
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "scheduler.batch",
                    "--requests",
                    str(path),
                    "--output",
                    str(tmp_path / f"out-{w}.jsonl"),
                ],
                env=env,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    summaries = []
    for p in procs:
        _out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-2000:]
        summaries.append(json.loads(err.strip().splitlines()[-1]))

    assert sum(s["placed"] for s in summaries) == WORKERS * PER_WORKER
    assert sum(s["failed"] for s in summaries) == 0

    alloc = m.allocations
    with db.read() as conn:
        rows = conn.execute(
            sa.select(
                alloc.c.consumer_id,
                alloc.c.resource_provider_id,
                alloc.c.resource_class_id,
                alloc.c.used,
            )
        ).all()
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
    # Each request placed exactly once, on one host.
    assert sorted(per_consumer) == sorted(instances)
    assert all(len(hosts) == 1 for hosts in per_consumer.values())
    # No over-commit anywhere (allocation ratio 1.0, nothing reserved).
    assert all(used <= inv[key] for key, used in usage.items())
    # The cluster is exactly full: the last slots were raced for and taken.
    assert sum(usage[k] for k in usage if inv[k] == SLOTS) == WORKERS * PER_WORKER
