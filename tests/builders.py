"""Direct-to-database builders for test data (providers, inventories, traits...).

They write rows the way the object layer does, so tests of one area (allocation
candidates, the power controller) need not go through another area's API.
Each function takes a ``placement.db.Database``.
"""

import uuid as uuid_lib

import sqlalchemy as sa

from placement import db as db_mod
from placement import models as m


def _now():
    return db_mod.utcnow()


def create_provider(db, name=None, uuid=None, parent_uuid=None):
    """Insert a provider (a root unless parent_uuid); return its uuid."""
    uuid = uuid or str(uuid_lib.uuid4())
    name = name or f"rp-{uuid[:8]}"
    rp = m.resource_providers
    with db.write() as conn:
        parent_id = root_id = None
        if parent_uuid:
            row = conn.execute(
                sa.select(rp.c.id, rp.c.root_provider_id).where(rp.c.uuid == parent_uuid)
            ).one()
            parent_id, root_id = row.id, row.root_provider_id
        new_id = conn.execute(
            rp.insert().values(uuid=uuid, name=name, generation=0, parent_provider_id=parent_id,
                               root_provider_id=root_id, created_at=_now())
        ).inserted_primary_key[0]
        if root_id is None:
            conn.execute(rp.update().where(rp.c.id == new_id).values(root_provider_id=new_id))
    return uuid


def _rp_id(conn, uuid):
    return conn.execute(
        sa.select(m.resource_providers.c.id).where(m.resource_providers.c.uuid == uuid)
    ).scalar_one()


def _rc_id(conn, name):
    rc = m.resource_classes
    found = conn.execute(sa.select(rc.c.id).where(rc.c.name == name)).scalar_one_or_none()
    if found is not None:
        return found
    next_id = conn.execute(sa.select(sa.func.max(rc.c.id))).scalar_one() or 0
    next_id = max(next_id + 1, db_mod.CUSTOM_RC_ID_BASE)
    conn.execute(rc.insert().values(id=next_id, name=name, created_at=_now()))
    return next_id


def _trait_id(conn, name):
    tr = m.traits
    found = conn.execute(sa.select(tr.c.id).where(tr.c.name == name)).scalar_one_or_none()
    if found is not None:
        return found
    return conn.execute(tr.insert().values(name=name, created_at=_now())).inserted_primary_key[0]


def set_inventory(db, rp_uuid, resource_class, total, reserved=0, min_unit=1, max_unit=None,
                  step_size=1, allocation_ratio=1.0):
    """Add or replace one inventory record (custom classes are created on the fly)."""
    inv = m.inventories
    with db.write() as conn:
        rp_id = _rp_id(conn, rp_uuid)
        rc_id = _rc_id(conn, resource_class)
        conn.execute(inv.delete().where(inv.c.resource_provider_id == rp_id,
                                        inv.c.resource_class_id == rc_id))
        conn.execute(inv.insert().values(
            resource_provider_id=rp_id, resource_class_id=rc_id, total=total, reserved=reserved,
            min_unit=min_unit, max_unit=max_unit if max_unit is not None else total,
            step_size=step_size, allocation_ratio=allocation_ratio, created_at=_now()))
        _bump(conn, rp_id)


def set_traits(db, rp_uuid, *names):
    rpt = m.resource_provider_traits
    with db.write() as conn:
        rp_id = _rp_id(conn, rp_uuid)
        conn.execute(rpt.delete().where(rpt.c.resource_provider_id == rp_id))
        for name in names:
            conn.execute(rpt.insert().values(resource_provider_id=rp_id,
                                             trait_id=_trait_id(conn, name)))
        _bump(conn, rp_id)


def set_aggregates(db, rp_uuid, *agg_uuids):
    agg = m.placement_aggregates
    rpa = m.resource_provider_aggregates
    with db.write() as conn:
        rp_id = _rp_id(conn, rp_uuid)
        conn.execute(rpa.delete().where(rpa.c.resource_provider_id == rp_id))
        for agg_uuid in agg_uuids:
            agg_id = conn.execute(
                sa.select(agg.c.id).where(agg.c.uuid == agg_uuid)).scalar_one_or_none()
            if agg_id is None:
                agg_id = conn.execute(agg.insert().values(uuid=agg_uuid)).inserted_primary_key[0]
            conn.execute(rpa.insert().values(resource_provider_id=rp_id, aggregate_id=agg_id))
        _bump(conn, rp_id)


def allocate(db, consumer_uuid, allocations, project="proj", user="user",
             workload_class="standard", consumer_type=None):
    """Record allocations ``{rp_uuid: {rc: amount}}`` for a consumer, no capacity check."""
    with db.write() as conn:
        proj_id = _external(conn, m.projects, project)
        user_id = _external(conn, m.users, user)
        cons = m.consumers
        if conn.execute(sa.select(cons.c.id).where(cons.c.uuid == consumer_uuid)).first() is None:
            type_id = None
            if consumer_type:
                type_id = _external_name(conn, m.consumer_types, consumer_type)
            conn.execute(cons.insert().values(
                uuid=consumer_uuid, project_id=proj_id, user_id=user_id, generation=0,
                consumer_type_id=type_id, workload_class=workload_class, created_at=_now()))
        for rp_uuid, resources in allocations.items():
            rp_id = _rp_id(conn, rp_uuid)
            for rc, amount in resources.items():
                conn.execute(m.allocations.insert().values(
                    resource_provider_id=rp_id, consumer_id=consumer_uuid,
                    resource_class_id=_rc_id(conn, rc), used=amount, created_at=_now()))
            _bump(conn, rp_id)


def _external(conn, table, external_id):
    found = conn.execute(
        sa.select(table.c.id).where(table.c.external_id == external_id)).scalar_one_or_none()
    if found is not None:
        return found
    return conn.execute(table.insert().values(external_id=external_id)).inserted_primary_key[0]


def _external_name(conn, table, name):
    found = conn.execute(sa.select(table.c.id).where(table.c.name == name)).scalar_one_or_none()
    if found is not None:
        return found
    return conn.execute(table.insert().values(name=name)).inserted_primary_key[0]


def _bump(conn, rp_id):
    rp = m.resource_providers
    conn.execute(rp.update().where(rp.c.id == rp_id).values(generation=rp.c.generation + 1,
                                                            updated_at=_now()))
