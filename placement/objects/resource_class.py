"""Resource classes: the standard ones (read-only) and ``CUSTOM_`` ones.

Standard classes keep their index in os_resource_classes.STANDARDS as id;
custom ones get ids from CUSTOM_RC_ID_BASE up, so an id tells which is which.
"""

import sqlalchemy as sa

from placement import db as db_mod
from placement import models as m
from placement.objects import resource_provider as rp_obj

_RC = m.resource_classes
# Attempts to find a free id when concurrent creates pick the same one.
_CREATE_ATTEMPTS = 20


class ResourceClassExists(rp_obj.ObjectError):
    def __init__(self, name):
        super().__init__(f"Resource class {name} already exists.")


class CannotChangeStandard(rp_obj.ObjectError):
    pass


class ResourceClassInUse(rp_obj.ObjectError):
    def __init__(self, name):
        super().__init__(f"Cannot delete resource class {name}. Class is in use in inventory.")


def is_standard(rc):
    return rc["id"] < db_mod.CUSTOM_RC_ID_BASE


def list_all(db):
    """Every class, standard ones first (by id)."""
    with db.read() as conn:
        return [dict(r._mapping) for r in conn.execute(sa.select(_RC).order_by(_RC.c.id))]


def get(db, name):
    """The class ``name``; ResourceClassNotFound otherwise."""
    with db.read() as conn:
        return get_by_name(conn, name)


def get_by_name(conn, name):
    if not rp_obj.storable(name):
        raise rp_obj.ResourceClassNotFound(name)
    row = conn.execute(sa.select(_RC).where(_RC.c.name == name)).first()
    if row is None:
        raise rp_obj.ResourceClassNotFound(name)
    return dict(row._mapping)


def create(db, name):
    """Create a custom class; return it.

    :raise ResourceClassExists: the name is taken (standard or custom).
    """
    for _attempt in range(_CREATE_ATTEMPTS):
        try:
            with db.write() as conn:
                if conn.execute(sa.select(_RC.c.id).where(_RC.c.name == name)).first():
                    raise ResourceClassExists(name)
                top = conn.execute(sa.select(sa.func.max(_RC.c.id))).scalar_one() or 0
                new_id = max(top + 1, db_mod.CUSTOM_RC_ID_BASE)
                conn.execute(_RC.insert().values(id=new_id, name=name, created_at=db_mod.utcnow()))
                return get_by_name(conn, name)
        except sa.exc.IntegrityError:
            # Another create took this id or this name; look again.
            continue
    with db.read() as conn:
        if conn.execute(sa.select(_RC.c.id).where(_RC.c.name == name)).first():
            raise ResourceClassExists(name)
    raise rp_obj.ConcurrentUpdate(
        f"Max retries of DB transaction exceeded attempting to create resource class: "
        f"{name}, please try again."
    )


def rename(db, name, new_name):
    """Rename a custom class; return it.

    :raise ResourceClassNotFound, CannotChangeStandard, ResourceClassExists.
    """
    try:
        with db.write() as conn:
            rc = get_by_name(conn, name)
            if is_standard(rc):
                raise CannotChangeStandard(f"Cannot update standard resource class {name}")
            if (
                new_name != name
                and conn.execute(sa.select(_RC.c.id).where(_RC.c.name == new_name)).first()
            ):
                raise ResourceClassExists(new_name)
            conn.execute(
                _RC.update()
                .where(_RC.c.id == rc["id"])
                .values(name=new_name, updated_at=db_mod.utcnow())
            )
            return get_by_name(conn, new_name)
    except sa.exc.IntegrityError:
        raise ResourceClassExists(new_name)


def delete(db, name):
    """Delete a custom class nobody has inventory or allocations of.

    :raise ResourceClassNotFound, CannotChangeStandard, ResourceClassInUse.
    """
    with db.write() as conn:
        rc = get_by_name(conn, name)
        if is_standard(rc):
            raise CannotChangeStandard(f"Cannot delete standard resource class {name}.")
        for table in (m.inventories, m.allocations):
            if conn.execute(
                sa.select(table.c.id).where(table.c.resource_class_id == rc["id"]).limit(1)
            ).first():
                raise ResourceClassInUse(name)
        conn.execute(_RC.delete().where(_RC.c.id == rc["id"]))
