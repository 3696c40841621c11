"""Usages: of one provider, and totals of a project (and user)."""

import sqlalchemy as sa

from placement import models as m
from placement.objects import consumer as consumer_obj


def for_provider(db, rp_uuid):
    """``(generation, {resource_class: used})`` of a provider, or None if unknown.

    Every class the provider has inventory of is listed, 0 when unused (as
    upstream). Read in one statement, so the numbers are one snapshot.
    """
    rp, inv, a, rc = m.resource_providers, m.inventories, m.allocations, m.resource_classes
    # SELECT rp.generation, rc.name,
    #        (SELECT COALESCE(SUM(a.used), 0) FROM allocations a
    #          WHERE a.resource_provider_id = rp.id AND a.resource_class_id = inv.resource_class_id)
    # FROM resource_providers rp LEFT JOIN inventories inv ON inv.resource_provider_id = rp.id
    # LEFT JOIN resource_classes rc ON rc.id = inv.resource_class_id WHERE rp.uuid = :uuid
    used = (
        sa.select(sa.func.coalesce(sa.func.sum(a.c.used), 0))
        .where(
            a.c.resource_provider_id == rp.c.id, a.c.resource_class_id == inv.c.resource_class_id
        )
        .scalar_subquery()
    )
    stmt = (
        sa.select(rp.c.generation, rc.c.name, used.label("used"))
        .select_from(
            rp.outerjoin(inv, inv.c.resource_provider_id == rp.c.id).outerjoin(
                rc, rc.c.id == inv.c.resource_class_id
            )
        )
        .where(rp.c.uuid == rp_uuid)
    )
    with db.read() as conn:
        rows = conn.execute(stmt).all()
    if not rows:
        return None
    return rows[0].generation, {row.name: int(row.used) for row in rows if row.name}


def _base(project_id, user_id):
    a, c, p, u = m.allocations, m.consumers, m.projects, m.users
    join = a.join(c, a.c.consumer_id == c.c.uuid).join(p, c.c.project_id == p.c.id)
    conditions = [p.c.external_id == project_id]
    if user_id:
        join = join.join(u, c.c.user_id == u.c.id)
        conditions.append(u.c.external_id == user_id)
    return join, conditions


def totals(db, project_id, user_id=None):
    """``{resource_class: used}`` over the project's (and user's) consumers."""
    a, rc = m.allocations, m.resource_classes
    join, conditions = _base(project_id, user_id)
    stmt = (
        sa.select(rc.c.name, sa.func.sum(a.c.used))
        .select_from(join.join(rc, rc.c.id == a.c.resource_class_id))
        .where(*conditions)
        .group_by(rc.c.name)
    )
    with db.read() as conn:
        return {name: int(used) for name, used in conn.execute(stmt)}


def totals_by_consumer_type(db, project_id, user_id=None, consumer_type=None):
    """``{type: {"consumer_count": n, resource_class: used}}`` (1.38).

    ``consumer_type`` "all" folds every type into one "all" entry; "unknown"
    selects consumers without a type; any other value selects that type;
    None lists every type.
    """
    a, c, rc, ct = m.allocations, m.consumers, m.resource_classes, m.consumer_types
    join, conditions = _base(project_id, user_id)
    join = join.outerjoin(ct, ct.c.id == c.c.consumer_type_id)
    type_col = sa.func.coalesce(ct.c.name, consumer_obj.UNKNOWN_CONSUMER_TYPE)
    if consumer_type == "unknown":
        conditions.append(c.c.consumer_type_id.is_(None))
    elif consumer_type not in (None, "all"):
        conditions.append(ct.c.name == consumer_type)
    # "all" folds every type into one entry: group by nothing but the class
    # (a constant in GROUP BY is an error on PostgreSQL).
    type_keys = [] if consumer_type == "all" else [type_col]
    # Consumers are counted per type in their own query: counting after the
    # per-class grouping would count a consumer once per class it uses.
    counts_stmt = (
        sa.select(*type_keys, sa.func.count(sa.distinct(a.c.consumer_id)))
        .select_from(join)
        .where(*conditions)
        .group_by(*type_keys)
    )
    usage_stmt = (
        sa.select(*type_keys, rc.c.name, sa.func.sum(a.c.used))
        .select_from(join.join(rc, rc.c.id == a.c.resource_class_id))
        .where(*conditions)
        .group_by(*type_keys, rc.c.name)
    )
    result = {}
    with db.read() as conn:
        usage_rows = conn.execute(usage_stmt).all()
        if not usage_rows:
            return {}
        for row in conn.execute(counts_stmt):
            type_name = "all" if consumer_type == "all" else row[0]
            result[type_name] = {"consumer_count": int(row[-1])}
        for row in usage_rows:
            type_name = "all" if consumer_type == "all" else row[0]
            result.setdefault(type_name, {"consumer_count": 0})[row[-2]] = int(row[-1])
    return result
