"""Consumers, their projects, users and consumer types.

Every function takes an open connection: these rows are always read or
written inside the caller's transaction (the allocation write), so a failed
write leaves no orphan consumer behind.
"""

import sqlalchemy as sa

from placement import db as db_mod
from placement import models as m

# What GET shows from 1.38 for a consumer written without a type (as upstream).
UNKNOWN_CONSUMER_TYPE = "unknown"


def _insert_ignore(conn, table, values):
    """INSERT ... ON CONFLICT DO NOTHING, on either backend.

    On PostgreSQL at READ COMMITTED a concurrent uncommitted insert of the same
    key makes this wait for that transaction, so the SELECT that follows sees
    the row once it is committed (or inserts it if the other rolled back).
    """
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    conn.execute(insert(table).values(**values).on_conflict_do_nothing())


def ensure_external_id(conn, table, external_id):
    """Id of the project/user row with ``external_id``, created when missing."""
    found = conn.execute(
        sa.select(table.c.id).where(table.c.external_id == external_id)
    ).scalar_one_or_none()
    if found is not None:
        return found
    _insert_ignore(conn, table, {"external_id": external_id})
    return conn.execute(
        sa.select(table.c.id).where(table.c.external_id == external_id)
    ).scalar_one()


def ensure_consumer_type(conn, name):
    """Id of the consumer type ``name``, created when missing."""
    ct = m.consumer_types
    found = conn.execute(sa.select(ct.c.id).where(ct.c.name == name)).scalar_one_or_none()
    if found is not None:
        return found
    _insert_ignore(conn, ct, {"name": name})
    return conn.execute(sa.select(ct.c.id).where(ct.c.name == name)).scalar_one()


_c = m.consumers

# Built once: statement construction costs more CPU than executing a cached one.
# SELECT id, uuid, generation, ... FROM consumers WHERE uuid IN (:uuids)
_GET_BY_UUIDS = sa.select(
    _c.c.id,
    _c.c.uuid,
    _c.c.generation,
    _c.c.project_id,
    _c.c.user_id,
    _c.c.consumer_type_id,
    _c.c.workload_class,
).where(_c.c.uuid.in_(sa.bindparam("uuids", expanding=True)))

_INSERT = _c.insert()


def get_by_uuids(conn, uuids):
    """{uuid: row} of the existing consumers among ``uuids``."""
    if not uuids:
        return {}
    rows = conn.execute(_GET_BY_UUIDS, {"uuids": sorted(uuids)})
    return {row.uuid: row for row in rows}


def create(conn, uuid, project_id, user_id, consumer_type_id, workload_class):
    """Insert a consumer and return its id.

    It starts at generation 1: upstream creates it at 0 and bumps it with the
    allocation write, so clients see 1 after the first claim.

    A concurrent creator of the same uuid makes this raise IntegrityError
    (the unique index); the caller retries in a fresh transaction, where the
    consumer then exists and its generation is checked as usual.
    """
    return conn.execute(
        _INSERT,
        {
            "uuid": uuid,
            "project_id": project_id,
            "user_id": user_id,
            "generation": 1,
            "consumer_type_id": consumer_type_id,
            "workload_class": workload_class,
            "created_at": db_mod.utcnow(),
        },
    ).inserted_primary_key[0]


def bump(conn, consumer_id, seen_generation, values):
    """Increment a consumer's generation from ``seen_generation``, setting ``values``.

    Returns False when another transaction changed the consumer since it was
    read (the UPDATE matched no row). The row lock this takes also orders
    concurrent writers of the same consumer.
    """
    c = m.consumers
    # UPDATE consumers SET generation = generation + 1, ... WHERE id = :id AND generation = :seen
    res = conn.execute(
        c.update()
        .where(c.c.id == consumer_id, c.c.generation == seen_generation)
        .values(generation=c.c.generation + 1, updated_at=db_mod.utcnow(), **values)
    )
    return res.rowcount == 1


def type_names(conn):
    """{consumer_type_id: name}, with None mapped to 'unknown'."""
    ct = m.consumer_types
    names = {row.id: row.name for row in conn.execute(sa.select(ct.c.id, ct.c.name))}
    names[None] = UNKNOWN_CONSUMER_TYPE
    return names
