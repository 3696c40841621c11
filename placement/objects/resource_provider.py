"""Resource providers: create, read, update (name, parent), delete, list.

Also the domain errors the other provider-scoped object modules share, and
``bump_generation``, the one place where a provider's generation moves.

Concurrency: every write that changes what a provider offers (inventories,
traits, aggregates) begins its transaction with ``bump_generation(conn, id,
seen)``: ``UPDATE ... SET generation = seen + 1 WHERE id = :id AND
generation = :seen``. Doing it first takes the provider's row lock at once,
so on PostgreSQL concurrent writers queue behind the winner and then find the
generation moved (rowcount 0) before touching any other row; on SQLite the
``BEGIN IMMEDIATE`` of ``db.write()`` already serialises them.
"""

import collections
import functools

import sqlalchemy as sa

from placement import db as db_mod
from placement import models as m

_RP = m.resource_providers


class ObjectError(Exception):
    """Base of the domain errors; ``str()`` is upstream's message."""


class NotFound(ObjectError):
    pass


class ConcurrentUpdate(ObjectError):
    def __init__(self, message=None):
        super().__init__(
            message
            or "Another thread concurrently updated the resource provider data. "
            "Please retry your update"
        )


class DuplicateProvider(ObjectError):
    def __init__(self, fields):
        # ``fields``: [("uuid", value), ("name", value)] in that order.
        self.fields = fields
        shown = ", ".join(f"{key}: {value}" for key, value in fields)
        super().__init__(f"Conflicting resource provider {shown} already exists.")


class ActionError(ObjectError):
    """Upstream's ObjectActionError: a 400 on create/update of a provider."""

    def __init__(self, action, reason):
        super().__init__(f"Object action {action} failed because: {reason}")


class CannotDeleteParent(ObjectError):
    pass


class ProviderInUse(ObjectError):
    def __init__(self):
        super().__init__("Resource provider has allocations.")


def storable(text):
    """False for strings no provider, class or trait can be named by.

    PostgreSQL text cannot hold NUL; querying with one is a driver error
    there, so such a value is answered as "matches nothing" before any SQL.
    """
    return isinstance(text, str) and "\x00" not in text


@functools.cache
def _provider_select():
    """Provider columns plus the uuids of its root and parent. Built once:
    its two aliases copy every column of the table, which was a sixth of
    what a GET of one provider cost placement."""
    root = _RP.alias("root_rp")
    parent = _RP.alias("parent_rp")
    joined = _RP.join(root, _RP.c.root_provider_id == root.c.id, isouter=True).join(
        parent, _RP.c.parent_provider_id == parent.c.id, isouter=True
    )
    return sa.select(
        _RP.c.id,
        _RP.c.uuid,
        _RP.c.name,
        _RP.c.generation,
        _RP.c.root_provider_id,
        _RP.c.parent_provider_id,
        root.c.uuid.label("root_provider_uuid"),
        parent.c.uuid.label("parent_provider_uuid"),
        _RP.c.created_at,
        _RP.c.updated_at,
    ).select_from(joined)


def _as_dict(row):
    data = dict(row._mapping)
    # A provider whose root column is not yet set is its own root.
    if data["root_provider_uuid"] is None:
        data["root_provider_uuid"] = data["uuid"]
    return data


def find(conn, uuid):
    """The provider with ``uuid`` as a dict, or None."""
    if not storable(uuid):
        return None
    row = conn.execute(_provider_select().where(_RP.c.uuid == uuid)).first()
    return _as_dict(row) if row is not None else None


def get_by_uuid(conn, uuid):
    """The provider with ``uuid``; NotFound with upstream's message otherwise."""
    found = find(conn, uuid)
    if found is None:
        raise NotFound(f"No resource provider with uuid {uuid} found")
    return found


def get(db, uuid):
    """The provider with ``uuid``, read in its own transaction; NotFound otherwise."""
    with db.read() as conn:
        return get_by_uuid(conn, uuid)


def bump_generation(conn, rp_id, seen):
    """Move the generation from ``seen`` to ``seen + 1`` or raise ConcurrentUpdate.

    :return: the new generation.
    """
    result = conn.execute(
        _RP.update()
        .where(_RP.c.id == rp_id, _RP.c.generation == seen)
        .values(generation=seen + 1, updated_at=db_mod.utcnow())
    )
    if result.rowcount != 1:
        raise ConcurrentUpdate()
    return seen + 1


def _duplicates(conn, uuid, name):
    fields = []
    if conn.execute(sa.select(_RP.c.id).where(_RP.c.uuid == uuid)).first() is not None:
        fields.append(("uuid", uuid))
    if (
        name is not None
        and conn.execute(sa.select(_RP.c.id).where(_RP.c.name == name)).first() is not None
    ):
        fields.append(("name", name))
    return fields


def create(db, uuid, name, parent_uuid=None):
    """Insert a provider (a root unless ``parent_uuid``); return it as a dict.

    :raise ActionError: the parent is the provider itself or does not exist.
    :raise DuplicateProvider: the uuid or the name is taken.
    """
    if not name:
        # The schema allows "" (upstream's too); upstream's object refuses it.
        raise ActionError("create", "name is required")
    if not storable(name):
        raise ActionError("create", "name must not contain NUL characters.")
    if parent_uuid is not None and parent_uuid == uuid:
        raise ActionError(
            "create",
            "parent provider UUID cannot be same as UUID. Please set parent provider "
            "UUID to None if there is no parent.",
        )
    try:
        with db.write() as conn:
            dups = _duplicates(conn, uuid, name)
            if dups:
                raise DuplicateProvider(dups)
            parent_id = root_id = None
            if parent_uuid is not None:
                parent = find(conn, parent_uuid)
                if parent is None:
                    raise ActionError("create", "parent provider UUID does not exist.")
                parent_id, root_id = parent["id"], parent["root_provider_id"]
            new_id = conn.execute(
                _RP.insert().values(
                    uuid=uuid,
                    name=name,
                    generation=0,
                    parent_provider_id=parent_id,
                    root_provider_id=root_id,
                    created_at=db_mod.utcnow(),
                )
            ).inserted_primary_key[0]
            if root_id is None:
                conn.execute(_RP.update().where(_RP.c.id == new_id).values(root_provider_id=new_id))
    except sa.exc.IntegrityError:
        # Another request inserted the same uuid/name (or deleted the parent)
        # between our check and our insert; say which.
        with db.read() as conn:
            dups = _duplicates(conn, uuid, name)
        if dups:
            raise DuplicateProvider(dups)
        raise ActionError("create", "parent provider UUID does not exist.")
    with db.read() as conn:
        return get_by_uuid(conn, uuid)


def _subtree_ids(conn, rp_id, root_id):
    """Ids of ``rp_id`` and every provider below it (same tree)."""
    rows = conn.execute(
        sa.select(_RP.c.id, _RP.c.parent_provider_id).where(_RP.c.root_provider_id == root_id)
    ).all()
    children = collections.defaultdict(list)
    for row in rows:
        if row.parent_provider_id is not None:
            children[row.parent_provider_id].append(row.id)
    found, todo = set(), [rp_id]
    while todo:
        current = todo.pop()
        if current in found:
            continue
        found.add(current)
        todo.extend(children[current])
    return found


_UNSET = object()


def update(db, uuid, name=None, parent_uuid=_UNSET, allow_reparenting=False):
    """Rename and/or (re-/un-)parent a provider; return it as a dict.

    :param parent_uuid: leave out to keep the parent; None makes it a root.
    :param allow_reparenting: 1.37 semantics; before, a provider that has a
        parent keeps it.
    :raise NotFound, ActionError, DuplicateProvider.
    """
    if name is not None and not storable(name):
        raise ActionError("update", "name must not contain NUL characters.")
    try:
        with db.write() as conn:
            rp = get_by_uuid(conn, uuid)
            values = {}
            if name is not None and name != rp["name"]:
                if conn.execute(sa.select(_RP.c.id).where(_RP.c.name == name)).first():
                    raise DuplicateProvider([("name", name)])
                values["name"] = name
            new_root_id = None
            if parent_uuid is not _UNSET:
                new_root_id = _reparent(conn, rp, parent_uuid, allow_reparenting, values)
            if values:
                values["updated_at"] = db_mod.utcnow()
                conn.execute(_RP.update().where(_RP.c.id == rp["id"]).values(**values))
            if new_root_id is not None and new_root_id != rp["root_provider_id"]:
                subtree = _subtree_ids(conn, rp["id"], rp["root_provider_id"])
                conn.execute(
                    _RP.update().where(_RP.c.id.in_(subtree)).values(root_provider_id=new_root_id)
                )
    except sa.exc.IntegrityError:
        with db.read() as conn:
            if (
                name is not None
                and conn.execute(
                    sa.select(_RP.c.id).where(_RP.c.name == name, _RP.c.uuid != uuid)
                ).first()
            ):
                raise DuplicateProvider([("name", name)])
        raise ActionError("update", "parent provider UUID does not exist.")
    with db.read() as conn:
        return get_by_uuid(conn, uuid)


def _reparent(conn, rp, parent_uuid, allow_reparenting, values):
    """Fill ``values`` for a parent change; return the provider's new root id."""
    if parent_uuid is None:
        if rp["parent_provider_id"] is None:
            return None
        if not allow_reparenting:
            raise ActionError("update", "un-parenting a provider is not currently allowed.")
        values["parent_provider_id"] = None
        values["root_provider_id"] = rp["id"]
        return rp["id"]
    parent = find(conn, parent_uuid)
    if parent is None:
        # Upstream says "create" here too.
        raise ActionError("create", "parent provider UUID does not exist.")
    if parent["id"] == rp["parent_provider_id"]:
        return None
    if rp["parent_provider_id"] is not None and not allow_reparenting:
        raise ActionError("update", "re-parenting a provider is not currently allowed.")
    if parent["id"] in _subtree_ids(conn, rp["id"], rp["root_provider_id"]):
        raise ActionError("update", "creating loop in the provider tree is not allowed.")
    values["parent_provider_id"] = parent["id"]
    values["root_provider_id"] = parent["root_provider_id"]
    return parent["root_provider_id"]


def delete(db, uuid):
    """Delete a provider with its inventories, traits and aggregate links.

    :raise NotFound: no such provider.
    :raise CannotDeleteParent: it has children.
    :raise ProviderInUse: something is allocated against it.
    """
    try:
        with db.write() as conn:
            rp = find(conn, uuid)
            if rp is None:
                raise NotFound(f"No resource provider with uuid {uuid} found for delete")
            rp_id = rp["id"]
            if conn.execute(
                sa.select(_RP.c.id).where(_RP.c.parent_provider_id == rp_id).limit(1)
            ).first():
                raise CannotDeleteParent()
            if conn.execute(
                sa.select(m.allocations.c.id)
                .where(m.allocations.c.resource_provider_id == rp_id)
                .limit(1)
            ).first():
                raise ProviderInUse()
            for table in (
                m.inventories,
                m.resource_provider_traits,
                m.resource_provider_aggregates,
            ):
                conn.execute(table.delete().where(table.c.resource_provider_id == rp_id))
            # Node records, hardware and twins go by ON DELETE CASCADE.
            # The row refers to itself as root; clear that so the delete is
            # legal on databases that check foreign keys immediately.
            conn.execute(_RP.update().where(_RP.c.id == rp_id).values(root_provider_id=None))
            conn.execute(_RP.delete().where(_RP.c.id == rp_id))
    except sa.exc.IntegrityError:
        # A child or an allocation appeared between our checks and the delete.
        with db.read() as conn:
            if (
                find(conn, uuid) is not None
                and conn.execute(
                    sa.select(m.allocations.c.id)
                    .join(_RP, _RP.c.id == m.allocations.c.resource_provider_id)
                    .where(_RP.c.uuid == uuid)
                    .limit(1)
                ).first()
            ):
                raise ProviderInUse()
        raise CannotDeleteParent()


class TraitNotFound(ObjectError):
    def __init__(self, names):
        self.names = sorted(names)
        super().__init__(f"No such trait(s): {', '.join(self.names)}.")


class ResourceClassNotFound(ObjectError):
    def __init__(self, name):
        self.name = name
        super().__init__(f"No such resource class {name}.")


def _trait_ids(conn, names):
    names = set(names)
    if not names:
        return {}
    unstorable = {n for n in names if not storable(n)}
    if unstorable:
        raise TraitNotFound(unstorable)
    found = {
        row.name: row.id
        for row in conn.execute(
            sa.select(m.traits.c.id, m.traits.c.name).where(m.traits.c.name.in_(names))
        )
    }
    missing = names - set(found)
    if missing:
        raise TraitNotFound(missing)
    return found


def list_providers(
    db,
    name=None,
    uuid=None,
    in_tree=None,
    resources=None,
    member_of=None,
    forbidden_aggs=None,
    required=None,
    required_any=None,
    forbidden_traits=None,
):
    """Providers matching every given filter, in id order, as dicts.

    :param resources: {class name: amount}; a provider matches when it has
        the capacity for that amount of each (free space, min/max unit, step).
    :param member_of: list of sets of aggregate uuids; in at least one of each.
    :param forbidden_aggs: aggregate uuids the provider must be in none of.
    :param required: trait names it must have all of.
    :param required_any: list of sets of trait names; at least one of each.
    :param forbidden_traits: trait names it must have none of.
    :raise TraitNotFound, ResourceClassNotFound: a named trait/class is unknown.
    """
    rpt = m.resource_provider_traits
    rpa = m.resource_provider_aggregates
    agg = m.placement_aggregates
    with db.read() as conn:
        query = _provider_select().order_by(_RP.c.id)
        if not all(storable(v) for v in (name, uuid, in_tree) if v is not None):
            return []
        # As upstream, an empty ?name= filters nothing.
        if name:
            query = query.where(_RP.c.name == name)
        if uuid is not None:
            query = query.where(_RP.c.uuid == uuid)
        if in_tree is not None:
            tree = find(conn, in_tree)
            if tree is None:
                return []
            query = query.where(_RP.c.root_provider_id == tree["root_provider_id"])
        trait_groups = [{n} for n in (required or ())] + list(required_any or ())
        if trait_groups or forbidden_traits:
            all_names = set().union(*trait_groups, forbidden_traits or set())
            ids = _trait_ids(conn, all_names)
            for group in trait_groups:
                query = query.where(
                    _RP.c.id.in_(
                        sa.select(rpt.c.resource_provider_id).where(
                            rpt.c.trait_id.in_([ids[n] for n in group])
                        )
                    )
                )
            if forbidden_traits:
                query = query.where(
                    _RP.c.id.not_in(
                        sa.select(rpt.c.resource_provider_id).where(
                            rpt.c.trait_id.in_([ids[n] for n in forbidden_traits])
                        )
                    )
                )
        for group in member_of or ():
            query = query.where(
                _RP.c.id.in_(
                    sa.select(rpa.c.resource_provider_id)
                    .join(agg, agg.c.id == rpa.c.aggregate_id)
                    .where(agg.c.uuid.in_(sorted(group)))
                )
            )
        if forbidden_aggs:
            query = query.where(
                _RP.c.id.not_in(
                    sa.select(rpa.c.resource_provider_id)
                    .join(agg, agg.c.id == rpa.c.aggregate_id)
                    .where(agg.c.uuid.in_(sorted(forbidden_aggs)))
                )
            )
        for rc_name, amount in (resources or {}).items():
            if not storable(rc_name):
                raise ResourceClassNotFound(rc_name)
            rc_id = conn.execute(
                sa.select(m.resource_classes.c.id).where(m.resource_classes.c.name == rc_name)
            ).scalar_one_or_none()
            if rc_id is None:
                raise ResourceClassNotFound(rc_name)
            query = query.where(_RP.c.id.in_(_providers_with_capacity(rc_id, amount)))
        return [_as_dict(row) for row in conn.execute(query)]


def _providers_with_capacity(rc_id, amount):
    """Ids of providers that can take ``amount`` of class ``rc_id`` now."""
    inv = m.inventories
    alloc = m.allocations
    used = (
        sa.select(sa.func.coalesce(sa.func.sum(alloc.c.used), 0))
        .where(
            alloc.c.resource_provider_id == inv.c.resource_provider_id,
            alloc.c.resource_class_id == rc_id,
        )
        .scalar_subquery()
    )
    return sa.select(inv.c.resource_provider_id).where(
        inv.c.resource_class_id == rc_id,
        used + amount <= (inv.c.total - inv.c.reserved) * inv.c.allocation_ratio,
        inv.c.min_unit <= amount,
        inv.c.max_unit >= amount,
        (amount % inv.c.step_size) == 0,
    )
