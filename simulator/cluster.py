"""Placement in-process for one simulated run: the embedded default, no socket.

The inventory is loaded once into a template SQLite file (providers,
inventories, node records with their labels, hardware records); each policy
then runs on its own copy, so every policy starts from the same cluster and
no run sees another's allocations.
"""

import contextlib
import os
import sqlite3

import sqlalchemy

from joule import inventory as inventory_mod
from placement import app as app_mod
from placement import conf as pconf_mod
from placement import db as db_mod
from placement.objects import cluster_inventory
from simulator import power as power_mod
from simulator import transport

CELLS = 2


@contextlib.contextmanager
def serve(database_path):
    """(client, url, database) of placement on the SQLite file at ``database_path``."""
    url = f"sqlite:///{database_path}"
    pconf = pconf_mod.make_conf(
        overrides={
            ("placement_database", "connection"): url,
            ("api", "auth_strategy"): "noauth2",
        }
    )
    db = db_mod.Database(url)

    @sqlalchemy.event.listens_for(db.engine, "connect")
    def _throwaway(dbapi_conn, _record):
        # Runs after placement's own set-up: a simulation's database is thrown
        # away at exit, so commits need not survive a power cut (FULL costs
        # about half the write rate, docs/benchmarks.md "SQLite synchronous").
        dbapi_conn.execute("PRAGMA synchronous=OFF")

    app = app_mod.create_app(pconf, db=db, sync=True)
    try:
        yield transport.client_for(app), transport.ENDPOINT, db
    finally:
        db.engine.dispose()


def template(nodes, directory):
    """Load ``nodes`` into a fresh SQLite file in ``directory``: (path, hosts).

    Through placement's bulk loader (what ``placement-manage inventory load``
    runs: providers, inventories, node records, hardware records in one
    transaction), in ``CELLS`` cells so that same-cell alternates are a real
    constraint. CPU-only nodes get a CPU cap range from ``simulator.power``
    (the inventories have none), so the controller caps them by percentage of
    their TDP. ``hosts`` is [(provider uuid, node)] in file order.
    """
    nodes = [
        inventory_mod.InventoryNode(n.name, power_mod.with_cpu_cap_range(n.hardware)) for n in nodes
    ]
    path = os.path.join(directory, "template.sqlite")
    with serve(path) as (client, _url, db):
        cluster_inventory.load(db, nodes, cells=CELLS)
        uuids = {n["name"]: n["uuid"] for n in client.list_nodes()}
    return path, [(uuids[n.name], n) for n in nodes]


def copy(template_path, directory, label):
    """A private copy of the template for one policy.

    Through SQLite's backup API, not a file copy: the template's last writes
    may still be in its write-ahead log.
    """
    safe = "".join(c if c.isalnum() else "_" for c in label)
    path = os.path.join(directory, f"{safe}.sqlite")
    source = sqlite3.connect(template_path)
    target = sqlite3.connect(path)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()
    return path
