"""The race acceptance run: 8 scheduler workers, 2,000 requests, a cluster that
holds exactly 2,000.

Usage (from the top of a checkout, PostgreSQL on 127.0.0.1:5432, user postgres, trust):

    python -m benchmarks.schedule_races [--requests 2000]
        [--workers 8] [--hosts 250] [--api-workers 2] [--threads 8]

Every host has exactly requests/hosts VCPU and each request asks for 1 VCPU,
so the last claims are real races for the last free slots. Checks, from the
database: every request placed exactly once (one consumer, one provider), no
provider over-committed, the cluster exactly full; prints the races lost (and
retried) and the wall time.
"""

import argparse
import os
import tempfile
import uuid as uuid_lib

import sqlalchemy as sa

from benchmarks import schedule
from placement import db as db_mod
from placement import models as m


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--hosts", type=int, default=250)
    parser.add_argument("--api-workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args(argv)
    if args.requests % args.hosts:
        parser.error("--requests must be a multiple of --hosts (an exactly full cluster)")
    slots = args.requests // args.hosts
    server = schedule.ScheduleServer("races", args.api_workers, args.threads).start()
    try:
        schedule.bulk_load(
            server.sampler_url,
            args.hosts,
            vcpu=slots,
            ram=slots * 1024,
            disk=slots * 10,
            perf_share=0.0,
        )
        instances = [str(uuid_lib.uuid4()) for _ in range(args.requests)]
        specs = [
            {
                "version": "1.0",
                "resources": {"VCPU": 1, "MEMORY_MB": 512},
                "instance_uuids": [i],
                "project_id": "bench",
                "user_id": "bench",
            }
            for i in instances
        ]
        wall, sums = schedule.run_workers(
            server.url,
            specs,
            args.workers,
            tempfile.mkdtemp(prefix="bench-races-"),
            {"OS_FILTER_SCHEDULER__WRITE_REPORTS": "false"},
        )
        db = db_mod.Database(server.sampler_url)
        with db.read() as conn:
            rows = conn.execute(
                sa.select(
                    m.allocations.c.consumer_id,
                    m.allocations.c.resource_provider_id,
                    m.allocations.c.resource_class_id,
                    m.allocations.c.used,
                )
            ).all()
            totals = {
                (r.resource_provider_id, r.resource_class_id): r.total
                for r in conn.execute(sa.select(m.inventories))
            }
        db.dispose()
        hosts_of, usage = {}, {}
        for r in rows:
            hosts_of.setdefault(r.consumer_id, set()).add(r.resource_provider_id)
            key = (r.resource_provider_id, r.resource_class_id)
            usage[key] = usage.get(key, 0) + r.used
        placed_once = sorted(hosts_of) == sorted(instances) and all(
            len(h) == 1 for h in hosts_of.values()
        )
        overcommit = sum(1 for k, used in usage.items() if used > totals[k])
        print(
            f"# cpus={os.cpu_count()} load={os.getloadavg()[0]:.1f} api: {args.api_workers}"
            f" gunicorn workers x {args.threads} threads"
        )
        print(
            f"requests={args.requests} workers={args.workers} hosts={args.hosts} slots/host={slots}"
        )
        print(
            f"placed={sum(s['placed'] for s in sums)} failed={sum(s['failed'] for s in sums)}"
            f" races_lost={sum(s['races_lost'] for s in sums)} placed_exactly_once="
            f"{placed_once} overcommitted_inventories={overcommit} wall={wall:.1f}s "
            f"rate={args.requests / wall:.1f}/s"
        )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
