"""End-to-end scheduling throughput: requests scheduled per second.

Usage (from the top of a checkout, PostgreSQL on 127.0.0.1:5432, user postgres, trust):

    python -m benchmarks.schedule [--sizes 1000,10000]
        [--requests 200,40] [--workers 1,4,8] [--api-workers 2] [--threads 8]
        [--page-size 1000] [--caps 0,1000]

For each cluster size: a fresh PostgreSQL database bulk-loaded with root
providers (VCPU 64, MEMORY_MB 256 GiB, DISK_GB 2 TB), node records in two
cells and twins (30% performance, the rest eco), served by our placement-api
under gunicorn. Then, for each worker count, that many ``python -m scheduler.batch``
processes share the request stream (30% performance, 70% standard, 1-8 VCPU)
and the wall time from start to the last worker's exit gives requests per
second, end to end: candidate pages fetched with node data, filters,
weighers, the claim (PUT /allocations) and the scheduling report write.
``--caps`` lists the ``[filter_scheduler] max_placement_results`` values to
run: 0 walks every page, N stops after N candidate hosts (see
scheduler/conf.py); each (size, cap, workers) triple is one row.
"""

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
import uuid as uuid_lib

import sqlalchemy as sa

from benchmarks import claims
from placement import db as db_mod
from placement import models as m


class ScheduleServer(claims.Server):
    def __init__(self, tag, workers, threads):
        super().__init__("ours", workers, threads)
        self.dbname = f"bench_schedule_{tag}"


def bulk_load(url, hosts, vcpu=64, ram=262144, disk=2000, perf_share=0.3, cells=2, seed=0):
    """Hosts as root providers with inventory, node records and twins; plain SQL."""
    rng = random.Random(seed)
    db = db_mod.Database(url)
    db_mod.sync_standard_classes_and_traits(db)
    now = db_mod.utcnow()
    with db.write() as conn:
        rc = dict(
            tuple(r)
            for r in conn.execute(sa.select(m.resource_classes.c.name, m.resource_classes.c.id))
        )
        batch = 5000
        for start in range(0, hosts, batch):
            rps, invs, nodes, twins = [], [], [], []
            for i in range(start, min(hosts, start + batch)):
                rp_id = i + 1
                rps.append(
                    dict(
                        id=rp_id,
                        uuid=str(uuid_lib.uuid4()),
                        name=f"host-{i}",
                        generation=0,
                        root_provider_id=rp_id,
                        parent_provider_id=None,
                        created_at=now,
                    )
                )
                for name, total in (("VCPU", vcpu), ("MEMORY_MB", ram), ("DISK_GB", disk)):
                    invs.append(
                        dict(
                            resource_provider_id=rp_id,
                            resource_class_id=rc[name],
                            total=total,
                            reserved=0,
                            min_unit=1,
                            max_unit=total,
                            step_size=1,
                            allocation_ratio=1.0,
                            created_at=now,
                        )
                    )
                nodes.append(
                    dict(
                        resource_provider_id=rp_id,
                        cell=f"cell{i % cells + 1}",
                        labels="{}",
                        reserved=False,
                        unschedulable=False,
                        generation=0,
                        created_at=now,
                    )
                )
                perf = rng.random() < perf_share
                twins.append(
                    dict(
                        resource_provider_id=rp_id,
                        profile="performance" if perf else "eco",
                        schedulable_class="performance" if perf else "eco",
                        generation=0,
                        created_at=now,
                    )
                )
            conn.execute(m.resource_providers.insert(), rps)
            conn.execute(m.inventories.insert(), invs)
            conn.execute(m.nodes.insert(), nodes)
            conn.execute(m.node_twins.insert(), twins)
        if db.is_postgres:
            conn.exec_driver_sql(
                "SELECT setval('resource_providers_id_seq', "
                "(SELECT max(id) FROM resource_providers))"
            )
    db.dispose()


def make_specs(count, seed, perf_share=0.3, vcpu_choices=(1, 2, 4, 8)):
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        perf = rng.random() < perf_share
        out.append(
            {
                "version": "1.0",
                "resources": {
                    "VCPU": rng.choice(vcpu_choices),
                    "MEMORY_MB": rng.choice((1024, 2048, 4096)),
                },
                "workload_class": "performance" if perf else "standard",
                "project_id": "bench",
                "user_id": "bench",
            }
        )
    return out


def run_workers(endpoint, specs, workers, tmpdir, extra_env=None):
    """Run ``workers`` scheduler.batch processes over ``specs``; return
    (wall seconds, summaries of each worker)."""
    env = dict(os.environ, OS_PLACEMENT__ENDPOINT_OVERRIDE=endpoint, **(extra_env or {}))
    files = []
    for w in range(workers):
        path = os.path.join(tmpdir, f"specs-{w}-{time.monotonic_ns()}.jsonl")
        with open(path, "w") as f:
            for spec in specs[w::workers]:
                f.write(json.dumps(spec) + "\n")
        files.append(path)
    start = time.perf_counter()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "scheduler.batch",
                "--requests",
                path,
                "--output",
                path + ".out",
            ],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for path in files
    ]
    summaries = []
    for proc in procs:
        _out, err = proc.communicate()
        lines = err.strip().splitlines()
        if not lines:
            raise RuntimeError(f"scheduler.batch exited {proc.returncode} without summary")
        try:
            summaries.append(json.loads(lines[-1]))
        except ValueError:
            raise RuntimeError(f"scheduler.batch failed: {err[-2000:]}")
    return time.perf_counter() - start, summaries


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument(
        "--requests", default="200,40", help="requests per worker-count run, one per size"
    )
    parser.add_argument("--workers", default="1,4,8")
    parser.add_argument("--api-workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--page-size", type=int, default=1000)
    parser.add_argument(
        "--caps", default="0", help="max_placement_results values to run (0: every page)"
    )
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    counts = [int(s) for s in args.requests.split(",")]
    workers = [int(s) for s in args.workers.split(",")]
    caps = [int(s) for s in args.caps.split(",")]
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    print(
        f"# {platform.node()} cpus={os.cpu_count()} load={os.getloadavg()[0]:.1f} "
        f"commit={commit} api: {args.api_workers} gunicorn workers x {args.threads} "
        f"threads, page_size={args.page_size}"
    )
    print(
        "| hosts | max_placement_results | workers | requests | placed | failed | "
        "races lost | wall s | req/s | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    tmpdir = tempfile.mkdtemp(prefix="bench-schedule-")
    for size, count in zip(sizes, counts, strict=True):
        server = ScheduleServer(size, args.api_workers, args.threads).start()
        try:
            bulk_load(server.sampler_url, size)
            for cap in caps:
                for n, w in enumerate(workers):
                    specs = make_specs(count, seed=n)
                    wall, sums = run_workers(
                        server.url,
                        specs,
                        w,
                        tmpdir,
                        {
                            "OS_FILTER_SCHEDULER__PAGE_SIZE": str(args.page_size),
                            "OS_FILTER_SCHEDULER__MAX_PLACEMENT_RESULTS": str(cap),
                        },
                    )
                    placed = sum(s["placed"] for s in sums)
                    failed = sum(s["failed"] for s in sums)
                    races = sum(s["races_lost"] for s in sums)
                    print(
                        f"| {size} | {cap or 'every page'} | {w} | {count} | {placed} | "
                        f"{failed} | {races} | {wall:.1f} | {count / wall:.1f} | "
                        f"{os.getloadavg()[0]:.1f} |",
                        flush=True,
                    )
        finally:
            server.stop()


if __name__ == "__main__":
    main()
