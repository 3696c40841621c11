"""The reshaper: move inventories and allocations within a tree, atomically.

One transaction per attempt, built on ``allocation.replace_all``:

1. ``before``: lock and check every provider named in ``inventories`` against
   the generation the client gave (``UPDATE ... WHERE generation = :given``),
   then write the *interim* inventory: the union of what exists and what is
   wanted, so the new allocations have somewhere to go while the old ones
   still have theirs;
2. the allocation write (checks, generation guards) of ``replace_all``;
3. ``after``: set each provider's inventory to exactly what was asked,
   refusing to drop a class that still has allocations (inventory in use).

The provider row is locked before the in-use check, so no concurrent claim
can land on an inventory after we have looked and before we delete it.
"""

import sqlalchemy as sa

from placement import db as db_mod
from placement import models as m
from placement.objects import allocation as alloc_obj


class ProviderNotFound(alloc_obj.AllocationError):
    def __init__(self, uuid):
        super().__init__(
            f"Resource provider {uuid} in inventories not found: No resource provider "
            f"with uuid {uuid} found"
        )


class ProviderGenerationConflict(alloc_obj.AllocationError):
    def __init__(self, uuid, actual, given):
        super().__init__(
            f"resource provider generation conflict for provider {uuid}: actual: {actual}, "
            f"given: {given}"
        )


class InventoryInUse(alloc_obj.AllocationError):
    def __init__(self, resource_classes, uuid):
        super().__init__(
            f"Inventory for '{resource_classes}' on resource provider '{uuid}' in use."
        )


class InvalidInventoryCapacity(alloc_obj.InvalidInventory):
    def __init__(self, resource_class, uuid):
        super().__init__(
            resource_class,
            uuid,
            f"Invalid inventory for '{resource_class}' on resource provider '{uuid}'. The "
            "reserved value is greater than total.",
        )


def reshape(db, inventories, writes, retry_count):
    """Apply ``inventories`` and the allocation ``writes`` in one transaction.

    Within the transaction of each attempt of ``allocation.replace_all``:
    check the request and write the new inventories (before the allocation
    writes, so the new capacity counts), then drop the inventories the
    request leaves out (after them, so allocations that moved away no longer
    hold them) and move every provider's generation once more.

    :param inventories: ``{rp_uuid: {"resource_provider_generation": int,
        "inventories": {rc_name: {total, reserved, min_unit, max_unit,
        step_size, allocation_ratio}}}}`` with defaults already filled in.
    :param writes: ``[allocation.ConsumerWrite]``.
    :raise ProviderNotFound, ProviderGenerationConflict, InventoryInUse, and
        everything ``allocation.replace_all`` raises.
    """
    written = {}

    def before(conn):
        written.clear()
        found, rc_ids = _check(conn, inventories)
        written.update(_write_inventories(conn, inventories, found, rc_ids))

    def after(conn):
        _drop_left_out(conn, inventories, written)

    alloc_obj.replace_all(db, writes, retry_count, before=before, after=after)


def _check(conn, inventories):
    """({uuid: provider row}, {class name: id}) once the request is known good.

    :raise ProviderNotFound, ProviderGenerationConflict, ResourceClassNotFound,
        InvalidInventoryCapacity.
    """
    rp, rc = m.resource_providers, m.resource_classes
    found = {
        row.uuid: row
        for row in conn.execute(
            sa.select(rp.c.id, rp.c.uuid, rp.c.generation).where(rp.c.uuid.in_(list(inventories)))
        )
    }
    for rp_uuid, data in inventories.items():
        row = found.get(rp_uuid)
        if row is None:
            raise ProviderNotFound(rp_uuid)
        if row.generation != data["resource_provider_generation"]:
            raise ProviderGenerationConflict(
                rp_uuid, row.generation, data["resource_provider_generation"]
            )
    names = sorted({n for d in inventories.values() for n in d["inventories"]})
    rc_ids = (
        {
            r.name: r.id
            for r in conn.execute(sa.select(rc.c.id, rc.c.name).where(rc.c.name.in_(names)))
        }
        if names
        else {}
    )
    for name in names:
        if name not in rc_ids:
            raise alloc_obj.ResourceClassNotFound(name)
    for rp_uuid, data in inventories.items():
        for name, record in data["inventories"].items():
            if record["reserved"] > record["total"]:
                raise InvalidInventoryCapacity(name, rp_uuid)
    return found, rc_ids


def _write_inventories(conn, inventories, found, rc_ids):
    """Lock every provider, in id order, checking the client's generation, and
    add or update the inventories it asks for.

    An interim inventory write counts as one generation (as upstream).

    :return: {rp_uuid: (rp id, {class id: inventory id before}, rc_ids)}.
    :raise LostRace: a generation moved since ``_check`` read it.
    """
    rp, inv = m.resource_providers, m.inventories
    now = db_mod.utcnow()
    written = {}
    for rp_uuid in sorted(inventories, key=lambda u: found[u].id):
        row = found[rp_uuid]
        wanted = inventories[rp_uuid]["inventories"]
        step = 1 if wanted else 0
        res = conn.execute(
            rp.update()
            .where(rp.c.id == row.id, rp.c.generation == row.generation)
            .values(generation=rp.c.generation + step, updated_at=now)
        )
        if res.rowcount != 1:
            raise alloc_obj.LostRace()
        existing = {
            r.resource_class_id: r.id
            for r in conn.execute(
                sa.select(inv.c.id, inv.c.resource_class_id).where(
                    inv.c.resource_provider_id == row.id
                )
            )
        }
        for name, record in wanted.items():
            values = dict(record)
            if rc_ids[name] in existing:
                conn.execute(
                    inv.update()
                    .where(inv.c.id == existing[rc_ids[name]])
                    .values(updated_at=now, **values)
                )
            else:
                conn.execute(
                    inv.insert().values(
                        resource_provider_id=row.id,
                        resource_class_id=rc_ids[name],
                        created_at=now,
                        **values,
                    )
                )
        written[rp_uuid] = (row.id, existing, rc_ids)
    return written


def _drop_left_out(conn, inventories, written):
    """Delete the inventories each provider had and the request leaves out,
    unless allocations still use them, and move each generation once more.

    :raise InventoryInUse.
    """
    rp, inv, a = m.resource_providers, m.inventories, m.allocations
    rc = m.resource_classes
    now = db_mod.utcnow()
    for rp_uuid in sorted(inventories, key=lambda u: written[u][0]):
        rp_id, existing, rc_ids = written[rp_uuid]
        keep = {rc_ids[n] for n in inventories[rp_uuid]["inventories"]}
        drop = sorted(set(existing) - keep)
        if drop:
            in_use = (
                conn.execute(
                    sa.select(rc.c.name)
                    .distinct()
                    .select_from(a.join(rc, rc.c.id == a.c.resource_class_id))
                    .where(a.c.resource_provider_id == rp_id, a.c.resource_class_id.in_(drop))
                )
                .scalars()
                .all()
            )
            if in_use:
                raise InventoryInUse(", ".join(sorted(in_use)), rp_uuid)
            conn.execute(
                inv.delete().where(
                    inv.c.resource_provider_id == rp_id, inv.c.resource_class_id.in_(drop)
                )
            )
        conn.execute(
            rp.update()
            .where(rp.c.id == rp_id)
            .values(generation=rp.c.generation + 1, updated_at=now)
        )
