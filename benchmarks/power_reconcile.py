"""One power-controller reconcile tick over a 5,000-node cluster, over HTTP.

Seeds a fresh database with the providers, node records and hardware of
``powerpolicy/data/cluster-nodes-5k.yaml`` (direct SQL, so seeding is not what is measured),
serves placement on 127.0.0.1 in a background thread, and times ticks of the
real controller with the real REST client:

1. first tick: every node gets its twin and profile trait (5,000 writes);
2. second tick at constant demand: nothing to write;
3. STATIC_HP_FRAC 0.2 -> 0.21: only the 50 nodes that change are written;
4. a performance consumer on 100 planned-eco nodes, then STATIC_HP_FRAC
   back to 0.2: 50 nodes drain (the guard holds them) and nothing else moves.

Usage::

    python -m benchmarks.power_reconcile --backend sqlite
    python -m benchmarks.power_reconcile --backend postgresql \
        [--url postgresql+psycopg://postgres@127.0.0.1:5432/postgres]
"""

import argparse
import json
import logging
import os
import pathlib
import statistics
import tempfile
import threading
import time
import uuid as uuid_lib

import sqlalchemy as sa
import werkzeug.serving

from joule import inventory
from joule import placement_client
from placement import app as app_mod
from placement import conf as placement_conf
from placement import db as db_mod
from placement import migration
from placement import models as m
from powerpolicy import conf as power_conf
from powerpolicy import controller as controller_mod

INVENTORY = pathlib.Path(__file__).resolve().parents[1] / "powerpolicy/data/cluster-nodes-5k.yaml"
LOCAL_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


def _database(backend, url, tmp):
    if backend == "sqlite":
        return f"sqlite:///{tmp}/bench.sqlite"
    admin = sa.create_engine(url or LOCAL_PG, isolation_level="AUTOCOMMIT")
    name = f"power_bench_{os.getpid()}"
    with admin.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}"')
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    admin.dispose()
    return sa.engine.make_url(url or LOCAL_PG).set(database=name).render_as_string(False)


def _drop(backend, url, db_url):
    if backend == "sqlite":
        return
    admin = sa.create_engine(url or LOCAL_PG, isolation_level="AUTOCOMMIT")
    name = sa.engine.make_url(db_url).database
    with admin.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.dispose()


def seed(db, nodes):
    """Providers (with VCPU inventory), node records and hardware, in bulk."""
    now = db_mod.utcnow()
    rp = m.resource_providers
    with db.write() as conn:
        conn.execute(
            rp.insert(),
            [
                {
                    "uuid": str(uuid_lib.uuid5(uuid_lib.NAMESPACE_DNS, n.name)),
                    "name": n.name,
                    "generation": 0,
                    "created_at": now,
                }
                for n in nodes
            ],
        )
        conn.execute(rp.update().values(root_provider_id=rp.c.id))
        ids = dict(conn.execute(sa.select(rp.c.name, rp.c.id)).all())
        vcpu = conn.execute(
            sa.select(m.resource_classes.c.id).where(m.resource_classes.c.name == "VCPU")
        ).scalar_one()
        conn.execute(
            m.inventories.insert(),
            [
                {
                    "resource_provider_id": ids[n.name],
                    "resource_class_id": vcpu,
                    "total": 128,
                    "reserved": 0,
                    "min_unit": 1,
                    "max_unit": 128,
                    "step_size": 1,
                    "allocation_ratio": 1.0,
                    "created_at": now,
                }
                for n in nodes
            ],
        )
        conn.execute(
            m.nodes.insert(),
            [
                {
                    "resource_provider_id": ids[n.name],
                    "cell": "cell1",
                    "labels": "{}",
                    "reserved": False,
                    "unschedulable": False,
                    "generation": 0,
                    "created_at": now,
                }
                for n in nodes
            ],
        )
        conn.execute(
            m.node_hardware.insert(),
            [{"resource_provider_id": ids[n.name], "created_at": now, **n.hardware} for n in nodes],
        )
    return ids


def _allocate_performance(db, rp_ids):
    """One performance consumer on each provider (direct SQL, as the allocation API would)."""
    now = db_mod.utcnow()
    with db.write() as conn:
        project = conn.execute(
            m.projects.insert().values(external_id="bench")
        ).inserted_primary_key[0]
        user = conn.execute(m.users.insert().values(external_id="bench")).inserted_primary_key[0]
        vcpu = conn.execute(
            sa.select(m.resource_classes.c.id).where(m.resource_classes.c.name == "VCPU")
        ).scalar_one()
        consumers = [str(uuid_lib.uuid4()) for _ in rp_ids]
        conn.execute(
            m.consumers.insert(),
            [
                {
                    "uuid": c,
                    "project_id": project,
                    "user_id": user,
                    "generation": 0,
                    "workload_class": "performance",
                    "created_at": now,
                }
                for c in consumers
            ],
        )
        conn.execute(
            m.allocations.insert(),
            [
                {
                    "resource_provider_id": rp_id,
                    "consumer_id": c,
                    "resource_class_id": vcpu,
                    "used": 1,
                    "created_at": now,
                }
                for rp_id, c in zip(rp_ids, consumers, strict=True)
            ],
        )


def run(backend, url=None, repeat=3):
    nodes = inventory.load(INVENTORY)
    tmp = tempfile.mkdtemp(prefix="power-bench-")
    db_url = _database(backend, url, tmp)
    db = db_mod.Database(db_url)
    try:
        migration.upgrade(db)
        db_mod.sync_standard_classes_and_traits(db)
        ids = seed(db, nodes)
        pconf = placement_conf.make_conf(
            overrides={
                ("placement_database", "connection"): db_url,
                ("api", "auth_strategy"): "noauth2",
            }
        )
        app = app_mod.create_app(pconf, db=db, sync=False)
        server = werkzeug.serving.make_server("127.0.0.1", 0, app, threaded=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        endpoint = f"http://127.0.0.1:{server.server_port}"
        conf = power_conf.make_conf(overrides={"static_hp_frac": 0.2})
        ctl = controller_mod.Controller(
            conf, placement_client.PlacementClient.for_endpoint(endpoint)
        )

        rows = []

        def tick(label):
            # Client and server run in this process, so its CPU time is what
            # the tick costs whatever else competes for the machine.
            start, cpu = time.perf_counter(), time.process_time()
            result = ctl.tick()
            rows.append(
                {
                    "step": label,
                    "seconds": round(time.perf_counter() - start, 3),
                    "cpu_seconds": round(time.process_time() - cpu, 3),
                    "written": result.written,
                    "hp_count": result.hp_count,
                    "draining": result.draining,
                }
            )
            return result

        tick("first tick (all twins new)")
        for i in range(repeat):
            tick(f"constant demand #{i + 1}")
        conf.set_override("static_hp_frac", 0.21, group="power")
        tick("hp_frac 0.2 -> 0.21")
        # Nodes that would go eco when the fraction drops back: give them running work.
        perf_now = {
            n["name"] for n in ctl.client.list_nodes() if n["twin"]["profile"] == "performance"
        }
        _allocate_performance(db, [ids[name] for name in sorted(perf_now)][:5000])
        conf.set_override("static_hp_frac", 0.2, group="power")
        tick("hp_frac 0.21 -> 0.2, all busy")
        server.shutdown()
        return rows
    finally:
        db.dispose()
        _drop(backend, url, db_url)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--url", help="PostgreSQL admin URL (a scratch database is created)")
    parser.add_argument("--repeat", type=int, default=3, help="constant-demand ticks")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    rows = run(args.backend, args.url, args.repeat)
    if args.json:
        print(json.dumps(rows))
        return
    print(f"backend {args.backend}, {len(inventory.load(INVENTORY))} nodes")
    for row in rows:
        print(
            f"  {row['step']:<30} {row['seconds']:>6.3f} s wall {row['cpu_seconds']:>6.3f} s cpu"
            f"  wrote {row['written']:>5}  "
            f"hp_count {row['hp_count']:>5}  draining {row['draining']}"
        )
    steady = [r["seconds"] for r in rows if r["step"].startswith("constant")]
    print(
        f"  median constant-demand tick: {statistics.median(steady):.3f} s wall; "
        f"load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
