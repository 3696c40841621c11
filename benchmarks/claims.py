"""Claims per second on PostgreSQL: ours vs upstream OpenStack Placement 16.0.0.

Usage (from the top of a checkout, PostgreSQL on 127.0.0.1:5432, user postgres, trust):

    python -m benchmarks.claims
        [--workers 4] [--threads 10] [--clients 1,4,16] [--ops 400]
        [--client-processes 4] [--systems ours,upstream,upstream-1x1]
        [--skip-upstream] [--no-serialized] [--workload-class performance]

For each system, in the same run, with the same worker processes and threads:
a fresh database, the API under gunicorn on a free port, four providers
with 64 VCPU each; then for each client count a timed claim/release mix
(successful claims per second), and an over-commit probe: 16 clients make
160 one-VCPU claims against one 8-VCPU provider (no releases) while a
sampler reads the usage; over-commit = VCPU allocated beyond 8 (at the end,
and the worst sample). The clients run in ``--client-processes`` processes
(threads within each) so the load driver is not the bottleneck. Upstream
``--workload-class`` sends that extension field with every claim (ours only:
a performance claim also takes placement's eco check of the providers' roots).
Upstream runs from its own virtualenv (tools/upstream.py: its own
placement-manage and wsgi app under gunicorn); nothing of it is copied here.
"""

import argparse
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import requests
import sqlalchemy as sa

from benchmarks import claimload
from tools import upstream

ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
UPSTREAM_VENV = upstream.venv()
HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fresh_database(name):
    admin = sa.create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{name}' AND pid <> pg_backend_pid()"
        )
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}"')
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    admin.dispose()
    return sa.engine.make_url(ADMIN_URL).set(database=name)


def drop_database(name):
    admin = sa.create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{name}' AND pid <> pg_backend_pid()"
        )
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}"')
    admin.dispose()


def wait_up(url, proc, log_path):
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            if requests.get(url + "/", timeout=10).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.3)
    proc.kill()
    raise SystemExit(f"server did not start:\n{open(log_path).read()[-3000:]}")


class Server:
    """One API under test: ours (placement-api) or upstream (gunicorn + its wsgi app)."""

    def __init__(self, kind, workers, threads):
        self.kind = kind
        self.workers = workers
        self.threads = threads
        self.dbname = f"bench_claims_{kind.replace('-', '_')}_{os.getpid()}"
        self.tmp = tempfile.mkdtemp(prefix=f"bench-{kind}-")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self):
        url = fresh_database(self.dbname)
        self.sampler_url = url.render_as_string(hide_password=False)
        log_path = os.path.join(self.tmp, "api.log")
        log = open(log_path, "w")
        conf_path = os.path.join(self.tmp, "placement.conf")
        if self.kind == "ours":  # upstream and upstream-1x1 share the other branch
            with open(conf_path, "w") as f:
                f.write(
                    f"[placement_database]\nconnection = {self.sampler_url}\n"
                    "sync_on_startup = true\n[api]\nauth_strategy = noauth2\n"
                )
            cmd = [
                sys.executable,
                "-m",
                "placement.cmd.api",
                "--config-file",
                conf_path,
                "--port",
                str(self.port),
                "--workers",
                str(self.workers),
                "--threads",
                str(self.threads),
            ]
            env = dict(os.environ)
        else:
            pg2 = url.set(drivername="postgresql+psycopg2").render_as_string(hide_password=False)
            with open(conf_path, "w") as f:
                f.write(
                    f"[placement_database]\nconnection = {pg2}\n[api]\nauth_strategy = noauth2\n"
                )
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            env["OS_PLACEMENT_CONFIG_DIR"] = self.tmp
            subprocess.run(
                [f"{UPSTREAM_VENV}/bin/placement-manage", "--config-file", conf_path, "db", "sync"],
                check=True,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            cmd = [
                f"{UPSTREAM_VENV}/bin/gunicorn",
                "--workers",
                str(self.workers),
                "--threads",
                str(self.threads),
                "--worker-class",
                "gthread",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--timeout",
                "120",
                "placement.wsgi.api:application",
            ]
        # cwd outside the checkout: our package is also named "placement".
        self.proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=self.tmp if self.kind != "ours" else None,
        )
        wait_up(self.url, self.proc, log_path)
        return self

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        drop_database(self.dbname)
        shutil.rmtree(self.tmp, ignore_errors=True)


def make_provider(base_url, name, vcpu):
    s = requests.Session()
    s.headers.update(claimload.HEADERS)
    resp = s.post(f"{base_url}/resource_providers", json={"name": name}, timeout=30)
    resp.raise_for_status()
    rp = resp.json()
    resp = s.put(
        f"{base_url}/resource_providers/{rp['uuid']}/inventories",
        json={
            "resource_provider_generation": rp["generation"],
            "inventories": {"VCPU": {"total": vcpu, "max_unit": vcpu}},
        },
        timeout=30,
    )
    resp.raise_for_status()
    return rp["uuid"]


def release_all(base_url, consumers):
    s = requests.Session()
    s.headers.update(claimload.HEADERS)
    for consumer in consumers:
        s.delete(f"{base_url}/allocations/{consumer}", timeout=60)


def bench(server, clients_list, ops, processes, workload_class=None):
    results = {}
    providers = [make_provider(server.url, f"tput-{i}", 64) for i in range(4)]
    for clients in clients_list:
        per_client = max(1, ops // clients)
        # Warm the connection pools of every worker first.
        warm = claimload.run(
            server.url,
            providers,
            clients,
            4,
            seed=99,
            processes=processes,
            workload_class=workload_class,
        )
        release_all(server.url, warm.held)
        outcome = claimload.run(
            server.url,
            providers,
            clients,
            per_client,
            release_probability=0.4,
            max_held_per_client=4,
            seed=clients,
            processes=processes,
            workload_class=workload_class,
        )
        release_all(server.url, outcome.held)
        results[clients] = {
            "claims_per_s": outcome.claims_ok / outcome.elapsed,
            "claims": outcome.claims_ok,
            "refused": outcome.claims_refused,
            "bad": len(outcome.bad),
            "elapsed": outcome.elapsed,
        }
        print(f"  {server.kind} {clients:>2} clients: {results[clients]}", flush=True)
    # Over-commit probe: 160 one-VCPU claims from 16 clients on one 8-VCPU provider.
    target = make_provider(server.url, "probe", 8)
    sampler = claimload.UsageSampler(server.sampler_url, [target], interval=0.005)
    sampler.start()
    outcome = claimload.run(
        server.url,
        [target],
        16,
        10,
        release_probability=0.0,
        max_held_per_client=100,
        seed=5,
        processes=processes,
        workload_class=workload_class,
    )
    sampler.stop()
    final = sampler.read()[target][1]
    results["probe"] = {
        "allocated": final,
        "overcommit": max(0, final - 8),
        "worst_sample_excess": max(0, sampler.max_excess),
        "granted": outcome.claims_ok,
        "bad": len(outcome.bad),
    }
    print(f"  {server.kind} probe: {results['probe']}", flush=True)
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=10)
    parser.add_argument("--clients", default="1,4,16")
    parser.add_argument(
        "--ops", type=int, default=400, help="claims+releases per client count (split over clients)"
    )
    parser.add_argument(
        "--client-processes",
        type=int,
        default=4,
        help="client processes the clients are spread over (threads within each)",
    )
    parser.add_argument(
        "--systems", default=None, help="comma-separated subset of ours,upstream,upstream-1x1"
    )
    parser.add_argument("--skip-upstream", action="store_true")
    parser.add_argument(
        "--workload-class",
        choices=["performance", "standard"],
        help="send this extension field with every claim (ours only)",
    )
    parser.add_argument(
        "--no-serialized",
        action="store_true",
        help="skip upstream with 1 worker x 1 thread (its only correct setting)",
    )
    args = parser.parse_args(argv)
    clients_list = [int(c) for c in args.clients.split(",")]
    kinds = ["ours"] if args.skip_upstream else ["ours", "upstream"]
    if not args.skip_upstream and not args.no_serialized:
        kinds.append("upstream-1x1")
    if args.systems:
        kinds = args.systems.split(",")
    if args.workload_class and kinds != ["ours"]:
        parser.error("--workload-class is an extension: use it with --systems ours")
    print(
        f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} CPUs, "
        f"{platform.python_implementation()} {platform.python_version()}; "
        f"workers={args.workers} threads={args.threads} "
        f"client processes={args.client_processes}; load average "
        f"{os.getloadavg()[0]:.1f}",
        flush=True,
    )
    all_results = {}
    for kind in kinds:
        if kind == "upstream-1x1":
            server = Server("upstream", 1, 1)
            server.kind = kind
            server.start()
        else:
            server = Server(kind, args.workers, args.threads).start()
        try:
            all_results[kind] = bench(
                server, clients_list, args.ops, args.client_processes, args.workload_class
            )
        finally:
            server.stop()
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    print()
    print("| clients | " + " | ".join(f"{k} claims/s" for k in kinds) + " |")
    print("|---|" + "---|" * len(kinds))
    for clients in clients_list:
        print(
            f"| {clients} | "
            + " | ".join(f"{all_results[k][clients]['claims_per_s']:.1f}" for k in kinds)
            + " |"
        )
    probes = [all_results[k]["probe"] for k in kinds]
    print(
        "| over-commit probe (VCPU beyond 8 at end / worst sample) | "
        + " | ".join(f"{p['overcommit']} / {p['worst_sample_excess']:.0f}" for p in probes)
        + " |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
