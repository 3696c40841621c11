"""Aggregates a provider is a member of.

Aggregates are bare UUIDs; a row in placement_aggregates is made the first
time a UUID is used and kept afterwards (other providers may refer to it).
"""

import sqlalchemy as sa

from placement import models as m
from placement.objects import resource_provider as rp_obj

_AGG = m.placement_aggregates
_RPA = m.resource_provider_aggregates


def of_provider(conn, rp_id):
    rows = conn.execute(
        sa.select(_AGG.c.uuid)
        .join(_RPA, _RPA.c.aggregate_id == _AGG.c.id)
        .where(_RPA.c.resource_provider_id == rp_id)
        .order_by(_AGG.c.id)
    )
    return [row.uuid for row in rows]


def for_provider(db, rp_uuid):
    """(provider, [aggregate uuid]) read in one transaction.

    :raise NotFound: no provider ``rp_uuid``.
    """
    with db.read() as conn:
        rp = rp_obj.get_by_uuid(conn, rp_uuid)
        return rp, of_provider(conn, rp["id"])


def _ensure_aggregates(db, conn, uuids):
    """{uuid: id}, inserting unknown UUIDs (concurrent inserts are harmless)."""
    if not uuids:
        return {}
    if db.is_postgres:
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    conn.execute(insert(_AGG).on_conflict_do_nothing(), [{"uuid": u} for u in uuids])
    return {
        row.uuid: row.id
        for row in conn.execute(sa.select(_AGG.c.uuid, _AGG.c.id).where(_AGG.c.uuid.in_(uuids)))
    }


def set_for_provider(db, rp_uuid, uuids, seen_generation=None):
    """Make the provider's aggregates exactly ``uuids``.

    :param seen_generation: from 1.19 the caller's generation; it is checked
        and the generation moves. None (before 1.19): no check, no move.
    :return: the provider's generation afterwards.
    :raise NotFound, ConcurrentUpdate.
    """
    uuids = list(dict.fromkeys(uuids))
    try:
        return _set(db, rp_uuid, uuids, seen_generation)
    except sa.exc.IntegrityError:
        # Pre-1.19 writers take no generation lock: two of them linking the
        # same aggregate at once collide on the link's primary key.
        raise rp_obj.ConcurrentUpdate()


def _set(db, rp_uuid, uuids, seen_generation):
    with db.write() as conn:
        rp = rp_obj.get_by_uuid(conn, rp_uuid)
        generation = rp["generation"]
        if seen_generation is not None:
            generation = rp_obj.bump_generation(conn, rp["id"], seen_generation)
        ids = _ensure_aggregates(db, conn, uuids)
        current = {
            row.aggregate_id
            for row in conn.execute(
                sa.select(_RPA.c.aggregate_id).where(_RPA.c.resource_provider_id == rp["id"])
            )
        }
        wanted = set(ids.values())
        if current - wanted:
            conn.execute(
                _RPA.delete().where(
                    _RPA.c.resource_provider_id == rp["id"],
                    _RPA.c.aggregate_id.in_(list(current - wanted)),
                )
            )
        for agg_id in sorted(wanted - current):
            conn.execute(_RPA.insert().values(resource_provider_id=rp["id"], aggregate_id=agg_id))
    return generation
