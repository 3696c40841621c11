"""Paged allocation candidates at scale: first page and full walk, peak RSS.

Usage (from the top of a checkout, PostgreSQL on 127.0.0.1:5432, user postgres, trust):

    python -m benchmarks.candidates_scale [--sizes 1000,10000,100000]
        [--page-size 100] [--samples 20] [--workers 1] [--threads 4]
        [--max-ratio 1.5] [--max-first-page-ms 25]

For each size: a fresh database loaded with bulk SQL (every 10th root has two
NUMA-like children carrying the VCPU; every root has MEMORY_MB and DISK_GB,
a trait and an aggregate), our API under gunicorn, then the median of
``--samples`` first-page requests (``page_size``) and one full walk following
the ``next`` links, and the peak RSS (VmHWM) of the API worker processes.

The seed's promise is that a page costs what the page holds: the run exits
1, saying why on stderr, when the largest size's first-page median is more
than ``--max-ratio`` (1.5) times the smallest's, or above
``--max-first-page-ms`` (25; 0: no bound).
"""

import argparse
import platform
import statistics
import sys
import time
import uuid as uuid_lib

import requests
import sqlalchemy as sa

from benchmarks import claims
from placement import db as db_mod
from placement import models as m

QUERY = "/allocation_candidates?resources=VCPU:1,MEMORY_MB:256&page_size={ps}"
HEADERS = {
    "x-auth-token": "admin",
    "openstack-api-version": "placement 1.39",
    "accept": "application/json",
}


class ScaleServer(claims.Server):
    def __init__(self, size, workers, threads):
        super().__init__("ours", workers, threads)
        self.dbname = f"bench_candidates_scale_{size}"


def bulk_load(url, roots):
    db = db_mod.Database(url)
    db_mod.sync_standard_classes_and_traits(db)
    now = db_mod.utcnow()
    with db.write() as conn:
        rc = dict(
            tuple(r)
            for r in conn.execute(sa.select(m.resource_classes.c.name, m.resource_classes.c.id))
        )
        avx = conn.execute(
            sa.select(m.traits.c.id).where(m.traits.c.name == "HW_CPU_X86_AVX2")
        ).scalar_one()
        agg = conn.execute(
            m.placement_aggregates.insert().values(uuid=str(uuid_lib.uuid4()))
        ).inserted_primary_key[0]
        next_id = 1
        batch = 5000
        for start in range(0, roots, batch):
            rps, invs, traits, aggs = [], [], [], []
            for i in range(start, min(roots, start + batch)):
                root = next_id
                next_id += 1
                rps.append(
                    dict(
                        id=root,
                        uuid=str(uuid_lib.uuid4()),
                        name=f"cn{i}",
                        generation=0,
                        root_provider_id=root,
                        parent_provider_id=None,
                        created_at=now,
                    )
                )
                inv = dict(
                    reserved=0, min_unit=1, step_size=1, allocation_ratio=1.0, created_at=now
                )
                invs.append(
                    dict(
                        inv,
                        resource_provider_id=root,
                        resource_class_id=rc["MEMORY_MB"],
                        total=65536,
                        max_unit=65536,
                    )
                )
                invs.append(
                    dict(
                        inv,
                        resource_provider_id=root,
                        resource_class_id=rc["DISK_GB"],
                        total=1000,
                        max_unit=1000,
                    )
                )
                traits.append(dict(resource_provider_id=root, trait_id=avx))
                aggs.append(dict(resource_provider_id=root, aggregate_id=agg))
                holders = [root]
                if i % 10 == 0:
                    holders = []
                    for n in range(2):
                        child = next_id
                        next_id += 1
                        rps.append(
                            dict(
                                id=child,
                                uuid=str(uuid_lib.uuid4()),
                                name=f"cn{i}-numa{n}",
                                generation=0,
                                root_provider_id=root,
                                parent_provider_id=root,
                                created_at=now,
                            )
                        )
                        holders.append(child)
                for h in holders:
                    invs.append(
                        dict(
                            inv,
                            resource_provider_id=h,
                            resource_class_id=rc["VCPU"],
                            total=32,
                            max_unit=32,
                        )
                    )
            conn.execute(m.resource_providers.insert(), rps)
            conn.execute(m.inventories.insert(), invs)
            conn.execute(m.resource_provider_traits.insert(), traits)
            conn.execute(m.resource_provider_aggregates.insert(), aggs)
        if db.is_postgres:
            conn.exec_driver_sql(
                "SELECT setval('resource_providers_id_seq', (SELECT max(id) FROM "
                "resource_providers))"
            )
    with db.engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE")
    db.dispose()


def peak_rss_kib(pid):
    """Max VmHWM over the process and its children (gunicorn workers)."""
    import os

    best = 0
    pids = [pid]
    try:
        for entry in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{entry}/children") as f:
                pids += [int(x) for x in f.read().split()]
    except OSError:
        pass
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        best = max(best, int(line.split()[1]))
        except OSError:
            pass
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--page-size", type=int, default=100)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument(
        "--max-ratio",
        type=float,
        default=1.5,
        help="fail when the largest size's first page takes more than this many "
        "times the smallest's (1.5)",
    )
    parser.add_argument(
        "--max-first-page-ms",
        type=float,
        default=25.0,
        help="fail when the largest size's first page takes longer (25 ms; 0: no bound)",
    )
    args = parser.parse_args(argv)
    medians = {}
    print(f"machine: {platform.node()} {platform.machine()}, python {platform.python_version()}")
    for size in [int(s) for s in args.sizes.split(",")]:
        server = ScaleServer(size, args.workers, args.threads)
        url = claims.fresh_database(server.dbname)
        t0 = time.perf_counter()
        # The server's own start-up creates the schema; load after it is up.
        server.start()
        bulk_load(url.render_as_string(hide_password=False), size)
        loaded = time.perf_counter() - t0
        try:
            s = requests.Session()
            s.headers.update(HEADERS)
            first = QUERY.format(ps=args.page_size)
            s.get(server.url + first)
            lat = []
            for _ in range(args.samples):
                t = time.perf_counter()
                resp = s.get(server.url + first)
                lat.append(time.perf_counter() - t)
                assert resp.status_code == 200, resp.text[:300]
            rss_before = peak_rss_kib(server.proc.pid)
            t = time.perf_counter()
            nxt, pages, seen, repeats, cands = first, 0, set(), 0, 0
            while nxt:
                body = s.get(server.url + nxt).json()
                pages += 1
                sums = body["provider_summaries"]
                page_roots = {
                    sums[next(iter(ar["allocations"]))]["root_provider_uuid"]
                    for ar in body["allocation_requests"]
                }
                cands += len(body["allocation_requests"])
                repeats += len(page_roots & seen)
                seen |= page_roots
                links = [x["href"] for x in body["links"] if x["rel"] == "next"]
                nxt = links[0] if links else None
            walk = time.perf_counter() - t
            medians[size] = statistics.median(lat) * 1000
            print(
                f"roots={size} load={loaded:.1f}s first_page_median="
                f"{statistics.median(lat) * 1000:.1f}ms "
                f"first_page_p95={sorted(lat)[int(len(lat) * 0.95) - 1] * 1000:.1f}ms "
                f"full_walk={walk:.1f}s pages={pages} roots_seen={len(seen)} "
                f"roots_repeated={repeats} candidates={cands} "
                f"peak_rss_before_walk={rss_before // 1024}MiB "
                f"peak_rss_after_walk={peak_rss_kib(server.proc.pid) // 1024}MiB",
                flush=True,
            )
        finally:
            server.stop()
    return _verdict(medians, args.max_ratio, args.max_first_page_ms)


def _verdict(medians, max_ratio, max_ms):
    """0, or 1 with the reason on stderr when paging lost its O(page) cost."""
    if len(medians) < 2:
        return 0
    small, large = min(medians), max(medians)
    ratio = medians[large] / medians[small]
    print(
        f"first page at {large} roots: {medians[large]:.1f} ms, "
        f"{ratio:.2f}x the {medians[small]:.1f} ms at {small} roots"
    )
    failed = []
    if ratio > max_ratio:
        failed.append(f"{ratio:.2f}x the first page at {small} roots (at most {max_ratio:g}x)")
    if max_ms and medians[large] > max_ms:
        failed.append(f"{medians[large]:.1f} ms (at most {max_ms:g} ms)")
    if failed:
        sys.stderr.write(
            f"candidates_scale: the first page at {large} roots took "
            + " and ".join(failed)
            + ": a page should cost what it holds, not what the cluster holds\n"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
