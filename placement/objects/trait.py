"""Traits (standard from os-traits, and ``CUSTOM_``) and the traits of a provider."""

import sqlalchemy as sa

from placement import db as db_mod
from placement import models as m
from placement.objects import resource_provider as rp_obj

_TR = m.traits
_RPT = m.resource_provider_traits
CUSTOM_PREFIX = "CUSTOM_"


class TraitInUse(rp_obj.ObjectError):
    def __init__(self, name):
        super().__init__(f"The trait {name} is in use by a resource provider.")


class CannotDeleteStandard(rp_obj.ObjectError):
    def __init__(self, name):
        super().__init__(f"Cannot delete standard trait {name}.")


def get_by_name(conn, name):
    if not rp_obj.storable(name):
        raise rp_obj.TraitNotFound([name])
    row = conn.execute(sa.select(_TR).where(_TR.c.name == name)).first()
    if row is None:
        raise rp_obj.TraitNotFound([name])
    return dict(row._mapping)


def get(db, name):
    """The trait ``name``; TraitNotFound otherwise."""
    with db.read() as conn:
        return get_by_name(conn, name)


def ensure(db, name):
    """Create the custom trait unless it exists; return (trait, created)."""
    with db.read() as conn:
        row = conn.execute(sa.select(_TR).where(_TR.c.name == name)).first()
    if row is not None:
        return dict(row._mapping), False
    try:
        with db.write() as conn:
            conn.execute(_TR.insert().values(name=name, created_at=db_mod.utcnow()))
            return get_by_name(conn, name), True
    except sa.exc.IntegrityError:
        # Created by a concurrent request: it exists now, which is all we promise.
        with db.read() as conn:
            return get_by_name(conn, name), False


def delete(db, name):
    """:raise TraitNotFound, CannotDeleteStandard, TraitInUse."""
    with db.write() as conn:
        trait = get_by_name(conn, name)
        if not name.startswith(CUSTOM_PREFIX):
            raise CannotDeleteStandard(name)
        if conn.execute(
            sa.select(_RPT.c.trait_id).where(_RPT.c.trait_id == trait["id"]).limit(1)
        ).first():
            raise TraitInUse(name)
        conn.execute(_TR.delete().where(_TR.c.id == trait["id"]))


def list_traits(db, name_in=None, prefix=None, associated=None):
    """Traits filtered by exact names, a name prefix and being on some provider."""
    query = sa.select(_TR).order_by(_TR.c.name)
    if name_in is not None:
        name_in = [n for n in name_in if rp_obj.storable(n)]
        query = query.where(_TR.c.name.in_(list(name_in)))
    if prefix is not None:
        if not rp_obj.storable(prefix):
            return []
        # A literal prefix: escape LIKE's wildcards ('_' is common in traits).
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = query.where(_TR.c.name.like(escaped + "%", escape="\\"))
    if associated is not None:
        linked = sa.select(_RPT.c.trait_id)
        query = query.where(_TR.c.id.in_(linked) if associated else _TR.c.id.not_in(linked))
    with db.read() as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


def of_provider(conn, rp_id):
    rows = conn.execute(
        sa.select(_TR)
        .join(_RPT, _RPT.c.trait_id == _TR.c.id)
        .where(_RPT.c.resource_provider_id == rp_id)
        .order_by(_TR.c.name)
    )
    return [dict(r._mapping) for r in rows]


def for_provider(db, rp_uuid):
    """(provider, [trait dicts]) read in one transaction.

    :raise NotFound: no provider ``rp_uuid``.
    """
    with db.read() as conn:
        rp = rp_obj.get_by_uuid(conn, rp_uuid)
        return rp, of_provider(conn, rp["id"])


def set_for_provider(db, rp_uuid, seen_generation, names):
    """Make the provider's traits exactly ``names``.

    The generation moves only when the set changes (upstream does the same).

    :return: (generation, [trait dicts]).
    :raise NotFound, ConcurrentUpdate, TraitNotFound.
    """
    with db.write() as conn:
        rp = rp_obj.get_by_uuid(conn, rp_uuid)
        if rp["generation"] != seen_generation:
            raise rp_obj.ConcurrentUpdate()
        ids = rp_obj._trait_ids(conn, names)
        current = {
            row.trait_id
            for row in conn.execute(
                sa.select(_RPT.c.trait_id).where(_RPT.c.resource_provider_id == rp["id"])
            )
        }
        wanted = set(ids.values())
        generation = rp["generation"]
        if wanted != current:
            generation = rp_obj.bump_generation(conn, rp["id"], seen_generation)
            if current - wanted:
                conn.execute(
                    _RPT.delete().where(
                        _RPT.c.resource_provider_id == rp["id"],
                        _RPT.c.trait_id.in_(list(current - wanted)),
                    )
                )
            for trait_id in sorted(wanted - current):
                conn.execute(_RPT.insert().values(resource_provider_id=rp["id"], trait_id=trait_id))
        traits = of_provider(conn, rp["id"])
    return generation, traits
