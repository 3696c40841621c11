"""placement-manage inventory load: a cluster file into placement, idempotently."""

import os
import sys
import time

import yaml

from joule import inventory as inventory_mod
from placement.objects import cluster_inventory
from tests import processes

BIN = os.path.dirname(sys.executable)
DATA = os.path.join(os.path.dirname(inventory_mod.__file__), "..", "powerpolicy", "data")
SMALL = os.path.join(DATA, "cluster-nodes-41.yaml")
LARGE = os.path.join(DATA, "cluster-nodes-5k.yaml")


def _providers(client):
    return {
        p["name"]: p for p in client.get("/resource_providers").get_json()["resource_providers"]
    }


def _load(db_url, path, data):
    """``placement-manage inventory load`` of ``data``, written to ``path`` as YAML."""
    path.write_text(yaml.safe_dump(data))
    return processes.manage(db_url, "inventory", "load", str(path))


def test_load_is_complete_and_idempotent(db_url, client):
    res = processes.manage(db_url, "inventory", "load", SMALL, "--cells", "2")
    assert res.returncode == 0, res.stderr
    assert "41 nodes" in res.stdout and "41 created" in res.stdout
    rps = _providers(client)
    assert len(rps) == 41
    h100 = rps["kwok-h100-nvl-0"]
    inv = client.get(f"/resource_providers/{h100['uuid']}/inventories").get_json()
    assert {rc: v["total"] for rc, v in inv["inventories"].items()} == {
        "VCPU": 192,
        "MEMORY_MB": 1536 * 1024,
        "PGPU": 8,
    }
    assert inv["inventories"]["VCPU"]["max_unit"] == 2147483647  # upstream's default
    nodes = {n["name"]: n for n in client.get("/nodes").get_json()["nodes"]}
    assert {n["cell"] for n in nodes.values()} == {"cell1", "cell2"}
    assert nodes["kwok-h100-nvl-0"]["labels"] == {
        "joulie.io/managed": "true",
        "family": "gpu:NVIDIA H100 NVL",
    }
    assert nodes["kwok-h100-nvl-0"]["hardware"]["gpu_model"] == "NVIDIA H100 NVL"
    gens = {name: p["generation"] for name, p in rps.items()}
    # Candidates see the loaded capacity.
    cands = client.get("/allocation_candidates?resources=PGPU:8,VCPU:1").get_json()
    assert len(cands["provider_summaries"]) == 12 + 2  # the 8-GPU families
    # Again: nothing changes, not even a generation.
    again = processes.manage(db_url, "inventory", "load", SMALL, "--cells", "2")
    assert again.returncode == 0, again.stderr
    assert "0 created, 0 updated, 41 unchanged" in again.stdout
    assert {n: p["generation"] for n, p in _providers(client).items()} == gens


def test_changed_file_updates_only_what_changed(db_url, client, tmp_path):
    data = {
        "nodes": [
            {
                "node_name_prefix": "cpu",
                "replicas": 2,
                "cpu": "EPYC",
                "cpu_sockets": 1,
                "cpu_cores": 16,
                "memory_gib": 64,
                "gpu_count": 0,
            },
            {
                "node_name_prefix": "gpu",
                "replicas": 1,
                "vendor": "nvidia",
                "product": "L4",
                "cpu": "EPYC",
                "cpu_sockets": 1,
                "cpu_cores": 32,
                "memory_gib": 128,
                "gpu_count": 2,
            },
        ]
    }
    path = tmp_path / "inv.yaml"
    assert _load(db_url, path, data).returncode == 0
    before = _providers(client)
    data["nodes"][0]["cpu_cores"] = 24  # both cpu-* nodes change
    data["nodes"][1]["gpu_count"] = 0  # gpu-0 loses its PGPU inventory
    res = _load(db_url, path, data)
    assert res.returncode == 0, res.stderr
    assert "0 created, 3 updated, 0 unchanged" in res.stdout
    after = _providers(client)
    assert all(after[n]["generation"] == before[n]["generation"] + 1 for n in after)
    inv = client.get(f"/resource_providers/{after['gpu-0']['uuid']}/inventories").get_json()
    assert set(inv["inventories"]) == {"VCPU", "MEMORY_MB"}
    inv = client.get(f"/resource_providers/{after['cpu-1']['uuid']}/inventories").get_json()
    assert inv["inventories"]["VCPU"]["total"] == 24


def test_in_use_inventory_is_refused_and_nothing_changes(db_url, client, tmp_path):
    data = {
        "nodes": [
            {
                "node_name_prefix": "n",
                "replicas": 2,
                "cpu": "X",
                "cpu_cores": 8,
                "memory_gib": 16,
                "gpu_count": 0,
            }
        ]
    }
    path = tmp_path / "inv.yaml"
    assert _load(db_url, path, data).returncode == 0
    rps = _providers(client)
    resp = client.put(
        "/allocations/" + "11111111-2222-3333-4444-555555555555",
        json={
            "allocations": {rps["n-0"]["uuid"]: {"resources": {"VCPU": 6}}},
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        },
    )
    assert resp.status_code == 204, resp.get_json()
    rps = _providers(client)  # the claim moved n-0's generation
    data["nodes"][0]["cpu_cores"] = 4
    data["nodes"].append(
        {
            "node_name_prefix": "new",
            "replicas": 1,
            "cpu": "X",
            "cpu_cores": 8,
            "memory_gib": 16,
            "gpu_count": 0,
        }
    )
    res = _load(db_url, path, data)
    assert res.returncode == 1
    assert "n-0: 4 is less than the 6 already allocated" in res.stderr
    assert "Traceback" not in res.stderr
    assert _providers(client) == rps  # not even the new node was created
    # A bad file: one line, exit 1.
    path.write_text("nodes: [{replicas: 2}]")
    res = processes.manage(db_url, "inventory", "load", str(path))
    assert res.returncode == 1 and "node_name_prefix" in res.stderr
    assert processes.manage(db_url, "inventory", "load", SMALL, "--cells", "0").returncode == 1


def test_five_thousand_nodes_load_in_bulk(db):
    """The shipped 5k inventory loads in one transaction of bulk statements."""
    nodes = inventory_mod.load(LARGE)
    start = time.perf_counter()
    counts = cluster_inventory.load(db, nodes, cells=2)
    first = time.perf_counter() - start
    assert counts == {"nodes": 5000, "created": 5000, "updated": 0, "unchanged": 0}
    start = time.perf_counter()
    assert cluster_inventory.load(db, nodes, cells=2)["unchanged"] == 5000
    second = time.perf_counter() - start
    # Seconds, not the minutes 5,000 x 4 REST calls take (generous for a busy machine).
    assert first < 60 and second < 60, (first, second)


def test_a_load_on_postgresql_leaves_fresh_planner_statistics(pg_database_url):
    """Right after db sync the statistics describe empty tables; the load
    refreshes them, or the candidate queries are planned for a handful of
    providers until autovacuum gets round to it."""
    import sqlalchemy as sa

    assert processes.manage(pg_database_url, "db", "sync").returncode == 0
    res = processes.manage(pg_database_url, "inventory", "load", SMALL)
    assert res.returncode == 0, res.stderr
    engine = sa.create_engine(pg_database_url)
    try:
        with engine.connect() as conn:
            rows = dict(
                conn.exec_driver_sql(
                    "SELECT relname, reltuples FROM pg_class WHERE relname IN "
                    "('resource_providers', 'inventories', 'nodes')"
                ).all()
            )
            counts = {
                table: conn.exec_driver_sql(f"SELECT COUNT(*) FROM {table}").scalar()
                for table in rows
            }
    finally:
        engine.dispose()
    # reltuples is -1 (never analyzed) or stale without the ANALYZE.
    assert counts["resource_providers"] >= 41
    assert rows == counts
