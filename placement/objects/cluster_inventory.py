"""Load a cluster inventory (``joule.inventory`` nodes) into placement in bulk.

What ``placement-manage inventory load FILE`` runs, so an operator can stand
up a cluster without the demo. Each node becomes a root provider named as in
the file, with inventories derived from its hardware (VCPU = cpu_cores,
MEMORY_MB = memory_gib x 1024, PGPU = gpu_count when it has GPUs; upstream's
defaults for the other inventory fields), a node record (cell, labels
``joulie.io/managed`` and ``family``) and its hardware record.

Idempotent: providers are matched by name, and only what differs from the
file is written (a changed inventory bumps the provider generation, as any
inventory write does). Everything happens in one transaction with a few
statements per thousand nodes, so 5,000 nodes load in seconds; a file that
cannot be applied (a name that is a nested provider, an inventory that would
fall below what is allocated) changes nothing. On PostgreSQL a load that
changed anything ends with ANALYZE of the tables it wrote, so the very next
candidate query is planned for the cluster as loaded.
"""

import json
import uuid as uuid_lib

import sqlalchemy as sa

from joule import vocabulary
from placement import db as db_mod
from placement import models as m

_rp = m.resource_providers
_inv = m.inventories
_alloc = m.allocations
_node = m.nodes
_hw = m.node_hardware

_CHUNK = 900
MANAGED_LABEL = "joulie.io/managed"
# Upstream's defaults of the fields an inventory PUT may leave out.
_INVENTORY_DEFAULTS = {
    "reserved": 0,
    "min_unit": 1,
    "max_unit": 2147483647,
    "step_size": 1,
    "allocation_ratio": 1.0,
}
HARDWARE_FIELDS = (
    "cpu_model",
    "cpu_sockets",
    "cpu_cores",
    "memory_gib",
    "gpu_vendor",
    "gpu_model",
    "gpu_count",
    "gpu_min_cap_watts",
    "gpu_max_cap_watts",
    "cpu_min_cap_watts",
    "cpu_max_cap_watts",
)


class LoadError(Exception):
    """The inventory cannot be applied; nothing was changed."""


def _chunks(items):
    items = list(items)
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def inventories_of(hardware):
    """{resource class: total} of a node with ``hardware``."""
    out = {
        "VCPU": hardware.get("cpu_cores") or 1,
        "MEMORY_MB": (hardware.get("memory_gib") or 1) * 1024,
    }
    if hardware.get("gpu_count"):
        out["PGPU"] = hardware["gpu_count"]
    return out


def cell_of(index, cells):
    """Nodes go round-robin over ``cell1..cellN`` in file order, so every cell
    holds every family and same-cell alternates are a real constraint."""
    return f"cell{index % cells + 1}"


def load(db, nodes, cells=1):
    """Apply ``nodes`` (joule.inventory.InventoryNode) to the database.

    :return: {"nodes", "created", "updated", "unchanged"} counts of providers.
    :raise LoadError: nothing was changed.
    """
    if cells < 1:
        raise LoadError("cells must be at least 1")
    now = db_mod.utcnow()
    names = [n.name for n in nodes]
    with db.write() as conn:
        rc_ids = dict(
            conn.execute(sa.select(m.resource_classes.c.name, m.resource_classes.c.id)).all()
        )
        existing = _providers(conn, names)
        nested = sorted(n for n, row in existing.items() if row.parent_provider_id is not None)
        if nested:
            raise LoadError(
                f"{len(nested)} node name(s) are nested providers, not roots: "
                f"{', '.join(nested[:5])}"
            )
        new = [
            {"uuid": str(uuid_lib.uuid4()), "name": name, "generation": 0, "created_at": now}
            for name in names
            if name not in existing
        ]
        if new:
            conn.execute(_rp.insert(), new)
            for chunk in _chunks([r["name"] for r in new]):
                conn.execute(
                    _rp.update().where(_rp.c.name.in_(chunk)).values(root_provider_id=_rp.c.id)
                )
        rows = _providers(conn, names)
        ids = {name: row.id for name, row in rows.items()}
        changed = _sync_inventories(conn, nodes, ids, rc_ids, now)
        changed |= _sync_nodes(conn, nodes, ids, cells, now)
        changed |= _sync_hardware(conn, nodes, ids, now)
    created = {r["name"] for r in new}
    updated = {name for name in changed if name not in created}
    if db.is_postgres and (created or updated):
        # Refresh the planner's statistics now. Until autovacuum's next
        # analyze (a minute or more away) they describe the tables before
        # the load (empty, right after db sync), and the candidate queries'
        # plans assume a handful of providers: measured on the 5,000-node
        # inventory, a wrapped page took 1.1 s of database time instead of
        # 7 ms, and every walk of a freshly loaded cluster paid for it.
        with db.write() as conn:
            conn.exec_driver_sql(
                "ANALYZE " + ", ".join(t.name for t in (_rp, _inv, _node, _hw, _alloc))
            )
    return {
        "nodes": len(nodes),
        "created": len(created),
        "updated": len(updated),
        "unchanged": len(nodes) - len(created) - len(updated),
    }


def _providers(conn, names):
    out = {}
    for chunk in _chunks(names):
        for row in conn.execute(
            sa.select(_rp.c.id, _rp.c.name, _rp.c.generation, _rp.c.parent_provider_id).where(
                _rp.c.name.in_(chunk)
            )
        ):
            out[row.name] = row
    return out


def _sync_inventories(conn, nodes, ids, rc_ids, now):
    """Insert, update or delete inventory rows to match; return changed names."""
    by_id = {ids[n.name]: n for n in nodes}
    have = {}
    used = {}
    for chunk in _chunks(by_id):
        for row in conn.execute(sa.select(_inv).where(_inv.c.resource_provider_id.in_(chunk))):
            have.setdefault(row.resource_provider_id, {})[row.resource_class_id] = row
        for rp_id, rc_id, total in conn.execute(
            sa.select(
                _alloc.c.resource_provider_id,
                _alloc.c.resource_class_id,
                sa.func.sum(_alloc.c.used),
            )
            .where(_alloc.c.resource_provider_id.in_(chunk))
            .group_by(_alloc.c.resource_provider_id, _alloc.c.resource_class_id)
        ):
            used[(rp_id, rc_id)] = total
    inserts, updates, deletes, changed_ids = [], [], [], set()
    for rp_id, node in by_id.items():
        want = {rc_ids[rc]: total for rc, total in inventories_of(node.hardware).items()}
        current = have.get(rp_id, {})
        for rc_id, total in want.items():
            row = current.get(rc_id)
            if row is None:
                inserts.append(
                    {
                        "resource_provider_id": rp_id,
                        "resource_class_id": rc_id,
                        "total": total,
                        **_INVENTORY_DEFAULTS,
                        "created_at": now,
                    }
                )
                changed_ids.add(rp_id)
            elif row.total != total:
                if used.get((rp_id, rc_id), 0) > total:
                    raise LoadError(
                        f"{node.name}: {total} is less than the "
                        f"{used[(rp_id, rc_id)]} already allocated of class "
                        f"id {rc_id}"
                    )
                updates.append({"b_id": row.id, "b_total": total})
                changed_ids.add(rp_id)
        for rc_id, row in current.items():
            if rc_id not in want:
                if used.get((rp_id, rc_id)):
                    raise LoadError(
                        f"{node.name}: inventory of class id {rc_id} is in use and not in the file"
                    )
                deletes.append(row.id)
                changed_ids.add(rp_id)
    if inserts:
        conn.execute(_inv.insert(), inserts)
    if updates:
        conn.execute(
            _inv.update()
            .where(_inv.c.id == sa.bindparam("b_id"))
            .values(total=sa.bindparam("b_total"), updated_at=now),
            updates,
        )
    for chunk in _chunks(deletes):
        conn.execute(_inv.delete().where(_inv.c.id.in_(chunk)))
    for chunk in _chunks(changed_ids):
        # An inventory change is a provider change: clients holding the old
        # generation must re-read.
        conn.execute(
            _rp.update()
            .where(_rp.c.id.in_(chunk))
            .values(generation=_rp.c.generation + 1, updated_at=now)
        )
    return {n.name for rp_id, n in by_id.items() if rp_id in changed_ids}


def _sync_nodes(conn, nodes, ids, cells, now):
    by_id = {}
    for index, node in enumerate(nodes):
        hw = node.hardware
        labels = {
            MANAGED_LABEL: "true",
            "family": vocabulary.family_key(hw["gpu_count"], hw["gpu_model"], hw["cpu_model"]),
        }
        by_id[ids[node.name]] = (
            node.name,
            cell_of(index, cells),
            json.dumps(labels, sort_keys=True),
        )
    have = {}
    for chunk in _chunks(by_id):
        for row in conn.execute(sa.select(_node).where(_node.c.resource_provider_id.in_(chunk))):
            have[row.resource_provider_id] = row
    inserts, updates, changed = [], [], set()
    for rp_id, (name, cell, labels) in by_id.items():
        row = have.get(rp_id)
        if row is None:
            inserts.append(
                {
                    "resource_provider_id": rp_id,
                    "cell": cell,
                    "labels": labels,
                    "reserved": False,
                    "unschedulable": False,
                    "generation": 0,
                    "created_at": now,
                }
            )
            changed.add(name)
        else:
            # Labels an operator added are kept; the file's two are set.
            before = json.loads(row.labels or "{}")
            merged = {**before, **json.loads(labels)}
            if merged != before or row.cell != cell:
                updates.append(
                    {
                        "b_id": rp_id,
                        "b_cell": cell,
                        "b_labels": json.dumps(merged, sort_keys=True),
                        "b_generation": row.generation + 1,
                    }
                )
                changed.add(name)
    if inserts:
        conn.execute(_node.insert(), inserts)
    if updates:
        conn.execute(
            _node.update()
            .where(_node.c.resource_provider_id == sa.bindparam("b_id"))
            .values(
                cell=sa.bindparam("b_cell"),
                labels=sa.bindparam("b_labels"),
                generation=sa.bindparam("b_generation"),
                updated_at=now,
            ),
            updates,
        )
    return changed


def _sync_hardware(conn, nodes, ids, now):
    by_id = {ids[n.name]: n for n in nodes}
    have = {}
    for chunk in _chunks(by_id):
        for row in conn.execute(sa.select(_hw).where(_hw.c.resource_provider_id.in_(chunk))):
            have[row.resource_provider_id] = row
    inserts, updates, changed = [], [], set()
    for rp_id, node in by_id.items():
        want = {f: node.hardware.get(f) for f in HARDWARE_FIELDS}
        want["gpu_count"] = want["gpu_count"] or 0
        row = have.get(rp_id)
        if row is None:
            inserts.append({"resource_provider_id": rp_id, **want, "created_at": now})
            changed.add(node.name)
        elif any(getattr(row, f) != v for f, v in want.items()):
            updates.append({"b_id": rp_id, **{f"b_{f}": v for f, v in want.items()}})
            changed.add(node.name)
    if inserts:
        conn.execute(_hw.insert(), inserts)
    if updates:
        conn.execute(
            _hw.update()
            .where(_hw.c.resource_provider_id == sa.bindparam("b_id"))
            .values(updated_at=now, **{f: sa.bindparam(f"b_{f}") for f in HARDWARE_FIELDS}),
            updates,
        )
    return changed
