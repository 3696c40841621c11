"""Inventories of a provider: read, add one, replace one, replace all, delete.

Each write is one transaction that first moves the provider generation from
the generation the caller saw (``resource_provider.bump_generation``), so a
stale writer fails before it changes anything. Removing an inventory that
still has allocations is refused (the ``allocations`` table is the truth).
Shrinking an inventory below its current usage is allowed, as upstream.
"""

import sqlalchemy as sa

from placement import db as db_mod
from placement import models as m
from placement.objects import resource_provider as rp_obj

_INV = m.inventories
_RC = m.resource_classes

FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")


class InventoryInUse(rp_obj.ObjectError):
    def __init__(self, classes, rp_uuid):
        super().__init__(
            f"Inventory for '{', '.join(classes)}' on resource provider '{rp_uuid}' in use."
        )


class InventoryNotFound(rp_obj.ObjectError):
    pass


class InventoryExists(rp_obj.ObjectError):
    pass


def capacity(record):
    """What can be allocated: (total - reserved) * allocation_ratio, as an int."""
    return int((record["total"] - record["reserved"]) * record["allocation_ratio"])


def get_all(conn, rp_id):
    """The provider's inventories as {class name: record dict}, in class id order.

    Each record has the FIELDS plus ``created_at``/``updated_at``.
    """
    rows = conn.execute(
        sa.select(_INV, _RC.c.name.label("resource_class"))
        .join(_RC, _RC.c.id == _INV.c.resource_class_id)
        .where(_INV.c.resource_provider_id == rp_id)
        .order_by(_INV.c.resource_class_id)
    )
    return {row.resource_class: dict(row._mapping) for row in rows}


def of_provider(db, rp_uuid):
    """(provider, {class name: record}) read in one transaction.

    :raise NotFound: no provider ``rp_uuid``.
    """
    with db.read() as conn:
        rp = rp_obj.get_by_uuid(conn, rp_uuid)
        return rp, get_all(conn, rp["id"])


def class_ids(conn, names):
    """{name: id} for resource class names; ResourceClassNotFound for the first unknown."""
    names = list(names)
    for name in names:
        if not rp_obj.storable(name):
            raise rp_obj.ResourceClassNotFound(name)
    found = {}
    if names:
        found = {
            row.name: row.id
            for row in conn.execute(sa.select(_RC.c.id, _RC.c.name).where(_RC.c.name.in_(names)))
        }
    for name in sorted(names):
        if name not in found:
            raise rp_obj.ResourceClassNotFound(name)
    return found


def _in_use(conn, rp_id, rc_ids):
    """Names of the classes among ``rc_ids`` with allocations on the provider."""
    if not rc_ids:
        return []
    alloc = m.allocations
    rows = conn.execute(
        sa.select(_RC.c.name)
        .where(
            _RC.c.id.in_(
                sa.select(alloc.c.resource_class_id).where(
                    alloc.c.resource_provider_id == rp_id,
                    alloc.c.resource_class_id.in_(list(rc_ids)),
                )
            )
        )
        .order_by(_RC.c.id)
    )
    return [row.name for row in rows]


def _values(record):
    return {field: record[field] for field in FIELDS}


def replace_all(db, rp_uuid, seen_generation, records):
    """Make the provider's inventory exactly ``records`` ({class: record}).

    :return: (new generation, {class: stored record}).
    :raise NotFound, ConcurrentUpdate, ResourceClassNotFound, InventoryInUse.
    """
    now = db_mod.utcnow()
    with db.write() as conn:
        rp = rp_obj.get_by_uuid(conn, rp_uuid)
        generation = rp_obj.bump_generation(conn, rp["id"], seen_generation)
        ids = class_ids(conn, records)
        existing = {
            row.resource_class_id
            for row in conn.execute(
                sa.select(_INV.c.resource_class_id).where(_INV.c.resource_provider_id == rp["id"])
            )
        }
        wanted = set(ids.values())
        to_delete = existing - wanted
        busy = _in_use(conn, rp["id"], to_delete)
        if busy:
            raise InventoryInUse(busy, rp_uuid)
        if to_delete:
            conn.execute(
                _INV.delete().where(
                    _INV.c.resource_provider_id == rp["id"],
                    _INV.c.resource_class_id.in_(list(to_delete)),
                )
            )
        for name, record in records.items():
            rc_id = ids[name]
            if rc_id in existing:
                conn.execute(
                    _INV.update()
                    .where(
                        _INV.c.resource_provider_id == rp["id"], _INV.c.resource_class_id == rc_id
                    )
                    .values(updated_at=now, **_values(record))
                )
            else:
                conn.execute(
                    _INV.insert().values(
                        resource_provider_id=rp["id"],
                        resource_class_id=rc_id,
                        created_at=now,
                        **_values(record),
                    )
                )
        stored = get_all(conn, rp["id"])
    return generation, stored


def add(db, rp_uuid, seen_generation, resource_class, record):
    """Add one inventory the provider does not have yet.

    :return: (new generation, stored record).
    :raise NotFound, ConcurrentUpdate, ResourceClassNotFound, InventoryExists.
    """
    try:
        with db.write() as conn:
            rp = rp_obj.get_by_uuid(conn, rp_uuid)
            generation = rp_obj.bump_generation(conn, rp["id"], seen_generation)
            rc_id = class_ids(conn, [resource_class])[resource_class]
            if conn.execute(
                sa.select(_INV.c.id).where(
                    _INV.c.resource_provider_id == rp["id"], _INV.c.resource_class_id == rc_id
                )
            ).first():
                raise InventoryExists(
                    f"Inventory of class {resource_class} already exists on resource "
                    f"provider {rp_uuid}."
                )
            conn.execute(
                _INV.insert().values(
                    resource_provider_id=rp["id"],
                    resource_class_id=rc_id,
                    created_at=db_mod.utcnow(),
                    **_values(record),
                )
            )
            stored = get_all(conn, rp["id"])[resource_class]
    except sa.exc.IntegrityError:
        # Two first inventories of one class raced; the loser is told so.
        raise InventoryExists(
            f"Inventory of class {resource_class} already exists on resource provider {rp_uuid}."
        )
    return generation, stored


def update(db, rp_uuid, seen_generation, resource_class, record):
    """Replace the one inventory of ``resource_class``.

    :return: (new generation, stored record).
    :raise NotFound, ConcurrentUpdate, ResourceClassNotFound, InventoryNotFound.
    """
    with db.write() as conn:
        rp = rp_obj.get_by_uuid(conn, rp_uuid)
        generation = rp_obj.bump_generation(conn, rp["id"], seen_generation)
        rc_id = class_ids(conn, [resource_class])[resource_class]
        result = conn.execute(
            _INV.update()
            .where(_INV.c.resource_provider_id == rp["id"], _INV.c.resource_class_id == rc_id)
            .values(updated_at=db_mod.utcnow(), **_values(record))
        )
        if result.rowcount != 1:
            raise InventoryNotFound(f"No inventory of class {resource_class} found.")
        stored = get_all(conn, rp["id"])[resource_class]
    return generation, stored


def delete(db, rp_uuid, seen_generation, resource_class):
    """Delete the provider's inventory of ``resource_class``.

    :raise NotFound, ConcurrentUpdate, ResourceClassNotFound, InventoryNotFound,
        InventoryInUse.
    """
    with db.write() as conn:
        rp = rp_obj.get_by_uuid(conn, rp_uuid)
        rp_obj.bump_generation(conn, rp["id"], seen_generation)
        rc_id = class_ids(conn, [resource_class])[resource_class]
        busy = _in_use(conn, rp["id"], [rc_id])
        if busy:
            raise InventoryInUse(busy, rp_uuid)
        result = conn.execute(
            _INV.delete().where(
                _INV.c.resource_provider_id == rp["id"], _INV.c.resource_class_id == rc_id
            )
        )
        if result.rowcount != 1:
            raise InventoryNotFound(f"No inventory of class {resource_class} found for delete")
