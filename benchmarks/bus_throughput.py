"""Instances placed per second end to end through the message bus.

Usage (from the top of a checkout; RabbitMQ on 127.0.0.1:5672 with
rabbitmqctl allowed to add a virtual host; PostgreSQL on 127.0.0.1:5432,
user postgres, trust, unless --sqlite):

    python -m benchmarks.bus_throughput [--inventory 1000,5k] [--workers 1,2,4]
        [--batch-sizes 1,64] [--host-cache-seconds 0,10] [--instances 1000]
        [--workload mixed|small] [--threads N] [--calls-in-flight N]
        [--call-timeout S] [--anti-affinity 0.1] [--per-request 1] [--seed 1]
        [--sqlite] [--expect-min RATE] [--rate PER_SECOND --duration SECONDS]
        [--latency-log PATH]

Every service runs with its shipped defaults (the scheduler workers' and
the super conductor's threads follow their batch options: scheduler.conf,
conductor.conf) unless an option here says otherwise; the options the run
overrides are printed first. ``--expect-min RATE`` exits 1 with one line
on stderr when the best row places fewer instances/s than RATE.

For each inventory: a fresh placement database loaded by ``placement-manage
inventory load`` (two cells), served by ``placement-api``. An inventory is
``41`` or ``5k`` (the clusters shipped in powerpolicy/data/, as
``placement-sim --inventory`` names them), a number N (N identical nodes of
64 VCPU and 256 GiB), or a YAML file in their format. For each scheduler
worker count and each ``[scheduler] batch_size`` (default: the shipped
one only; 1: every call scheduled alone, as before batching; the conductors
then call the scheduler once per request without waiting for company, every
service keeps 8 executor threads and build-submit casts one message per
request, as before this issue), measured in the same run one after the other:
that many ``scheduler-worker`` processes, one super conductor and one
conductor per cell (``conductor-worker``), all on a RabbitMQ virtual host of
this run, and ``build-submit`` with ``--instances`` instances cast at once
(``--per-request`` per request spec).

Workloads (seeded): ``mixed`` (the default; ``issue12`` is its old name) is
the mix of performance and standard work: 30% performance requests
of 8-32 VCPU, 32-64 GiB and, with the inventory's share of GPU nodes as
probability, 1-2 PGPU; 70% standard requests of 2-8 VCPU, 4-16 GiB.
``small`` is 1-4 VCPU, 1 GiB (the first measurements). ``--anti-affinity
SHARE`` puts that share of the instances into anti-affinity server groups of
10 (one member per host).

``--rate R --duration S`` measures a steady load instead of a burst:
build-submit offers R instances per second for S seconds, and p50/p99 are
from each request's own cast to its outcome (the latency an instance sees
when the system keeps up, where a burst measures queueing).
``--latency-log PATH`` appends each placed instance's outcome time and
latency to PATH, to see whether the slow ones come together (a stall) or
spread over the run (queueing).

Per row: instances/s (build-submit's: instances finished, placed or failed,
from its first cast to its last outcome); p50/p99 latency from the cast to
the instance's outcome reaching build-submit (every instance is cast at the
start, so this includes the queueing of a burst); placement requests per
instance (placement's /metrics, every route, the measured run only);
claim races lost per 1,000 placements (the scheduler workers' /metrics);
CPU per instance of the run's processes (/proc, Linux: placement-api,
scheduler workers, super conductor, cell conductors, the database's
PostgreSQL backends, RabbitMQ, build-submit) and the share of the machine's
CPU that other processes used meanwhile (a loaded machine shows there);
and, from the database afterwards, over-committed inventories (must be 0)
and instances holding allocations on more than one host (must be 0). On a
heterogeneous inventory, where the weighers legitimately prefer the larger
hosts, it also prints where each row's instances went per hardware family
(hosts, hosts used, instances). ``--host-cache-seconds`` adds a dimension:
each batching row once per value of ``[scheduler] host_cache_seconds`` (0:
every batch walks the candidates, as before the host cache).
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

import powerpolicy
from joule import inventory as inventory_mod

BIN = os.path.dirname(sys.executable)
PG = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
# The shipped inventories, by the names placement-sim gives them.
DATA = os.path.join(os.path.dirname(powerpolicy.__file__), "data")
INVENTORIES = {"41": "cluster-nodes-41.yaml", "5k": "cluster-nodes-5k.yaml"}
GIB = 1024
ANTI_AFFINITY_GROUP_SIZE = 10


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

    def start(self, name, *args, ready=None, env=None):
        log = open(os.path.join(self.workdir, f"{name}.log"), "ab")
        proc = subprocess.Popen(
            [os.path.join(BIN, args[0]), *args[1:]],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(self.env, **(env or {})),
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


def _database(args, workdir, label):
    if args.sqlite:
        return f"sqlite:///{workdir}/placement-{label}.sqlite", None
    name = f"bus_bench_{label}_{uuid.uuid4().hex[:8]}".lower()
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


def _inventory(name, workdir):
    """(label, path of the YAML file, share of nodes with GPUs)."""
    if name in INVENTORIES:
        path = os.path.join(DATA, INVENTORIES[name])
    elif name.isdigit():
        path = os.path.join(workdir, f"inv-{name}.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(
                {
                    "nodes": [
                        {
                            "node_name_prefix": "bench",
                            "replicas": int(name),
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
    else:
        path = name
    nodes = inventory_mod.load(path)
    gpu = sum(1 for n in nodes if n.hardware.get("gpu_count")) / len(nodes)
    label = name if (name in INVENTORIES or name.isdigit()) else os.path.basename(name)
    return label, path, len(nodes), gpu


def _spec(rng, n, seed, args, gpu_share):
    if args.workload == "small":
        resources = {"VCPU": rng.choice((1, 2, 4)), "MEMORY_MB": 1024}
        wc = "standard"
    elif rng.random() < 0.3:
        wc = "performance"
        resources = {"VCPU": rng.randint(8, 32), "MEMORY_MB": rng.randint(32, 64) * GIB}
        if rng.random() < gpu_share:
            resources["PGPU"] = rng.randint(1, 2)
    else:
        wc = "standard"
        resources = {"VCPU": rng.randint(2, 8), "MEMORY_MB": rng.randint(4, 16) * GIB}
    return {
        "version": "1.0",
        "request_id": f"bench-{seed}-{n}",
        "project_id": "bench",
        "user_id": "bench",
        "workload_class": wc,
        "num_instances": args.per_request,
        "resources": resources,
    }


def _smallest_specs(args, seed, gpu_share):
    """One request of each kind the workload makes, at its smallest amounts.

    A scheduler worker walks a kind for the smallest amounts it has seen of
    it (scheduler.host_cache), so a request smaller than all before it reads
    the whole cluster again while its kind waits. In a run's first seconds
    new minima come one after another: the warm-up offers them first, so
    the measured run starts where a worker that has been up a while is."""
    if args.workload == "small":
        kinds = [("standard", {"VCPU": 1, "MEMORY_MB": 1024})]
    else:
        kinds = [
            ("standard", {"VCPU": 2, "MEMORY_MB": 4 * GIB}),
            ("performance", {"VCPU": 8, "MEMORY_MB": 32 * GIB}),
        ]
        if gpu_share:
            kinds.append(("performance", {"VCPU": 8, "MEMORY_MB": 32 * GIB, "PGPU": 1}))
    return [
        {
            "version": "1.0",
            "request_id": f"bench-{seed}-min-{n}",
            "project_id": "bench",
            "user_id": "bench",
            "workload_class": wc,
            "num_instances": 1,
            "resources": resources,
        }
        for n, (wc, resources) in enumerate(kinds)
    ]


def _specs(path, args, instances, seed, gpu_share, placement=None, extra=()):
    """Write the request specs; with ``placement`` (its URL) put the
    anti-affinity share into server groups created there."""
    rng = random.Random(seed)
    count = instances // args.per_request
    specs = [_spec(rng, n, seed, args, gpu_share) for n in range(count)]
    if placement and args.anti_affinity:
        chosen = rng.sample(range(count), round(count * args.anti_affinity))
        for start in range(0, len(chosen), ANTI_AFFINITY_GROUP_SIZE):
            resp = requests.post(
                f"{placement}/server_groups",
                json={
                    "name": f"bench-{seed}-{start}",
                    "policy": "anti-affinity",
                    "project_id": "bench",
                    "user_id": "bench",
                },
                headers={"x-auth-token": "admin", "openstack-api-version": "placement latest"},
                timeout=30,
            )
            resp.raise_for_status()
            group = resp.json()["uuid"]
            for n in chosen[start : start + ANTI_AFFINITY_GROUP_SIZE]:
                specs[n].update(version="1.1", server_group=group)
    with open(path, "w") as out:
        for spec in [*extra, *specs]:
            out.write(json.dumps(spec) + "\n")


def _scrape(url, name, by=None):
    """The sum of every sample of metric ``name`` at ``url`` (Prometheus
    text); with ``by`` (label names), a dict of sums per those labels' values."""
    total = 0.0
    out = {}
    for line in requests.get(url, timeout=30).text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            metric = line.split("{", 1)[0].split(" ", 1)[0]
            if metric != name:
                continue
            value = float(line.rsplit(" ", 1)[1])
            total += value
            if by:
                labels = dict(
                    part.split("=", 1)
                    for part in line.split("{", 1)[1].split("}", 1)[0].split(",")
                    if "=" in part
                )
                key = " ".join(labels.get(b, "").strip('"') for b in by)
                out[key] = out.get(key, 0.0) + value
    return out if by else total


def _walks(urls):
    """Kept walks read so far by the workers at ``urls``, {life: count}
    (scheduler.host_cache: 'full' or 'shared')."""
    out = {}
    for url in urls:
        for life, count in _scrape(url, "joule_scheduler_kept_walks_total", ("life",)).items():
            out[life] = out.get(life, 0.0) + count
    return out


def _percentile(values, q):
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def _submit(cf, path, env, per_message=None, rate=None):
    """Run build-submit; return (summary, [latency of each placed instance]).

    A burst (no ``rate``): every instance is cast at the start, so the
    latency is from the first cast. A steady load (``rate`` instances per
    second, build-submit --rate): from the cast of its own request, as
    build-submit reports it on each outcome."""
    start = time.monotonic()
    extra = [] if per_message is None else ["--requests-per-message", str(per_message)]
    if rate:
        extra += ["--rate", str(rate)]
    proc = subprocess.Popen(
        [
            os.path.join(BIN, "build-submit"),
            *cf,
            "--requests",
            path,
            "--json",
            "--timeout",
            "1800",
            *extra,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    arrivals = []
    own = []  # build-submit's seconds from each request's cast
    last = None
    for line in proc.stdout:
        now = time.monotonic()
        last = line
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if item.get("status") == "placed" and "instance_uuid" in item:
            arrivals.append(now)
            own.append(item.get("seconds"))
    proc.wait(timeout=60)
    summary = json.loads(last)
    if proc.returncode != 0:
        raise RuntimeError(f"build-submit exited {proc.returncode}: {summary}")
    # build-submit's seconds run from its first cast to its last outcome:
    # that cast is the origin (its start-up is not the system's latency).
    if rate:
        pairs = [(t - start, x) for t, x in zip(arrivals, own, strict=True) if x is not None]
        return summary, [x for _t, x in pairs], pairs
    origin = (max(arrivals) - summary["seconds"]) if arrivals else start
    latencies = [t - origin for t in arrivals]
    return summary, latencies, [(t - start, x) for t, x in zip(arrivals, latencies, strict=True)]


def _check(url, prefix):
    """(over-committed inventories, instances on more than one host) in the database."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            over = conn.exec_driver_sql(
                "SELECT COUNT(*) FROM inventories i JOIN (SELECT resource_provider_id, "
                "resource_class_id, SUM(used) AS used FROM allocations GROUP BY "
                "resource_provider_id, resource_class_id) a ON a.resource_provider_id = "
                "i.resource_provider_id AND a.resource_class_id = i.resource_class_id "
                "WHERE a.used > (i.total - i.reserved) * i.allocation_ratio"
            ).scalar()
            doubled = conn.exec_driver_sql(
                "SELECT COUNT(*) FROM (SELECT a.consumer_id FROM allocations a JOIN "
                "resource_providers rp ON rp.id = a.resource_provider_id GROUP BY "
                "a.consumer_id HAVING COUNT(DISTINCT COALESCE(rp.root_provider_id, rp.id)) > 1) x"
            ).scalar()
            placed = conn.execute(
                sa.text(
                    "SELECT COUNT(*) FROM build_requests WHERE status = 'placed' "
                    "AND request_id LIKE :prefix"
                ),
                {"prefix": prefix + "%"},
            ).scalar()
            # Instances of this row per host, with the host's labels.
            per_host = conn.execute(
                sa.text(
                    "SELECT n.labels, COUNT(DISTINCT b.instance_uuid), rp.id FROM build_requests b "
                    "JOIN resource_providers rp ON rp.uuid = b.host_uuid "
                    "JOIN nodes n ON n.resource_provider_id = rp.id "
                    "WHERE b.status = 'placed' AND b.request_id LIKE :prefix "
                    "GROUP BY rp.id, n.labels"
                ),
                {"prefix": prefix + "%"},
            ).all()
            hosts = conn.exec_driver_sql("SELECT labels FROM nodes").all()
            roots = [
                r[0]
                for r in conn.exec_driver_sql(
                    "SELECT id FROM resource_providers WHERE id = root_provider_id ORDER BY id"
                )
            ]
    finally:
        engine.dispose()
    return over, doubled, placed, _families(per_host, hosts), _fifths(per_host, roots)


def _fifths(per_host, roots):
    """(distinct hosts used, [share of the instances on each fifth of the
    hosts by id, %]): the no-herding, no-fill-in-id-order check."""
    rank = {rp_id: n for n, rp_id in enumerate(roots)}
    fifths = [0] * 5
    total = 0
    for _labels, instances, rp_id in per_host:
        fifths[min(4, rank[rp_id] * 5 // max(1, len(roots)))] += instances
        total += instances
    return len(per_host), [round(100.0 * f / max(1, total), 1) for f in fifths]


def _families(per_host, hosts):
    """{family: (hosts, hosts used, instances)}: where the weighers sent the
    row's instances on a heterogeneous cluster (they prefer larger hosts)."""
    out = {}
    for (labels,) in hosts:
        family = json.loads(labels or "{}").get("family", "-")
        count, used, instances = out.get(family, (0, 0, 0))
        out[family] = (count + 1, used, instances)
    for labels, instances, _rp_id in per_host:
        family = json.loads(labels or "{}").get("family", "-")
        count, used, placed = out.get(family, (0, 0, 0))
        out[family] = (count, used + 1, placed + instances)
    return out


def _overrides(args, workers, batch_size, host_cache):
    """(scheduler workers' env, conductors' env): only what the command line
    asks for; everything else is the services' shipped default."""
    sched, cond = {}, {}
    if batch_size is not None:
        sched["OS_SCHEDULER__BATCH_SIZE"] = str(batch_size)
    if host_cache is not None:
        sched["OS_SCHEDULER__HOST_CACHE_SECONDS"] = f"{host_cache:g}"
    if batch_size == 1:
        # As before batching: every service at 8 threads (64 would be 64
        # concurrent walks per scheduler worker), and on the conductors' side
        # one select_destinations call per request, no waiting for company.
        sched["OS_DEFAULT__EXECUTOR_THREAD_POOL_SIZE"] = "8"
        cond["OS_DEFAULT__EXECUTOR_THREAD_POOL_SIZE"] = "8"
        cond["OS_CONDUCTOR__SCHEDULE_BATCH_SIZE"] = "1"
        cond["OS_CONDUCTOR__BATCH_WINDOW_MS"] = "0"
    elif args.threads is not None:
        sched["OS_DEFAULT__EXECUTOR_THREAD_POOL_SIZE"] = str(args.threads)
        cond["OS_DEFAULT__EXECUTOR_THREAD_POOL_SIZE"] = str(args.threads)
    if args.calls_in_flight is not None and batch_size != 1:
        cond["OS_CONDUCTOR__SCHEDULE_CALLS_IN_FLIGHT"] = str(
            max(2, workers) if args.calls_in_flight == "workers" else args.calls_in_flight
        )
    return sched, cond


def _override_lines(args, workers, batch_size, host_cache):
    """What a row overrides, as 'section option = value' lines."""
    sched, cond = _overrides(args, workers, batch_size, host_cache)
    lines = []
    for who, env in (("scheduler-worker", sched), ("conductor-worker", cond)):
        for key, value in sorted(env.items()):
            section, option = key[len("OS_") :].split("__", 1)
            section = section if section == "DEFAULT" else section.lower()
            lines.append(f"{who}: [{section}] {option.lower()} = {value}")
    if args.call_timeout is not None:
        lines.append(f"every service: [rpc] call_timeout = {args.call_timeout}")
    return lines


def _proc_cpu(pid):
    """utime + stime of a process in seconds, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _machine_cpu():
    """(busy, total) CPU seconds of the whole machine so far (/proc/stat)."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:9]]
    total = sum(values) / os.sysconf("SC_CLK_TCK")
    idle = (values[3] + values[4]) / os.sysconf("SC_CLK_TCK")
    return total - idle, total


class CpuMeter:
    """CPU seconds of this run's processes while a row is measured, by role,
    read from /proc every second (a process that exits keeps its last
    reading): the descendants of this benchmark (placement-api and its
    workers, the services, build-submit), the PostgreSQL backends of the
    row's database, and RabbitMQ (which other users of the broker share). Also
    the share of the machine's CPU that everything else used meanwhile: on a
    machine other work keeps busy, the figures are not the code's. Empty on
    a system without /proc."""

    ROLES = (
        ("placement-api", "placement"),
        ("scheduler-worker", "scheduler"),
        ("build-submit", "build-submit"),
    )

    def __init__(self, root, db_name=None):
        self.root = str(root)
        self.db_name = db_name
        self.enabled = os.path.exists("/proc/stat")
        self._first = {}
        self._last = {}
        self._done = None
        self._thread = None

    def _role(self, pid, cmd, parents):
        if cmd.startswith("postgres"):
            return "postgresql" if self.db_name and f" {self.db_name} " in cmd else None
        if "beam.smp" in cmd:
            return "rabbitmq"
        up, hops = pid, 0
        while up in parents and hops < 64:
            if up == self.root:
                break
            up, hops = parents[up], hops + 1
        if up != self.root or pid == self.root:
            return None
        if "conductor-worker" in cmd:
            return "cell conductors" if "--cell" in cmd else "super conductor"
        for name, role in self.ROLES:
            if name in cmd:
                return role
        return "other"

    def _sample(self):
        procs = {}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
                with open(f"/proc/{pid}/stat") as f:
                    ppid = f.read().rsplit(")", 1)[1].split()[1]
            except OSError:
                continue
            procs[pid] = (cmd, ppid)
        parents = {pid: ppid for pid, (_cmd, ppid) in procs.items()}
        for pid, (cmd, _ppid) in procs.items():
            role = self._role(pid, cmd, parents)
            if role is None:
                continue
            seconds = _proc_cpu(pid)
            if seconds is None:
                continue
            self._first.setdefault(pid, (role, seconds if self._thread is None else 0.0))
            self._last[pid] = (role, seconds)

    def start(self):
        if not self.enabled:
            return
        import threading

        self._machine = _machine_cpu()
        self._sample()
        self._done = threading.Event()

        def loop():
            while not self._done.wait(1.0):
                self._sample()

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()

    def stop(self):
        """({role: CPU seconds}, share of the machine other processes used)."""
        if not self.enabled or self._thread is None:
            return {}, None
        self._done.set()
        self._thread.join()
        self._sample()
        busy0, total0 = self._machine
        busy1, total1 = _machine_cpu()
        by = {}
        for pid, (role, seconds) in self._last.items():
            by[role] = by.get(role, 0.0) + seconds - self._first[pid][1]
        ours = sum(by.values())
        total = max(1e-9, total1 - total0)
        return by, max(0.0, (busy1 - busy0) - ours) / total


def _cpu_text(r):
    cpu = r.get("cpu_ms") or {}
    if not cpu:
        return "CPU per instance not measured (no /proc)"
    order = [
        "placement",
        "scheduler",
        "super conductor",
        "cell conductors",
        "postgresql",
        "rabbitmq",
        "build-submit",
        "other",
    ]
    parts = [f"{k} {cpu[k]:.1f}" for k in order if k in cpu]
    return (
        f"CPU ms/instance {' / '.join(parts)} = {sum(cpu.values()):.1f}; other processes "
        f"used {100.0 * (r['others_share'] or 0.0):.0f} % of the machine's CPU"
    )


def measure(args, workdir, env, conf, workers, batch_size, seed, inv, host_cache=None):
    run = Run(workdir, env)
    cf = ["--config-file", conf]
    sched_env, conductor_env = _overrides(args, workers, batch_size, host_cache)
    ports = []
    try:
        for n in range(workers):
            port = _free_port()
            ports.append(port)
            run.start(
                f"scheduler-{seed}-{n}",
                "scheduler-worker",
                *cf,
                ready=" serving topic ",
                env=dict(sched_env, OS_METRICS__PORT=str(port)),
            )
        run.start(
            f"super-{seed}", "conductor-worker", *cf, ready=" serving topic ", env=conductor_env
        )
        for cell in ("cell1", "cell2"):
            run.start(
                f"{cell}-{seed}",
                "conductor-worker",
                *cf,
                "--cell",
                cell,
                ready=" serving topic ",
                env=conductor_env,
            )
        # Warm-up: every process has its connections and caches, and every
        # kind's walk its smallest amounts (_smallest_specs).
        warm = os.path.join(workdir, f"warm-{seed}.jsonl")
        _specs(
            warm,
            argparse.Namespace(**{**vars(args), "anti_affinity": 0}),
            20,
            seed + 1000,
            inv["gpu"],
            extra=_smallest_specs(args, seed + 1000, inv["gpu"]),
        )
        _submit(cf, warm, env)
        path = os.path.join(workdir, f"specs-{seed}.jsonl")
        _specs(path, args, args.instances, seed, inv["gpu"], placement=inv["url"])
        metrics = f"{inv['url']}/metrics"
        races = [f"http://127.0.0.1:{p}/metrics" for p in ports]
        by = ("method", "route")
        calls_before = _scrape(metrics, "placement_api_requests_total", by)
        races_before = sum(_scrape(u, "joule_scheduler_races_lost_total") for u in races)
        walks_before = _walks(races)
        cpu = CpuMeter(os.getpid(), inv.get("db_name"))
        cpu.start()
        # Before batching a submitter cast one message per request.
        try:
            summary, latencies, timeline = _submit(
                cf, path, env, 1 if batch_size == 1 else None, rate=args.rate
            )
        finally:
            cpu_by, cpu_others = cpu.stop()
        if args.latency_log:
            with open(args.latency_log, "a") as out:
                for arrived, latency in timeline:
                    out.write(f"{workers} {arrived:.3f} {latency:.3f}\n")
        per_route = {
            k: v - calls_before.get(k, 0.0)
            for k, v in _scrape(metrics, "placement_api_requests_total", by).items()
        }
        calls = sum(per_route.values())
        lost = sum(_scrape(u, "joule_scheduler_races_lost_total") for u in races) - races_before
        walks = {k: v - walks_before.get(k, 0.0) for k, v in _walks(races).items()}
        over, doubled, placed_db, families, (distinct, fifths) = _check(inv["db"], f"bench-{seed}-")
        placed = summary["placed"]
        done = max(1, placed + summary["failed"])
        routes = sorted(per_route.items(), key=lambda kv: -kv[1])
        return {
            "cpu_ms": {k: 1000.0 * v / done for k, v in cpu_by.items()},
            "others_share": cpu_others,
            "routes": ", ".join(f"{k} {v / done:.2f}" for k, v in routes if v > 0),
            **summary,
            "p50": _percentile(latencies, 0.5),
            "p99": _percentile(latencies, 0.99),
            "placement_per_instance": calls / done,
            "races_per_1000": 1000.0 * lost / max(1, placed),
            "kept_walks": walks,
            "over_committed": over,
            "multi_host": doubled,
            "placed_recorded": placed_db,
            "families": families,
            "distinct_hosts": distinct,
            "fifths": fifths,
        }
    finally:
        run.stop()


def _walks_text(r):
    walks = r.get("kept_walks") or {}
    full, shared = int(walks.get("full", 0)), int(walks.get("shared", 0))
    return f"{full + shared} ({shared} kept a quarter as long)"


def _check_args(p, args):
    """Refuse what cannot be measured (argparse's exit 2); --duration sets --instances."""
    if args.duration is not None:
        if not args.rate:
            p.error("--duration needs --rate")
        args.instances = max(1, int(round(args.rate * args.duration)))
    if not 0.0 <= args.anti_affinity <= 1.0:
        p.error("--anti-affinity is a share, 0 to 1")
    if args.calls_in_flight not in (None, "workers") and not args.calls_in_flight.isdigit():
        p.error("--calls-in-flight is a number or 'workers'")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--inventory",
        default="1000,5k",
        help="comma-separated: 41, 5k (shipped), N (N identical nodes) or a YAML file",
    )
    p.add_argument("--hosts", help="old spelling of --inventory with numbers only")
    p.add_argument("--workers", default="1,2,4")
    p.add_argument(
        "--batch-sizes",
        default=None,
        help="comma-separated [scheduler] batch_size values measured one after the "
        "other (1: no batching, as before it); default: the shipped batch_size only",
    )
    p.add_argument(
        "--host-cache-seconds",
        default=None,
        help="comma-separated [scheduler] host_cache_seconds values, each measured "
        "for every batching row (0: every batch walks the candidates, as before "
        "the host cache); default: the services' own default only",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="[DEFAULT] executor_thread_pool_size of the scheduler workers and the "
        "conductors in the rows with batching; default: not set, so each service "
        "derives its own (a scheduler worker batch_size x concurrent_batches, a "
        "super conductor enough messages for its request threads, 8 otherwise). "
        "Rows without batching (batch_size 1) keep 8, as before batching",
    )
    p.add_argument(
        "--calls-in-flight",
        default=None,
        help="[conductor] schedule_calls_in_flight of the conductors in the rows with "
        "batching: a number, or 'workers' (one per scheduler worker, at least 2, "
        "as the runs before the defaults were derived); default: the shipped one",
    )
    p.add_argument(
        "--call-timeout",
        type=int,
        default=None,
        help="[rpc] call_timeout of every service (the super conductor's "
        "select_destinations calls); default: the shipped one",
    )
    p.add_argument(
        "--expect-min",
        type=float,
        default=None,
        metavar="RATE",
        help="exit 1, with one line on stderr, when the best row places fewer "
        "instances/s than RATE",
    )
    p.add_argument("--instances", type=int, default=1000)
    p.add_argument(
        "--rate",
        type=float,
        default=None,
        metavar="PER_SECOND",
        help="a steady load instead of a burst: build-submit offers this many "
        "instances per second (its --rate) and p50/p99 are from each request's "
        "own cast to its outcome; with --duration, --instances is rate x duration",
    )
    p.add_argument(
        "--duration",
        type=float,
        default=None,
        metavar="SECONDS",
        help="with --rate: seconds of offered load (sets --instances)",
    )
    p.add_argument("--per-request", type=int, default=1)
    p.add_argument("--workload", choices=("mixed", "small", "issue12"), default="mixed")
    p.add_argument(
        "--anti-affinity",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="share of the instances put into anti-affinity server groups of 10",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sqlite", action="store_true", help="placement on SQLite, not PostgreSQL")
    p.add_argument(
        "--latency-log",
        metavar="PATH",
        help="append one line per placed instance to PATH: the row's worker count, "
        "when its outcome arrived (seconds from build-submit's start) and its "
        "latency, to see where in a run the slow ones are",
    )
    args = p.parse_args(argv)
    _check_args(p, args)
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")] if args.batch_sizes else [None]
    caches = (
        [float(c) for c in args.host_cache_seconds.split(",")]
        if args.host_cache_seconds
        else [None]
    )
    plan = [
        (int(w), b, c)
        for w in args.workers.split(",")
        for b in batch_sizes
        for c in (caches if b != 1 else [None])
    ]
    # Every option this run overrides, before anything is measured.
    seen = []
    for workers, batch, cache in plan:
        for line in _override_lines(args, workers, batch, cache):
            if line not in seen:
                seen.append(line)
    ignored = sorted(
        k for k in os.environ if k.startswith(("OS_SCHEDULER__", "OS_CONDUCTOR__", "OS_DEFAULT__"))
    )
    for key in ignored:
        print(f"Ignored from the environment (the services get their defaults): {key}")
    if seen:
        print("Overridden (everything else is the services' shipped defaults):")
        for line in seen:
            print(f"  {line}")
    else:
        print("Overridden: nothing (every service at its shipped defaults)")
    print(flush=True)
    inventories = (args.hosts or args.inventory).split(",")
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
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    try:
        for number, name in enumerate(inventories):
            label, inv_path, size, gpu = _inventory(name, workdir)
            url, handle = _database(args, workdir, label)
            env = {
                k: v
                for k, v in os.environ.items()
                # The caller's own overrides would hide the services' defaults.
                if not k.startswith(("OS_SCHEDULER__", "OS_CONDUCTOR__", "OS_DEFAULT__"))
            }
            env["OS_PLACEMENT_DATABASE__CONNECTION"] = url
            api_run = Run(workdir, env)
            try:
                for cmd in (["db", "sync"], ["inventory", "load", inv_path, "--cells", "2"]):
                    subprocess.run(
                        [os.path.join(BIN, "placement-manage"), *cmd],
                        env=env,
                        check=True,
                        capture_output=True,
                    )
                port = _free_port()
                api = api_run.start(f"placement-api-{label}", "placement-api", "--port", str(port))
                deadline = time.monotonic() + 120
                while True:
                    try:
                        requests.get(f"http://127.0.0.1:{port}/", timeout=5)
                        break
                    except requests.RequestException:
                        if time.monotonic() > deadline or api.poll() is not None:
                            raise RuntimeError("placement-api did not start")
                        time.sleep(0.3)
            except BaseException:
                # Set up half way: leave no database or process behind.
                api_run.stop()
                _drop(handle)
                raise
            conf = os.path.join(workdir, f"bench-{label}.conf")
            with open(conf, "w") as f:
                f.write(
                    f"[DEFAULT]\ntransport_url = rabbit://guest:guest@127.0.0.1:5672/"
                    f"{vhost}\n[placement]\nauth_type = noauth\n"
                    f"endpoint_override = http://127.0.0.1:{port}\n"
                    f"[conductor]\nsimulated_state_dir = {workdir}/hv-{label}\n"
                    + (f"[rpc]\ncall_timeout = {args.call_timeout}\n" if args.call_timeout else "")
                )
            inv = {
                "url": f"http://127.0.0.1:{port}",
                "db": url,
                "gpu": gpu,
                "db_name": handle[1] if handle else None,
            }
            try:
                n = 0
                for workers, batch, cache in plan:
                    seed = args.seed * 100000 + number * 1000 + n
                    n += 1
                    load = os.getloadavg()[0]
                    r = measure(args, workdir, env, conf, workers, batch, seed, inv, cache)
                    load = max(load, os.getloadavg()[0])
                    rows.append((label, size, workers, batch, cache, r, load))
                    cache_text = "" if cache is None else f" host cache {cache:g} s"
                    print(
                        f"{label} ({size} hosts) workers {workers} batch "
                        f"{'default' if batch is None else batch}{cache_text}: "
                        f"{r['instances_per_second']} instances/s, {r['placed']} placed, "
                        f"{r['failed']} failed, {r['seconds']} s, p50 {r['p50']:.1f} s, "
                        f"p99 {r['p99']:.1f} s, {r['placement_per_instance']:.2f} placement "
                        f"req/instance, {r['races_per_1000']:.1f} races/1000, kept walks "
                        f"{_walks_text(r)}, over-commit "
                        f"{r['over_committed']}, multi-host {r['multi_host']}, "
                        f"load {load:.1f}; {r['distinct_hosts']} distinct hosts, share per fifth "
                        f"of the hosts by id {r['fifths']} %; placement requests per instance by "
                        f"route: "
                        f"{r['routes']}; {_cpu_text(r)}",
                        flush=True,
                    )
            finally:
                api_run.stop()
                _drop(handle)
    finally:
        subprocess.run([ctl, "delete_vhost", vhost], capture_output=True)
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"\n{platform.node()} {os.cpu_count()} CPUs, commit {commit}, placement on "
        f"{'SQLite' if args.sqlite else 'PostgreSQL'}, workload {args.workload}, "
        f"{args.instances} instances, {args.per_request} per request, anti-affinity "
        f"{args.anti_affinity:.0%}, executor threads "
        f"{'derived (shipped defaults)' if args.threads is None else args.threads}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n"
    )
    print(
        "| inventory | scheduler workers | batch_size | host cache s | instances/s | p50 s | "
        "p99 s | placement req/instance | races lost /1000 | placed | failed | over-commit "
        "| CPU ms/instance | others' CPU % | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for label, size, workers, batch, cache, r, load in rows:
        cache_text = "-" if batch == 1 else ("default" if cache is None else f"{cache:g}")
        cpu = sum((r.get("cpu_ms") or {}).values())
        others = r.get("others_share")
        print(
            f"| {label} ({size}) | {workers} | {'default' if batch is None else batch} | "
            f"{cache_text} | {r['instances_per_second']} | "
            f"{r['p50']:.1f} | {r['p99']:.1f} | {r['placement_per_instance']:.2f} | "
            f"{r['races_per_1000']:.1f} | {r['placed']} | {r['failed']} | "
            f"{r['over_committed']} | {f'{cpu:.1f}' if cpu else '-'} | "
            f"{'-' if others is None else f'{100 * others:.0f}'} | {load:.1f} |"
        )
    for label, _size, workers, batch, cache, r, _load in rows:
        families = r["families"]
        if len(families) < 2:
            continue
        print(
            f"\nWhere the instances went, per family ({label}, {workers} worker(s), "
            f"batch {batch}, host cache {cache}): hosts, hosts used, instances, "
            "instances per host of the family"
        )
        for family, (count, used, placed) in sorted(families.items(), key=lambda kv: -kv[1][2]):
            print(
                f"  {family}: {count} hosts, {used} used, {placed} instances, "
                f"{placed / max(1, count):.2f}/host"
            )
    return _expectation(args, rows)


def _expectation(args, rows):
    """0, or 1 with one line on stderr when the best row is below --expect-min."""
    if args.expect_min is None:
        return 0
    best = max((r["instances_per_second"] or 0.0 for *_x, r, _load in rows), default=0.0)
    if best < args.expect_min:
        others = max((r.get("others_share") or 0.0 for *_x, r, _load in rows), default=0.0)
        print(
            f"bus_throughput: FAILED: best row {best} instances/s is below --expect-min "
            f"{args.expect_min:g} (other processes used up to {100 * others:.0f} % of the "
            "machine's CPU during the rows)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
