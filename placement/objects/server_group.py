"""Server groups (extension): nova's instance groups, enforced at claim time.

A group has one policy (nova API 2.64): ``affinity`` (every member on one
host), ``anti-affinity`` (at most ``max_server_per_host`` members per host,
default 1), ``soft-affinity`` and ``soft-anti-affinity`` (preferences the
scheduler weighs; placement only records membership).

Nova checks a hard policy late, on the compute host, and reschedules when two
schedulers raced ("late affinity check"). Here the allocation write checks it:
``check_claims`` runs inside the transaction that writes the allocations,
after it has locked the group's row, so two claims of one group are checked
one after the other against committed state and the loser gets a 409
(``placement.server_group.policy_violation``) before anything is written.

A member's hosts are the root providers its allocations are on (sharing
providers, which carry ``MISC_SHARES_VIA_AGGREGATE``, are not hosts): a move
to an alternate or a release updates them, with no second record to keep in
step. A member that holds no allocation occupies no host.
"""

import collections
import uuid as uuid_lib

import sqlalchemy as sa

from placement import db as db_mod
from placement import models as m

AFFINITY = "affinity"
ANTI_AFFINITY = "anti-affinity"
SOFT_AFFINITY = "soft-affinity"
SOFT_ANTI_AFFINITY = "soft-anti-affinity"
POLICIES = (AFFINITY, ANTI_AFFINITY, SOFT_AFFINITY, SOFT_ANTI_AFFINITY)
HARD_POLICIES = (AFFINITY, ANTI_AFFINITY)
SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"

_G = m.server_groups
_M = m.server_group_members


class NotFound(Exception):
    pass


class Duplicate(Exception):
    pass


class ServerGroupError(Exception):
    """A claim the group refuses; nothing was written."""


class GroupNotFound(ServerGroupError):
    def __init__(self, group_uuid):
        super().__init__(f"server group {group_uuid} not found")


class MemberOfAnotherGroup(ServerGroupError):
    def __init__(self, instance, group_uuid):
        super().__init__(
            f"instance {instance} is a member of server group {group_uuid}; "
            "an instance belongs to one group only"
        )


class PolicyViolation(ServerGroupError):
    def __init__(self, instance, group, detail):
        super().__init__(
            f"server group {group['uuid']} ({_policy_text(group)}) refuses instance "
            f"{instance}: {detail}"
        )


def _policy_text(group):
    if group["policy"] == ANTI_AFFINITY:
        return f"anti-affinity, max_server_per_host {group['max_server_per_host'] or 1}"
    return group["policy"]


def _to_dict(row):
    return {
        "uuid": row.uuid,
        "name": row.name,
        "policy": row.policy,
        "rules": (
            {"max_server_per_host": row.max_server_per_host}
            if row.max_server_per_host is not None
            else {}
        ),
        "max_server_per_host": row.max_server_per_host,
        "project_id": row.project_id,
        "user_id": row.user_id,
        "generation": row.generation,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }


# --- the API's reads and writes ------------------------------------------------


def create(db, name, policy, project_id, user_id, max_server_per_host=None, uuid=None):
    """Create a group; return its dict. :raise Duplicate: the uuid exists."""
    group_uuid = uuid or str(uuid_lib.uuid4())
    now = db_mod.utcnow()
    with db.write() as conn:
        # ON CONFLICT DO NOTHING: a uuid stored already, or by a concurrent
        # create that commits first, is a Duplicate (never an IntegrityError).
        row = {
            "uuid": group_uuid,
            "name": name,
            "policy": policy,
            "project_id": project_id,
            "user_id": user_id,
            "max_server_per_host": max_server_per_host,
            "generation": 0,
            "created_at": now,
        }
        if not db_mod.insert_new(conn, _G, "uuid", [row]):
            raise Duplicate(group_uuid)
        row = conn.execute(sa.select(_G).where(_G.c.uuid == group_uuid)).one()
    out = _to_dict(row)
    out["members"] = []
    out["hosts"] = {}
    return out


def get(db, group_uuid):
    """The group with ``members`` (instance uuids) and ``hosts`` ({root uuid:
    [members on it]}). :raise NotFound."""
    with db.read() as conn:
        row = conn.execute(sa.select(_G).where(_G.c.uuid == group_uuid)).first()
        if row is None:
            raise NotFound(group_uuid)
        members = list(
            conn.execute(
                sa.select(_M.c.instance_uuid).where(_M.c.group_id == row.id).order_by(_M.c.id)
            ).scalars()
        )
        hosts = _member_hosts(conn, row.id)
    out = _to_dict(row)
    out["members"] = members
    by_host = collections.defaultdict(list)
    for instance, roots in hosts.items():
        for root in roots:
            by_host[root].append(instance)
    out["hosts"] = {root: sorted(v) for root, v in sorted(by_host.items())}
    return out


def list_groups(db, project_id=None, limit=None, after=None):
    """(groups, next id): at most ``limit`` groups (of ``project_id``),
    oldest first, after the one with id ``after``, with their member uuids;
    ``next id`` is the last one's id when more remain, else None."""
    stmt = sa.select(_G).order_by(_G.c.id)
    if project_id is not None:
        stmt = stmt.where(_G.c.project_id == project_id)
    if after is not None:
        stmt = stmt.where(_G.c.id > after)
    if limit is not None:
        stmt = stmt.limit(limit + 1)
    with db.read() as conn:
        rows = conn.execute(stmt).all()
        more = limit is not None and len(rows) > limit
        rows = rows[:limit] if more else rows
        members = collections.defaultdict(list)
        ids = [r.id for r in rows]
        for start in range(0, len(ids), 900):
            for gid, instance in conn.execute(
                sa.select(_M.c.group_id, _M.c.instance_uuid)
                .where(_M.c.group_id.in_(ids[start : start + 900]))
                .order_by(_M.c.id)
            ):
                members[gid].append(instance)
    out = []
    for row in rows:
        item = _to_dict(row)
        item["members"] = members.get(row.id, [])
        out.append(item)
    return out, (rows[-1].id if more else None)


def delete(db, group_uuid):
    """Delete a group and its memberships (the instances keep their
    allocations). :raise NotFound."""
    with db.write() as conn:
        row = conn.execute(
            sa.select(_G.c.id).where(_G.c.uuid == group_uuid).with_for_update()
        ).first()
        if row is None:
            raise NotFound(group_uuid)
        conn.execute(_M.delete().where(_M.c.group_id == row.id))
        conn.execute(_G.delete().where(_G.c.id == row.id))


def remove_member(db, group_uuid, instance_uuid):
    """Take an instance out of a group (nova does so when the instance is
    deleted); bumps the group's generation. :raise NotFound: no such group
    or the instance is not its member."""
    with db.write() as conn:
        row = conn.execute(
            sa.select(_G.c.id).where(_G.c.uuid == group_uuid).with_for_update()
        ).first()
        if row is None:
            raise NotFound(group_uuid)
        gone = conn.execute(
            _M.delete().where(_M.c.group_id == row.id, _M.c.instance_uuid == instance_uuid)
        ).rowcount
        if not gone:
            raise NotFound(instance_uuid)
        _bump(conn, row.id)


def _bump(conn, group_id):
    conn.execute(
        _G.update()
        .where(_G.c.id == group_id)
        .values(generation=_G.c.generation + 1, updated_at=db_mod.utcnow())
    )


# --- the claim-time check --------------------------------------------------------


def is_host_provider():
    """Providers that count as a host: not a sharing provider (also the
    allocation write's eco check, objects/allocation.py)."""
    rpt = m.resource_provider_traits
    t = m.traits
    return ~sa.exists(
        sa.select(rpt.c.resource_provider_id)
        .join(t, t.c.id == rpt.c.trait_id)
        .where(rpt.c.resource_provider_id == m.resource_providers.c.id, t.c.name == SHARING_TRAIT)
    )


# The root of a provider, joined by the membership checks of every claim
# (an alias made once: making one copies every column of the table).
_ROOT = m.resource_providers.alias("root")


def _member_hosts(conn, group_id, exclude=()):
    """{instance uuid: {root uuid, ...}} of the group's members that hold
    allocations, minus ``exclude``."""
    a = m.allocations
    rp = m.resource_providers
    root = _ROOT
    stmt = (
        sa.select(_M.c.instance_uuid, root.c.uuid)
        .distinct()
        .select_from(
            _M.join(a, a.c.consumer_id == _M.c.instance_uuid)
            .join(rp, rp.c.id == a.c.resource_provider_id)
            .join(root, root.c.id == sa.func.coalesce(rp.c.root_provider_id, rp.c.id))
        )
        .where(_M.c.group_id == group_id, is_host_provider())
    )
    if exclude:
        stmt = stmt.where(_M.c.instance_uuid.not_in(list(exclude)))
    out = collections.defaultdict(set)
    for instance, root_uuid in conn.execute(stmt):
        out[instance].add(root_uuid)
    return out


def _roots_of(conn, rp_uuids):
    """{provider uuid: root uuid} of the host providers among ``rp_uuids``."""
    rp = m.resource_providers
    root = _ROOT
    stmt = (
        sa.select(rp.c.uuid, root.c.uuid)
        .select_from(rp.join(root, root.c.id == sa.func.coalesce(rp.c.root_provider_id, rp.c.id)))
        .where(rp.c.uuid.in_(list(rp_uuids)), is_host_provider())
    )
    return dict(conn.execute(stmt).all())


def check_claims(conn, writes):
    """Check and record the group membership of an allocation write, in its
    open transaction (``objects.allocation`` calls it after its own checks
    and before it writes a row).

    ``writes`` are ``ConsumerWrite``s; one that names ``server_group`` joins
    that group, and one whose consumer already is a member is checked
    against its group (a move to an alternate). Each group involved is
    locked (``FOR UPDATE`` on PostgreSQL; SQLite writers are serialized
    already), so concurrent claims of one group are checked in turn against
    committed allocations.

    :raise GroupNotFound, MemberOfAnotherGroup, PolicyViolation: nothing may
        be written (the caller's transaction rolls back).
    """
    uuids = [w.uuid for w in writes]
    named = {w.server_group for w in writes if getattr(w, "server_group", None)}
    current = dict(
        conn.execute(
            sa.select(_M.c.instance_uuid, _M.c.group_id).where(_M.c.instance_uuid.in_(uuids))
        ).all()
    )
    if not named and not current:
        return
    groups = {}  # id -> group dict
    by_uuid = {}
    if named:
        for row in conn.execute(sa.select(_G).where(_G.c.uuid.in_(sorted(named)))):
            groups[row.id] = _to_dict(row)
            by_uuid[row.uuid] = row.id
        for group_uuid in sorted(named - set(by_uuid)):
            raise GroupNotFound(group_uuid)
    # Which group each write is checked against, and who joins.
    plan = []
    joining = []
    for w in writes:
        gid = current.get(w.uuid)
        wanted = getattr(w, "server_group", None)
        if wanted:
            wanted_id = by_uuid[wanted]
            if gid is not None and gid != wanted_id:
                other = conn.execute(sa.select(_G.c.uuid).where(_G.c.id == gid)).scalar()
                raise MemberOfAnotherGroup(w.uuid, other)
            if gid is None:
                joining.append((wanted_id, w.uuid))
            gid = wanted_id
        if gid is not None and w.allocations:
            plan.append((gid, w))
    involved = sorted({gid for gid, _w in plan} | {gid for gid, _u in joining})
    # Lock in id order (one order for every writer); re-read under the lock.
    for gid in involved:
        row = conn.execute(sa.select(_G).where(_G.c.id == gid).with_for_update()).first()
        if row is None:  # deleted since the read above
            raise GroupNotFound(str(gid))
        groups[gid] = _to_dict(row)
    hard = [gid for gid in involved if groups[gid]["policy"] in HARD_POLICIES]
    if hard:
        batch = set(uuids)
        roots = _roots_of(conn, {rp for _g, w in plan for rp in w.allocations})
        for gid in hard:
            group = groups[gid]
            per_host = collections.Counter()
            for hosts in _member_hosts(conn, gid, exclude=batch).values():
                per_host.update(hosts)
            for owner, w in plan:
                if owner != gid:
                    continue
                new = {roots[rp] for rp in w.allocations if rp in roots}
                _check_one(group, w.uuid, new, per_host)
                per_host.update(new)
    now = db_mod.utcnow()
    for gid, instance in joining:
        conn.execute(_M.insert().values(group_id=gid, instance_uuid=instance, created_at=now))
    for gid in involved:
        if any(g == gid for g, _u in joining):
            _bump(conn, gid)


def _check_one(group, instance, new_hosts, per_host):
    occupied = {h for h, n in per_host.items() if n > 0}
    if group["policy"] == AFFINITY:
        if occupied and not new_hosts <= occupied:
            raise PolicyViolation(
                instance,
                group,
                (
                    f"its members run on host(s) {', '.join(sorted(occupied))}, not on "
                    f"{', '.join(sorted(new_hosts - occupied))}"
                ),
            )
        return
    limit = group["max_server_per_host"] or 1
    for host in sorted(new_hosts):
        if per_host[host] >= limit:
            raise PolicyViolation(
                instance, group, (f"host {host} already runs {per_host[host]} member(s)")
            )
