"""Upstream's gate workload for GET /allocation_candidates: ours vs upstream 16.0.0.

Usage (from the top of a checkout, PostgreSQL on 127.0.0.1:5432, user postgres, trust):

    python -m benchmarks.candidates_gate [--providers 1000]
        [--concurrency 10] [--requests 400] [--workers 2] [--threads 10]
        [--skip-upstream] [--client python|ab] [--baseline CHECKOUT]

For each system, in the same run, with the same gunicorn workers/threads on
the same PostgreSQL server: a fresh database, ``placeload`` (PyPI, from the
upstream virtualenv of tools/upstream.py) creates the providers with
inventory, aggregates and traits through the API, then ``--concurrency`` clients send the gate query
(the one upstream's perfload job times) ``--requests`` times in total, after
an ``ANALYZE`` of the database.
Prints median / p95 latency and requests per second.

``--client ab``: ApacheBench (``ab -c <concurrency> -n <requests>``, apache2-utils)
sends the requests instead of Python threads, a lighter client on a shared
machine; its median and 95% are its own percentiles.
``--baseline CHECKOUT``: also run our API from another checkout of this
project (such as the commit before a change), as "baseline", in the same run.
"""

import argparse
import concurrent.futures
import os
import platform
import re
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
    def __init__(self, kind, workers, threads, pythonpath=None):
        # "baseline" is our API too, imported from another checkout.
        super().__init__("ours" if kind == "baseline" else kind, workers, threads)
        self.dbname = f"bench_candidates_{kind}"
        self.pythonpath = pythonpath

    def start(self):
        if self.pythonpath is None:
            return super().start()
        # The API's process imports ``placement`` from its working directory
        # first (python -m), so it starts in the baseline checkout.
        saved_cwd, saved_path = os.getcwd(), os.environ.get("PYTHONPATH")
        os.chdir(self.pythonpath)
        os.environ["PYTHONPATH"] = os.path.abspath(self.pythonpath)
        try:
            return super().start()
        finally:
            os.chdir(saved_cwd)
            if saved_path is None:
                del os.environ["PYTHONPATH"]
            else:
                os.environ["PYTHONPATH"] = saved_path


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


def hammer_ab(url, concurrency, total):
    """The same requests sent by ApacheBench; its own median and 95%."""
    cmd = ["ab", "-q", "-c", str(concurrency), "-n", str(total)]
    for name, value in HEADERS.items():
        cmd += ["-H", f"{name}: {value}"]
    out = subprocess.run(
        [*cmd, url + GATE_QUERY], check=True, capture_output=True, text=True
    ).stdout

    def field(pattern):
        return float(re.search(pattern, out, re.M).group(1))

    # A body of another length is no failure here (summaries list their
    # classes in the database's order); an error status or a lost connection is.
    assert "Non-2xx responses" not in out, out
    lost = re.search(r"Connect: (\d+), Receive: (\d+), Length: \d+, Exceptions: (\d+)", out)
    assert lost is None or not any(int(n) for n in lost.groups()), out
    body = requests.get(url + GATE_QUERY, headers=HEADERS, timeout=120).json()
    return {
        "candidates": len(body["allocation_requests"]),
        "median_ms": field(r"^\s+50%\s+(\d+)"),
        "p95_ms": field(r"^\s+95%\s+(\d+)"),
        "rps": field(r"^Requests per second:\s+([0-9.]+)"),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--providers", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=10)
    parser.add_argument("--skip-upstream", action="store_true")
    parser.add_argument("--client", choices=("python", "ab"), default="python")
    parser.add_argument(
        "--baseline", metavar="CHECKOUT", help="also run our API from this checkout"
    )
    args = parser.parse_args(argv)
    run = hammer_ab if args.client == "ab" else hammer
    print(
        f"machine: {platform.node()} {platform.processor() or platform.machine()}, "
        f"python {platform.python_version()}"
    )
    kinds = ["ours"] if args.skip_upstream else ["ours", "upstream"]
    if args.baseline:
        kinds.insert(1, "baseline")
    for kind in kinds:
        server = GateServer(
            kind, args.workers, args.threads, args.baseline if kind == "baseline" else None
        ).start()
        try:
            t0 = time.perf_counter()
            load(server.url, args.providers)
            loaded = time.perf_counter() - t0
            analyze(server.sampler_url)
            hammer(server.url, args.concurrency, args.concurrency * 2)  # warm up
            res = run(server.url, args.concurrency, args.requests)
            print(
                f"{kind:9s} client={args.client} providers={args.providers} load={loaded:.1f}s "
                f"candidates={res['candidates']} median={res['median_ms']:.1f}ms "
                f"p95={res['p95_ms']:.1f}ms rps={res['rps']:.1f}",
                flush=True,
            )
        finally:
            server.stop()


if __name__ == "__main__":
    main()
