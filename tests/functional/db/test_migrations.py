"""Migrations: exactly the schema of placement/models.py, idempotent, and upgrades
that keep the data of a database populated at the first release's schema.

``0001`` is frozen (docs/decisions.md): a schema change is a new revision on the
single head. The upgrade test writes real rows with the ``0001`` tables as they
are in that revision (reflected, not from models.py, which follows head), then
walks every later revision one step at a time, checking after each step that
every row written at ``0001`` is still there, and at head that the API reads
the data back and can write on top of it.
"""

import datetime
import hashlib
import json
import os

import alembic.autogenerate
import alembic.migration
import os_resource_classes
import sqlalchemy as sa

import migrations
from placement import app as app_mod
from placement import db as db_mod
from placement import migration
from placement import models
from tests import conftest

# The checksum of migrations/versions/0001_initial_schema.py as released. A
# database created by it must keep upgrading, so the file never changes: put a
# schema change in a new revision (see PROTOCOL/decisions: "0001 is frozen").
FROZEN = {"0001": "5dbd6679450bbbce30f38af7f67bfbd46857b772db6587392308379260f466e4"}


def test_schema_matches_models(db):
    with db.engine.connect() as conn:
        ctx = alembic.migration.MigrationContext.configure(conn, opts={"compare_type": True})
        diff = alembic.autogenerate.compare_metadata(ctx, models.metadata)
    assert diff == []


def test_sync_is_idempotent(db):
    assert migration.current(db) == migration.head()
    migration.upgrade(db)
    db_mod.sync_standard_classes_and_traits(db)
    db_mod.sync_standard_classes_and_traits(db)
    assert migration.current(db) == migration.head()


def test_exactly_one_head():
    heads = migration.heads()
    assert len(heads) == 1, (
        f"migrations/versions has {len(heads)} heads {heads}: set the newer revision's "
        "down_revision to the other head so upgrades have one path"
    )
    order = migration.revisions()
    assert order[0] == "0001"
    assert order[-1] == heads[0]


def test_released_revisions_are_frozen():
    versions = os.path.join(os.path.dirname(os.path.abspath(migrations.__file__)), "versions")
    for revision, digest in FROZEN.items():
        (name,) = [f for f in os.listdir(versions) if f.startswith(revision + "_")]
        with open(os.path.join(versions, name), "rb") as fh:
            got = hashlib.sha256(fh.read()).hexdigest()
        assert got == digest, (
            f"{name} was edited; released revisions are frozen: add a new revision instead"
        )


# -- a database populated at 0001 --------------------------------------------

STAMP = datetime.datetime(2026, 1, 2, 3, 4, 5)
VCPU = os_resource_classes.STANDARDS.index("VCPU")
MEMORY_MB = os_resource_classes.STANDARDS.index("MEMORY_MB")
DISK_GB = os_resource_classes.STANDARDS.index("DISK_GB")
CUSTOM_FPGA = db_mod.CUSTOM_RC_ID_BASE

COMPUTE = "c0ffee00-0000-4000-8000-000000000001"
NUMA = "c0ffee00-0000-4000-8000-000000000002"
SHARED = "c0ffee00-0000-4000-8000-000000000003"
AGGREGATE = "a99e0000-0000-4000-8000-000000000001"
CONSUMER = "0c0c0c00-0000-4000-8000-000000000001"
PROJECT = "proj-0001"
USER = "user-0001"
INSTANCE = "1e1e1e00-0000-4000-8000-000000000001"


def _populate_at_0001(conn):
    """Write one small cloud with every kind of row 0001 holds; return the rows
    written per table (as dicts of the columns given)."""
    meta = sa.MetaData()
    meta.reflect(conn)
    t = meta.tables
    written = {}

    def insert(table, rows):
        rows = [
            dict(row, **({"created_at": STAMP} if "created_at" in t[table].c else {}))
            for row in rows
        ]
        ids = []
        for row in rows:
            result = conn.execute(t[table].insert().values(**row))
            pk = result.inserted_primary_key
            ids.append(pk[0] if pk else None)
        written.setdefault(table, []).extend(rows)
        return ids

    insert(
        "resource_classes",
        [
            {"id": VCPU, "name": "VCPU"},
            {"id": MEMORY_MB, "name": "MEMORY_MB"},
            {"id": DISK_GB, "name": "DISK_GB"},
            {"id": CUSTOM_FPGA, "name": "CUSTOM_FPGA"},
        ],
    )
    avx2, fast = insert("traits", [{"name": "HW_CPU_X86_AVX2"}, {"name": "CUSTOM_FAST"}])
    (compute,) = insert(
        "resource_providers", [{"uuid": COMPUTE, "name": "compute-1", "generation": 5}]
    )
    conn.execute(
        t["resource_providers"]
        .update()
        .where(t["resource_providers"].c.id == compute)
        .values(root_provider_id=compute)
    )
    numa, shared = insert(
        "resource_providers",
        [
            {
                "uuid": NUMA,
                "name": "compute-1-numa0",
                "generation": 2,
                "root_provider_id": compute,
                "parent_provider_id": compute,
            },
            {"uuid": SHARED, "name": "shared-disk", "generation": 1},
        ],
    )
    conn.execute(
        t["resource_providers"]
        .update()
        .where(t["resource_providers"].c.id == shared)
        .values(root_provider_id=shared)
    )
    for row in written["resource_providers"]:
        row["root_provider_id"] = {COMPUTE: compute, NUMA: compute, SHARED: shared}[row["uuid"]]

    inv = {"reserved": 0, "min_unit": 1, "step_size": 1}
    insert(
        "inventories",
        [
            dict(
                inv,
                resource_provider_id=compute,
                resource_class_id=MEMORY_MB,
                total=65536,
                reserved=512,
                max_unit=65536,
                allocation_ratio=1.5,
            ),
            dict(
                inv,
                resource_provider_id=numa,
                resource_class_id=VCPU,
                total=32,
                max_unit=32,
                allocation_ratio=4.0,
            ),
            dict(
                inv,
                resource_provider_id=numa,
                resource_class_id=CUSTOM_FPGA,
                total=2,
                max_unit=1,
                allocation_ratio=1.0,
            ),
            dict(
                inv,
                resource_provider_id=shared,
                resource_class_id=DISK_GB,
                total=2000,
                max_unit=500,
                step_size=10,
                allocation_ratio=1.0,
            ),
        ],
    )
    (agg,) = insert("placement_aggregates", [{"uuid": AGGREGATE}])
    insert(
        "resource_provider_aggregates",
        [
            {"resource_provider_id": compute, "aggregate_id": agg},
            {"resource_provider_id": shared, "aggregate_id": agg},
        ],
    )
    insert(
        "resource_provider_traits",
        [
            {"resource_provider_id": numa, "trait_id": avx2},
            {"resource_provider_id": compute, "trait_id": fast},
        ],
    )

    (project,) = insert("projects", [{"external_id": PROJECT}])
    (user,) = insert("users", [{"external_id": USER}])
    (ctype,) = insert("consumer_types", [{"name": "INSTANCE"}])
    insert(
        "consumers",
        [
            {
                "uuid": CONSUMER,
                "project_id": project,
                "user_id": user,
                "generation": 3,
                "consumer_type_id": ctype,
                "workload_class": "performance",
            }
        ],
    )
    insert(
        "allocations",
        [
            {
                "resource_provider_id": numa,
                "consumer_id": CONSUMER,
                "resource_class_id": VCPU,
                "used": 4,
            },
            {
                "resource_provider_id": compute,
                "consumer_id": CONSUMER,
                "resource_class_id": MEMORY_MB,
                "used": 8192,
            },
            {
                "resource_provider_id": numa,
                "consumer_id": CONSUMER,
                "resource_class_id": CUSTOM_FPGA,
                "used": 1,
            },
            {
                "resource_provider_id": shared,
                "consumer_id": CONSUMER,
                "resource_class_id": DISK_GB,
                "used": 100,
            },
        ],
    )

    insert(
        "nodes",
        [
            {
                "resource_provider_id": compute,
                "cell": "cell-a",
                "labels": json.dumps({"rack": "r1"}),
                "reserved": False,
                "unschedulable": True,
                "generation": 1,
            }
        ],
    )
    insert(
        "node_hardware",
        [
            {
                "resource_provider_id": compute,
                "cpu_model": "EPYC 9654",
                "cpu_sockets": 2,
                "cpu_cores": 96,
                "memory_gib": 64,
                "gpu_vendor": "nvidia",
                "gpu_model": "H100",
                "gpu_count": 4,
                "gpu_min_cap_watts": 200.0,
                "gpu_max_cap_watts": 700.0,
                "cpu_min_cap_watts": 150.0,
                "cpu_max_cap_watts": 400.0,
            }
        ],
    )
    insert(
        "node_twins",
        [
            {
                "resource_provider_id": compute,
                "profile": "performance",
                "cpu_cap_watts": 380.0,
                "gpu_cap_watts": 650.0,
                "managed_by": "power-controller",
                "schedulable_class": "performance",
                "generation": 7,
            }
        ],
    )
    insert(
        "build_requests",
        [
            {
                "instance_uuid": INSTANCE,
                "request_id": "req-build-1",
                "workload_class": "performance",
                "status": "placed",
                "spec": json.dumps({"resources": {"VCPU": 4}}),
                "host_uuid": COMPUTE,
            }
        ],
    )
    insert(
        "scheduling_reports",
        [{"request_id": "req-build-1", "project_id": PROJECT, "body": json.dumps({"hosts": 1})}],
    )
    return written


def _missing_rows(conn, written):
    """Rows written at 0001 that the database no longer holds, compared on the
    columns that still exist (a later revision may drop a column on purpose;
    a dropped table must be dropped by a revision that says so, and shows here)."""
    meta = sa.MetaData()
    meta.reflect(conn)
    missing = []
    for name, rows in written.items():
        if name not in meta.tables:
            missing.append((name, "table gone"))
            continue
        table = meta.tables[name]
        for row in rows:
            cols = {k: v for k, v in row.items() if k in table.c}
            cond = [
                table.c[k] == sa.bindparam(f"p_{k}", v, type_=table.c[k].type)
                if v is not None
                else table.c[k].is_(None)
                for k, v in cols.items()
                if k not in ("created_at",)
            ]
            if (
                conn.execute(sa.select(sa.func.count()).select_from(table).where(*cond)).scalar()
                != 1
            ):
                missing.append((name, cols))
    return missing


def test_database_populated_at_0001_upgrades_to_head_with_data_intact(empty_db_url):
    db = db_mod.Database(empty_db_url)
    try:
        migration.upgrade(db, "0001")
        assert migration.current(db) == "0001"
        with db.engine.begin() as conn:
            written = _populate_at_0001(conn)
        for revision in migration.revisions()[1:]:
            migration.upgrade(db, revision)
            with db.engine.connect() as conn:
                assert _missing_rows(conn, written) == [], f"after upgrade to {revision}"
        assert migration.current(db) == migration.head()
        with db.engine.connect() as conn:
            assert _missing_rows(conn, written) == []
        _check_through_the_api(empty_db_url, db)
    finally:
        db.dispose()


def _check_through_the_api(url, db):
    """The head code reads the upgraded rows as the API shows them, and writes."""
    app = app_mod.create_app(conftest.make_conf(url), db=db, sync=False)
    client = conftest.ApiClient(app.test_client())

    inv = client.get(f"/resource_providers/{NUMA}/inventories").get_json()
    assert inv["resource_provider_generation"] == 2
    assert inv["inventories"]["VCPU"]["total"] == 32
    assert inv["inventories"]["VCPU"]["allocation_ratio"] == 4.0
    assert inv["inventories"]["CUSTOM_FPGA"]["max_unit"] == 1
    rp = client.get(f"/resource_providers/{NUMA}").get_json()
    assert rp["parent_provider_uuid"] == COMPUTE and rp["root_provider_uuid"] == COMPUTE

    alloc = client.get(f"/allocations/{CONSUMER}").get_json()
    assert alloc["project_id"] == PROJECT and alloc["user_id"] == USER
    assert alloc["consumer_generation"] == 3
    assert alloc["consumer_type"] == "INSTANCE"
    assert alloc["allocations"][NUMA]["resources"] == {"VCPU": 4, "CUSTOM_FPGA": 1}
    assert alloc["allocations"][SHARED]["resources"] == {"DISK_GB": 100}
    usages = client.get(f"/resource_providers/{COMPUTE}/usages").get_json()
    assert usages["usages"] == {"MEMORY_MB": 8192}

    traits = client.get(f"/resource_providers/{NUMA}/traits").get_json()
    assert traits["traits"] == ["HW_CPU_X86_AVX2"]
    aggs = client.get(f"/resource_providers/{SHARED}/aggregates").get_json()
    assert aggs["aggregates"] == [AGGREGATE]

    node = client.get(f"/nodes/{COMPUTE}")
    assert node.status_code == 200, node.get_data(as_text=True)
    node_text = node.get_data(as_text=True)
    assert "cell-a" in node_text and "r1" in node_text
    hardware = client.get(f"/nodes/{COMPUTE}/hardware").get_json()
    assert hardware["gpu_count"] == 4 and hardware["cpu_model"] == "EPYC 9654"
    twin = client.get(f"/nodes/{COMPUTE}/twin").get_json()
    assert twin["profile"] == "performance" and twin["generation"] == 7
    build = client.get(f"/build_requests/{INSTANCE}").get_json()
    assert build["status"] == "placed" and build["host_uuid"] == COMPUTE

    # Writes on top of the upgraded rows: ids and sequences carry on.
    new_rp = "c0ffee00-0000-4000-8000-0000000000ff"
    assert (
        client.post("/resource_providers", json={"name": "compute-2", "uuid": new_rp}).status_code
        == 200
    )
    resp = client.put(
        f"/resource_providers/{new_rp}/inventories",
        json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}},
    )
    assert resp.status_code == 200, resp.get_data(as_text=True)
    consumer = "0c0c0c00-0000-4000-8000-0000000000ff"
    resp = client.put(
        f"/allocations/{consumer}",
        json={
            "allocations": {new_rp: {"resources": {"VCPU": 2}}},
            "project_id": PROJECT,
            "user_id": USER,
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        },
    )
    assert resp.status_code == 204, resp.get_data(as_text=True)
    usages = client.get(f"/usages?project_id={PROJECT}").get_json()["usages"]
    assert usages["INSTANCE"] == {
        "consumer_count": 2,
        "VCPU": 6,
        "MEMORY_MB": 8192,
        "CUSTOM_FPGA": 1,
        "DISK_GB": 100,
    }
