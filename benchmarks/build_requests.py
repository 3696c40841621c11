"""CPU that placement and PostgreSQL spend per build request on its way
through the conductors: created held by a super conductor, handed off, taken
by a cell conductor, finished as placed.

Each instance of the bus benchmark (benchmarks/bus_throughput.py) makes
these four writes. This runs them alone, in the bulk calls the conductors
make (``--batch`` records per call), against a real ``placement-api`` on a
fresh PostgreSQL database (or SQLite with ``--sqlite``), and prints, per
step, the CPU milliseconds per record of the placement processes and of the
database's backends (read from /proc), and the wall time per call::

    python -m benchmarks.build_requests --records 5000 --batch 25

The specs are the bus benchmark's mixed workload, dumped as a super
conductor records them.
"""

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid

import requests

from benchmarks import bus_throughput as bus
from joule import request_spec as spec_mod

OWNER_SUPER = "bench-super"
OWNER_CELL = "bench-cell"
LEASE = 300
# Where the finish says the instances went (placement keeps it as given).
HOST = "5f0b2a8e-3c1d-4e6f-8a9b-0c1d2e3f4a5b"
HEADERS = {"x-auth-token": "admin", "openstack-api-version": "placement latest"}
STEPS = ("create", "hand_off", "take", "finish")


def _records(count, seed):
    rng = random.Random(seed)

    class Args:
        workload = "mixed"
        per_request = 1

    out = []
    for n in range(count):
        raw = bus._spec(rng, n, seed, Args, 0.3)
        instance = str(uuid.uuid4())
        raw["instance_uuids"] = [instance]
        spec = spec_mod.load_request_spec(raw)
        out.append(
            {
                "instance_uuid": instance,
                "request_id": spec.request_id,
                "workload_class": spec.workload_class,
                "spec": spec_mod.dump_request_spec(spec),
            }
        )
    return out


def _call(session, url, method, path, body, ok):
    resp = session.request(method, url + path, json=body, headers=HEADERS, timeout=60)
    if resp.status_code != ok:
        raise RuntimeError(f"{method} {path}: {resp.status_code} {resp.text[:500]}")
    return resp.json()


def _bodies(step, chunk, gens):
    if step == "create":
        return {"build_requests": chunk, "owner": OWNER_SUPER, "lease_seconds": LEASE}
    if step in ("hand_off", "take"):
        return {
            "build_requests": [
                {"instance_uuid": r["instance_uuid"], "generation": gens[r["instance_uuid"]]}
                for r in chunk
            ],
            "owner": OWNER_SUPER if step == "hand_off" else OWNER_CELL,
            "lease_seconds": LEASE,
            "hand_off": step == "hand_off",
        }
    return {
        "build_requests": [
            {
                "instance_uuid": r["instance_uuid"],
                "status": "placed",
                "host_uuid": HOST,
                "build_succeeded": True,
                "owner": OWNER_CELL,
                "generation": gens[r["instance_uuid"]],
            }
            for r in chunk
        ]
    }


ROUTES = {
    "create": ("POST", "/build_requests", 201),
    "hand_off": ("PUT", "/build_requests/leases", 200),
    "take": ("PUT", "/build_requests/leases", 200),
    "finish": ("PUT", "/build_requests", 200),
}


def measure(url, db_name, records, batch):
    session = requests.Session()
    gens = {}
    out = {}
    for step in STEPS:
        meter = bus.CpuMeter(os.getpid(), db_name)
        meter.start()
        walls = []
        method, path, ok = ROUTES[step]
        for start in range(0, len(records), batch):
            chunk = records[start : start + batch]
            began = time.perf_counter()
            answer = _call(session, url, method, path, _bodies(step, chunk, gens), ok)
            walls.append(time.perf_counter() - began)
            for r in answer["build_requests"]:
                gens[r["instance_uuid"]] = r["generation"]
        cpu, _others = meter.stop()
        out[step] = {
            "placement": 1000 * cpu.get("placement", 0.0) / len(records),
            "postgresql": 1000 * cpu.get("postgresql", 0.0) / len(records),
            "call_ms": 1000 * sum(walls) / len(walls),
        }
    return out


def _commit():
    return subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=5000)
    p.add_argument("--batch", type=int, default=25)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sqlite", action="store_true", help="placement on SQLite")
    args = p.parse_args(argv)
    if args.records < 1 or args.batch < 1:
        p.error("--records and --batch must be at least 1")
    workdir = tempfile.mkdtemp(prefix="br-bench-")
    url_db, handle = bus._database(args, workdir, "br")
    env = dict(os.environ, OS_PLACEMENT_DATABASE__CONNECTION=url_db)
    run = bus.Run(workdir, env)
    try:
        subprocess.run(
            [os.path.join(bus.BIN, "placement-manage"), "db", "sync"],
            env=env,
            check=True,
            capture_output=True,
        )
        port = bus._free_port()
        api = run.start("placement-api", "placement-api", "--port", str(port))
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                requests.get(url + "/", timeout=5)
                break
            except requests.RequestException:
                if time.monotonic() > deadline or api.poll() is not None:
                    raise RuntimeError("placement-api did not start") from None
                time.sleep(0.3)
        records = _records(args.records, args.seed)
        # A first pass warms the process (imports, prepared statements).
        warm = _records(min(200, args.records), args.seed + 1)
        measure(url, handle[1] if handle else None, warm, args.batch)
        result = measure(url, handle[1] if handle else None, records, args.batch)
    finally:
        run.stop()
        bus._drop(handle)
    print(
        f"{args.records} records, {args.batch} per call, placement on "
        f"{'SQLite' if args.sqlite else 'PostgreSQL'}, commit {_commit()}"
    )
    print("| step | placement CPU ms/record | PostgreSQL CPU ms/record | ms per call |")
    print("|---|---|---|---|")
    total = {"placement": 0.0, "postgresql": 0.0}
    for step in STEPS:
        r = result[step]
        total["placement"] += r["placement"]
        total["postgresql"] += r["postgresql"]
        print(f"| {step} | {r['placement']:.3f} | {r['postgresql']:.3f} | {r['call_ms']:.1f} |")
    print(f"| all four | {total['placement']:.3f} | {total['postgresql']:.3f} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
