"""Races: 8 scheduler processes (python -m scheduler.batch) claim concurrently on one placement.

The cluster holds exactly as many instances as are requested, so the last
claims are real races for the last free slots: every request must be placed
exactly once, no provider over-committed, lost races retried, not failed.
The suite runs 200 requests to stay lean; the 2,000-request run is
benchmarks/schedule_races.py.
"""

import uuid

from tests import builders
from tests import processes
from tests import scheduling
from tests import specs

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

    spec = specs.spec_builder(resources={"VCPU": 1, "MEMORY_MB": 256}, project_id="p", user_id="u")
    instances = [str(uuid.uuid4()) for _ in range(WORKERS * PER_WORKER)]
    summaries = processes.run_batches(
        tmp_path,
        live_server.url,
        [[spec(instance_uuids=[inst]) for inst in instances[w::WORKERS]] for w in range(WORKERS)],
        OS_SCHEDULER__MAX_ATTEMPTS="1",
    )

    assert sum(s["placed"] for s in summaries) == WORKERS * PER_WORKER
    assert sum(s["failed"] for s in summaries) == 0

    with db.read() as conn:
        _rows, inv, per_consumer, usage = scheduling.read_ledger(conn)
    # Each request placed exactly once, on one host.
    assert sorted(per_consumer) == sorted(instances)
    assert all(len(hosts) == 1 for hosts in per_consumer.values())
    # No over-commit anywhere (allocation ratio 1.0, nothing reserved).
    assert all(used <= inv[key] for key, used in usage.items())
    # The cluster is exactly full: the last slots were raced for and taken.
    assert sum(usage[k] for k in usage if inv[k] == SLOTS) == WORKERS * PER_WORKER
