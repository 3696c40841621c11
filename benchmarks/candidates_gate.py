"""Upstream's gate workload for GET /allocation_candidates: ours vs upstream 16.0.0.

Usage (from the top of a checkout, PostgreSQL on 127.0.0.1:5432, user postgres, trust):

    python -m benchmarks.candidates_gate [--providers 1000]
        [--concurrency 10] [--requests 400] [--workers 2] [--threads 10]
        [--skip-upstream]

For each system, in the same run, with the same gunicorn workers/threads on
the same PostgreSQL server: a fresh database, ``placeload`` (PyPI, from the
upstream virtualenv of tools/upstream.py) creates the providers with
inventory, aggregates and traits through the API, then ``--concurrency`` clients send the gate query
(the one upstream's perfload job times) ``--requests`` times in total, after
an ``ANALYZE`` of the database.
Prints median / p95 latency and requests per second.
"""

import argparse
import concurrent.futures
import platform
import statistics
import subprocess
import time

import requests
import sqlalchemy as sa

from benchmarks import claims

GATE_QUERY = (
    "/allocation_candidates?resources=VCPU:1,DISK_GB:10,MEMORY_MB:256"
    "&member_of=14a5c8a3-5a99-4e8f-88be-00d85fcb1c17&required=HW_CPU_X86_AVX2"
)
HEADERS = {
    "x-auth-token": "admin",
    "openstack-api-version": "placement 1.39",
    "accept": "application/json",
}


class GateServer(claims.Server):
    def __init__(self, kind, workers, threads):
        super().__init__(kind, workers, threads)
        self.dbname = f"bench_candidates_{kind}"


def load(url, providers):
    subprocess.run(
        [f"{claims.UPSTREAM_VENV}/bin/placeload", url, str(providers), "20"],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def analyze(db_url):
    """Fresh statistics for both systems alike (autovacuum may not have run
    yet right after placeload), as any long-lived database has."""
    engine = sa.create_engine(db_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.exec_driver_sql("ANALYZE")
    engine.dispose()


def hammer(url, concurrency, total):
    def one(_i):
        session = requests.Session()
        session.headers.update(HEADERS)
        out = []
        for _ in range(total // concurrency):
            t0 = time.perf_counter()
            resp = session.get(url + GATE_QUERY)
            out.append(time.perf_counter() - t0)
            assert resp.status_code == 200, resp.text[:300]
        return out, len(resp.json()["allocation_requests"])

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(one, range(concurrency)))
    elapsed = time.perf_counter() - start
    lat = sorted(x for r, _n in results for x in r)
    return {
        "candidates": results[0][1],
        "median_ms": statistics.median(lat) * 1000,
        "p95_ms": lat[int(len(lat) * 0.95) - 1] * 1000,
        "rps": len(lat) / elapsed,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--providers", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=10)
    parser.add_argument("--skip-upstream", action="store_true")
    args = parser.parse_args(argv)
    print(
        f"machine: {platform.node()} {platform.processor() or platform.machine()}, "
        f"python {platform.python_version()}"
    )
    kinds = ["ours"] if args.skip_upstream else ["ours", "upstream"]
    for kind in kinds:
        server = GateServer(kind, args.workers, args.threads).start()
        try:
            t0 = time.perf_counter()
            load(server.url, args.providers)
            loaded = time.perf_counter() - t0
            analyze(server.sampler_url)
            hammer(server.url, args.concurrency, args.concurrency * 2)  # warm up
            res = hammer(server.url, args.concurrency, args.requests)
            print(
                f"{kind:9s} providers={args.providers} load={loaded:.1f}s "
                f"candidates={res['candidates']} median={res['median_ms']:.1f}ms "
                f"p95={res['p95_ms']:.1f}ms rps={res['rps']:.1f}",
                flush=True,
            )
        finally:
            server.stop()


if __name__ == "__main__":
    main()
