"""Instances placed per second end to end through the message bus.

Usage (from the top of a checkout; RabbitMQ on 127.0.0.1:5672 with
rabbitmqctl allowed to add a virtual host; PostgreSQL on 127.0.0.1:5432,
user postgres, trust, unless --sqlite):

    python -m benchmarks.bus_throughput [--hosts 1000,5000] [--workers 1,2,4]
        [--instances 400] [--per-request 1] [--sqlite]

For each cluster size: a fresh placement database loaded with that many
nodes (64 VCPU, 256 GiB; two cells) by ``placement-manage inventory load``,
served by ``placement-api``. For each scheduler worker count: that many
``scheduler-worker`` processes, one super conductor and one conductor per
cell (``conductor-worker``), all on a RabbitMQ virtual host of this run, and
``build-submit`` with ``--instances`` instances (``--per-request`` per
request spec, 1-4 VCPU each, no injected failures). The number is
build-submit's: instances finished (placed or failed) per second from its
first cast to its last outcome: record, schedule (candidates, filters,
weighers, claim), hand off, build, finish, outcome back over the bus.
"""

import argparse
import json
import os
import platform
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import requests
import sqlalchemy as sa
import yaml

BIN = os.path.dirname(sys.executable)
PG = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Run:
    """Processes of one measurement, stopped by PID."""

    def __init__(self, workdir, env):
        self.workdir = workdir
        self.env = env
        self.procs = []

    def start(self, name, *args, ready=None):
        log = open(os.path.join(self.workdir, f"{name}.log"), "ab")
        proc = subprocess.Popen(
            [os.path.join(BIN, args[0]), *args[1:]],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
        )
        proc.name = name
        self.procs.append(proc)
        if ready:
            self.wait_for(proc, ready)
        return proc

    def wait_for(self, proc, text, timeout=180):
        path = os.path.join(self.workdir, f"{proc.name}.log")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(path, errors="replace") as f:
                if text in f.read():
                    return
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.name} exited {proc.returncode}: see {path}")
            time.sleep(0.2)
        raise RuntimeError(f"{proc.name} not ready after {timeout} s")

    def stop(self, procs=None):
        procs = self.procs if procs is None else procs
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs = [p for p in self.procs if p not in procs]


def _database(args, workdir, hosts):
    if args.sqlite:
        return f"sqlite:///{workdir}/placement-{hosts}.sqlite", None
    name = f"bus_bench_{hosts}_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(PG, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    return sa.engine.make_url(PG).set(database=name).render_as_string(False), (admin, name)


def _drop(handle):
    if handle is None:
        return
    admin, name = handle
    with admin.connect() as conn:
        conn.exec_driver_sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{name}' AND pid <> pg_backend_pid()"
        )
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}"')


def _specs(path, instances, per_request, seed):
    rng = random.Random(seed)
    with open(path, "w") as out:
        for n in range(instances // per_request):
            out.write(
                json.dumps(
                    {
                        "version": "1.0",
                        "request_id": f"bench-{seed}-{n}",
                        "project_id": "bench",
                        "user_id": "bench",
                        "num_instances": per_request,
                        "resources": {"VCPU": rng.choice((1, 2, 4)), "MEMORY_MB": 1024},
                    }
                )
                + "\n"
            )


def measure(args, workdir, env, conf, workers, seed):
    run = Run(workdir, env)
    cf = ["--config-file", conf]
    try:
        for n in range(workers):
            run.start(f"scheduler-{seed}-{n}", "scheduler-worker", *cf, ready=" serving topic ")
        run.start(f"super-{seed}", "conductor-worker", *cf, ready=" serving topic ")
        for cell in ("cell1", "cell2"):
            run.start(
                f"{cell}-{seed}", "conductor-worker", *cf, "--cell", cell, ready=" serving topic "
            )
        # Warm-up: every process has its connections and caches.
        warm = os.path.join(workdir, f"warm-{seed}.jsonl")
        _specs(warm, 20, 1, seed + 1000)
        subprocess.run(
            [os.path.join(BIN, "build-submit"), *cf, "--requests", warm, "--json"],
            env=env,
            capture_output=True,
            check=True,
            timeout=600,
        )
        path = os.path.join(workdir, f"specs-{seed}.jsonl")
        _specs(path, args.instances, args.per_request, seed)
        res = subprocess.run(
            [
                os.path.join(BIN, "build-submit"),
                *cf,
                "--requests",
                path,
                "--json",
                "--timeout",
                "1200",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=1500,
        )
        summary = json.loads(res.stdout.strip().splitlines()[-1])
        if res.returncode != 0:
            raise RuntimeError(f"build-submit exited {res.returncode}: {summary}")
        return summary
    finally:
        run.stop()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", default="1000,5000")
    p.add_argument("--workers", default="1,2,4")
    p.add_argument("--instances", type=int, default=400)
    p.add_argument("--per-request", type=int, default=1)
    p.add_argument("--sqlite", action="store_true", help="placement on SQLite, not PostgreSQL")
    args = p.parse_args(argv)
    ctl = shutil.which("rabbitmqctl")
    vhost = f"joule-bench-{uuid.uuid4().hex[:10]}"
    subprocess.run([ctl, "add_vhost", vhost], check=True, capture_output=True)
    subprocess.run(
        [ctl, "set_permissions", "-p", vhost, "guest", ".*", ".*", ".*"],
        check=True,
        capture_output=True,
    )
    rows = []
    workdir = tempfile.mkdtemp(prefix="bus-bench-")
    try:
        for hosts in [int(h) for h in args.hosts.split(",")]:
            url, handle = _database(args, workdir, hosts)
            env = dict(os.environ, OS_PLACEMENT_DATABASE__CONNECTION=url)
            inv = os.path.join(workdir, f"inv-{hosts}.yaml")
            with open(inv, "w") as f:
                yaml.safe_dump(
                    {
                        "nodes": [
                            {
                                "node_name_prefix": "bench",
                                "replicas": hosts,
                                "cpu": "EPYC",
                                "cpu_sockets": 2,
                                "cpu_cores": 64,
                                "memory_gib": 256,
                                "gpu_count": 0,
                            }
                        ]
                    },
                    f,
                )
            for cmd in (["db", "sync"], ["inventory", "load", inv, "--cells", "2"]):
                subprocess.run(
                    [os.path.join(BIN, "placement-manage"), *cmd],
                    env=env,
                    check=True,
                    capture_output=True,
                )
            api_run = Run(workdir, env)
            port = _free_port()
            api = api_run.start(f"placement-api-{hosts}", "placement-api", "--port", str(port))
            deadline = time.monotonic() + 120
            while True:
                try:
                    requests.get(f"http://127.0.0.1:{port}/", timeout=5)
                    break
                except requests.RequestException:
                    if time.monotonic() > deadline or api.poll() is not None:
                        raise RuntimeError("placement-api did not start")
                    time.sleep(0.3)
            conf = os.path.join(workdir, f"bench-{hosts}.conf")
            with open(conf, "w") as f:
                f.write(
                    f"[DEFAULT]\ntransport_url = rabbit://guest:guest@127.0.0.1:5672/"
                    f"{vhost}\n[placement]\nauth_type = noauth\n"
                    f"endpoint_override = http://127.0.0.1:{port}\n"
                    f"[conductor]\nsimulated_state_dir = {workdir}/hv-{hosts}\n"
                )
            try:
                for n, workers in enumerate(int(w) for w in args.workers.split(",")):
                    summary = measure(args, workdir, env, conf, workers, hosts * 10 + n)
                    load = os.getloadavg()[0]
                    rows.append((hosts, workers, summary, load))
                    print(
                        f"hosts {hosts} workers {workers}: {summary['instances_per_second']}"
                        f" instances/s ({summary['placed']} placed, {summary['failed']} "
                        f"failed, {summary['seconds']} s, load {load:.1f})",
                        flush=True,
                    )
            finally:
                api_run.stop()
                _drop(handle)
    finally:
        subprocess.run([ctl, "delete_vhost", vhost], capture_output=True)
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"\n{platform.node()} {os.cpu_count()} CPUs, placement on "
        f"{'SQLite' if args.sqlite else 'PostgreSQL'}, {args.instances} instances, "
        f"{args.per_request} per request\n"
    )
    print("| hosts | scheduler workers | instances/s | placed | failed | seconds | load |")
    print("|---|---|---|---|---|---|---|")
    for hosts, workers, s, load in rows:
        print(
            f"| {hosts} | {workers} | {s['instances_per_second']} | {s['placed']} | "
            f"{s['failed']} | {s['seconds']} | {load:.1f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
