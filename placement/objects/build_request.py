"""Build requests the conductors accepted (extension).

A build request is one instance of a scheduling request. It is recorded
``pending`` before the conductor asks the scheduler, and moves to ``placed`` or
``failed`` once; pending ones are the queued demand the power controller counts
(``queue_aware_v1``).

Ownership: a pending record has an ``owner`` (the conductor working on it)
and a lease (``lease_expires_at``); every write bumps its ``generation``.
Taking a record is a compare-and-set on the generation the taker read, and
succeeds only when nobody holds it, the taker already holds it (a renewal),
or the holder's lease has expired (the holder died; the taker finds out from
placement what the dead one left and finishes or releases it). A hand-off
leaves the record unowned with a lease, reserved for whichever conductor
receives the hand-off message, and swept when nobody took it in time. A
finished record is never changed again.

Lease times (the ``lease_expires_at`` a create, take, renewal or hand-off
writes, and the "now" a take or a ``lease_expired`` listing compares them
with) come from the database's clock (``db.clock``), read in the write's
own transaction once its rows are locked: every API process on the database
agrees on who holds a record, whatever its own clock says. They are stored
to the whole second, as before.
"""

import datetime
import types

import sqlalchemy as sa

from joule import vocabulary
from placement import db as db_mod
from placement import json_codec
from placement import models

PENDING = "pending"
PLACED = "placed"
FAILED = "failed"
STATUSES = (PENDING, PLACED, FAILED)
# How a placed instance ended (set_instance_state); null while it runs.
INSTANCE_ENDS = vocabulary.INSTANCE_ENDS

_T = models.build_requests
_F = models.build_failures
_RP = models.resource_providers
# Keeps IN (...) lists well inside every backend's bound-parameter limit.
_CHUNK = 900


class NotFound(Exception):
    def __init__(self, uuids):
        self.uuids = sorted(uuids) if not isinstance(uuids, str) else [uuids]
        super().__init__(", ".join(self.uuids))


class Duplicate(Exception):
    def __init__(self, uuids):
        self.uuids = sorted(uuids) if not isinstance(uuids, str) else [uuids]
        super().__init__(", ".join(self.uuids))


class InvalidTransition(Exception):
    def __init__(self, instance_uuid, current, wanted):
        super().__init__(f"build request {instance_uuid} is {current}; it cannot become {wanted}")
        self.instance_uuid = instance_uuid
        self.current = current
        self.wanted = wanted


class GenerationConflict(Exception):
    """The record changed since the caller read it."""

    def __init__(self, instance_uuid, seen, current):
        super().__init__(
            f"build request {instance_uuid} is at generation {current}, not {seen}; read it again"
        )
        self.instance_uuid = instance_uuid


class Leased(Exception):
    """Another owner holds a live lease on the record."""

    def __init__(self, instance_uuid, owner, expires_at):
        super().__init__(
            f"build request {instance_uuid} is held by {owner} until {expires_at.isoformat()}Z"
        )
        self.instance_uuid = instance_uuid


class LeaseLost(Exception):
    """A write guarded by a build request's lease (``check_held``) from a
    holder that no longer holds it: nothing was written."""

    def __init__(self, instance_uuid, why):
        super().__init__(f"build request {instance_uuid} is not held by the writer: {why}")
        self.instance_uuid = instance_uuid


def check_held(conn, instance_uuid, owner, generation):
    """The guard of a conductor's write on an instance's claim, in the
    write's own transaction: the instance's build request must be pending,
    held by ``owner`` at ``generation`` (the one its last take or renewal
    gave: a takeover since, even by the same owner, changed it) under a
    lease that is still running by the database's clock. The row stays
    locked until the transaction ends, so no take can slip in between this
    check and the write it guards.

    :raise LeaseLost: saying why; the caller writes nothing.
    """
    row = _rows_by_uuid(conn, [instance_uuid], lock=True).get(instance_uuid)
    now = db_mod.now(conn, seconds=True)
    if row is None:
        raise LeaseLost(instance_uuid, "no such build request")
    if row.status != PENDING:
        raise LeaseLost(instance_uuid, f"it is {row.status}")
    if row.owner != owner:
        raise LeaseLost(instance_uuid, f"it is held by {row.owner or 'nobody'}")
    if row.generation != generation:
        raise LeaseLost(
            instance_uuid, f"it is at generation {row.generation}, not {generation} (taken since)"
        )
    if row.lease_expires_at is None or row.lease_expires_at <= now:
        raise LeaseLost(instance_uuid, "its lease has run out")


def _to_dict(row):
    return {
        "instance_uuid": row.instance_uuid,
        "request_id": row.request_id,
        "workload_class": row.workload_class,
        "status": row.status,
        "host_uuid": row.host_uuid,
        "reason": row.reason,
        "spec": json_codec.loads_stored(row.spec),
        "owner": row.owner,
        "lease_expires_at": row.lease_expires_at,
        "generation": row.generation,
        "instance_state": row.instance_state,
        "exit_status": row.exit_status,
        "state_reason": row.state_reason,
        "state_updated_at": row.state_updated_at,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }


def _written(row, seen, values):
    """``row`` as a guarded UPDATE from generation ``seen`` with ``values``
    left it. The writers here lock the rows they read (``_rows_by_uuid``
    with ``lock``) and every value is one they computed, so the answer is
    built from them instead of read back: a bulk take or finish was a
    second SELECT of every row, spec included."""
    return types.SimpleNamespace(**{**row._mapping, **values, "generation": seen + 1})


def _chunks(items):
    items = list(items)
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def _rows_by_uuid(conn, uuids, lock=False):
    """{instance_uuid: row}. ``lock``: for a write that decides on what it
    read (take, finish): the rows are locked until the transaction ends
    (SELECT ... FOR UPDATE on PostgreSQL, in one global order so that two
    writers never deadlock; SQLite's writers are serialized by BEGIN
    IMMEDIATE already), so no other writer changes them between this read
    and the guarded UPDATE: a concurrent taker waits, then reads the new
    generation and is refused by name."""
    out = {}
    ordered = sorted(set(uuids)) if lock else uuids
    for chunk in _chunks(ordered):
        query = sa.select(_T).where(_T.c.instance_uuid.in_(chunk))
        if lock:
            query = query.order_by(_T.c.instance_uuid).with_for_update()
        for row in conn.execute(query):
            out[row.instance_uuid] = row
    return out


def _lease_until(now, lease_seconds):
    if lease_seconds is None:
        return None
    return now + datetime.timedelta(seconds=lease_seconds)


def create(db, instance_uuid, request_id, workload_class, spec, owner=None, lease_seconds=None):
    """Record one new pending build request (see create_many)."""
    return create_many(
        db,
        [
            {
                "instance_uuid": instance_uuid,
                "request_id": request_id,
                "workload_class": workload_class,
                "spec": spec,
            }
        ],
        owner=owner,
        lease_seconds=lease_seconds,
    )[0]


def create_many(db, items, owner=None, lease_seconds=None):
    """Record new pending build requests, all or none, optionally already held.

    ``items``: dicts with instance_uuid, request_id, workload_class, spec.
    :raise Duplicate: some instance already has a build request (or appears
        twice in ``items``); nothing was recorded.
    """
    uuids = [i["instance_uuid"] for i in items]
    twice = {u for u in uuids if uuids.count(u) > 1} if len(set(uuids)) != len(uuids) else set()
    if twice:
        raise Duplicate(twice)
    with db.write() as conn:
        now = db_mod.now(conn, seconds=True)
        expires = _lease_until(now, lease_seconds) if owner is not None else None
        # The unique constraint on instance_uuid decides (ON CONFLICT DO
        # NOTHING): an instance recorded already, or by a concurrent call
        # that commits first, is a Duplicate, as one after the other;
        # raising rolls back what this call inserted.
        inserted = db_mod.insert_new(
            conn,
            _T,
            "instance_uuid",
            [
                {
                    "instance_uuid": i["instance_uuid"],
                    "request_id": i["request_id"],
                    "workload_class": i["workload_class"],
                    "status": PENDING,
                    "spec": json_codec.dumps_sorted(i["spec"]),
                    "owner": owner,
                    "lease_expires_at": expires,
                    "generation": 0,
                    "created_at": now,
                }
                for i in items
            ],
        )
        if len(inserted) != len(uuids):
            raise Duplicate(set(uuids) - inserted)
        rows = _rows_by_uuid(conn, uuids)
    return [_to_dict(rows[u]) for u in uuids]


def get(db, instance_uuid):
    with db.read() as conn:
        row = conn.execute(sa.select(_T).where(_T.c.instance_uuid == instance_uuid)).first()
    if row is None:
        raise NotFound(instance_uuid)
    return _to_dict(row)


def _filtered(conn, query, status, workload_class, request_id, owner, lease_expired):
    if status is not None:
        query = query.where(_T.c.status == status)
    if workload_class is not None:
        query = query.where(_T.c.workload_class == workload_class)
    if isinstance(request_id, list | tuple):
        query = query.where(_T.c.request_id.in_(request_id))
    elif request_id is not None:
        query = query.where(_T.c.request_id == request_id)
    if owner is not None:
        query = query.where(_T.c.owner == owner)
    if lease_expired is not None:
        # The database's clock, in the query itself (no round trip).
        now = db_mod.clock(conn, seconds=True)
        expired = sa.or_(_T.c.lease_expires_at.is_(None), _T.c.lease_expires_at <= now)
        query = query.where(expired if lease_expired else sa.not_(expired))
    return query


def list_requests(
    db,
    status=None,
    workload_class=None,
    request_id=None,
    limit=None,
    owner=None,
    lease_expired=None,
    after=None,
):
    """(build requests, next id): at most ``limit`` in creation order after
    the record with id ``after``, filtered (``request_id``: one id, or a list
    of them); ``next id`` is the id of the last one when more remain, else None.

    ``lease_expired=True``: only records nobody holds any more (no lease, or
    a lease that has run out): what a conductor sweeping for the work of
    dead conductors takes over. ``False``: only records under a live lease.
    """
    # SELECT * FROM build_requests WHERE id > :after AND status = :s AND ...
    # ORDER BY id LIMIT :limit + 1
    with db.read() as conn:
        query = _filtered(
            conn,
            sa.select(_T).order_by(_T.c.id),
            status,
            workload_class,
            request_id,
            owner,
            lease_expired,
        )
        if after is not None:
            query = query.where(_T.c.id > after)
        if limit is not None:
            query = query.limit(limit + 1)
        rows = conn.execute(query).all()
    more = limit is not None and len(rows) > limit
    rows = rows[:limit] if more else rows
    return [_to_dict(r) for r in rows], (rows[-1].id if more else None)


def count_requests(
    db, status=None, workload_class=None, request_id=None, owner=None, lease_expired=None
):
    """How many build requests pass the filters of list_requests (one COUNT)."""
    with db.read() as conn:
        query = _filtered(
            conn,
            sa.select(sa.func.count()).select_from(_T),
            status,
            workload_class,
            request_id,
            owner,
            lease_expired,
        )
        return conn.execute(query).scalar()


def purge(db, before, batch=1000):
    """Delete finished (placed or failed) build requests last written before
    ``before``, ``batch`` rows per transaction; return how many. Pending
    records are never purged, nor placed ones whose instance still holds
    allocations (the allocations audit takes an instance with allocations
    and no pending or placed record for an orphan)."""
    finished_at = sa.func.coalesce(_T.c.updated_at, _T.c.created_at)
    allocs = models.allocations
    running = sa.select(allocs.c.id).where(allocs.c.consumer_id == _T.c.instance_uuid).exists()
    purgeable = sa.and_(
        finished_at < before,
        sa.or_(_T.c.status == FAILED, sa.and_(_T.c.status == PLACED, ~running)),
    )
    select = sa.select(_T.c.id).where(purgeable).order_by(_T.c.id).limit(batch)
    total = 0
    while True:
        with db.write() as conn:
            ids = list(conn.execute(select).scalars())
            if ids:
                # The condition again: a claim since the select keeps its record.
                conn.execute(_T.delete().where(_T.c.id.in_(ids), purgeable))
        total += len(ids)
        if len(ids) < batch:
            return total


class Refused(Exception):
    """Some items of a bulk write were refused; nothing was written.

    ``errors`` holds one NotFound, InvalidTransition, GenerationConflict or
    Leased per refused item, in the order of the request.
    """

    def __init__(self, errors):
        self.errors = list(errors)
        super().__init__("; ".join(str(e) for e in self.errors))


def _refuse(errors):
    """Raise the one error of a single item as itself, several as Refused."""
    if len(errors) == 1:
        raise errors[0]
    raise Refused(errors)


def take(db, instance_uuid, owner, generation, lease_seconds, hand_off=False):
    """Take, renew or hand off the lease of one pending record (see take_many).

    :raise NotFound, InvalidTransition (finished), GenerationConflict,
        Leased (another owner's lease is live).
    """
    items = [{"instance_uuid": instance_uuid, "generation": generation}]
    return take_many(db, items, owner, lease_seconds, hand_off=hand_off)[0]


def take_many(db, items, owner, lease_seconds, hand_off=False):
    """Take, renew or hand off the leases of pending records, all or none
    (compare-and-set on each record's generation).

    ``items``: dicts with instance_uuid and the generation the caller read,
    and optionally ``holder``: the owner that left the record to the caller
    at that generation without a hand-off (a super conductor casting a
    build names itself): that owner's live lease does not refuse the take,
    the generation still guards it. With ``hand_off`` the caller (who must
    be able to take them) leaves them unowned, reserved for
    ``lease_seconds`` for whoever receives the hand-off.

    :raise Refused: (or, for one item, its own error) every item that cannot
        be taken: NotFound, InvalidTransition (finished), GenerationConflict,
        Leased (another owner's lease is live); nothing was changed.
    """
    uuids = [i["instance_uuid"] for i in items]
    with db.write() as conn:
        rows = _rows_by_uuid(conn, uuids, lock=True)
        # Read once the rows are ours: a taker that waited on the lock
        # compares and starts the lease at the time it got them.
        now = db_mod.now(conn, seconds=True)
        refused = []
        for item in items:
            row = rows.get(item["instance_uuid"])
            problem = _lease_problem(row, item, owner, now)
            if problem is not None:
                refused.append(problem)
        if refused:
            _refuse(refused)
        values = {
            "owner": None if hand_off else owner,
            "lease_expires_at": _lease_until(now, lease_seconds),
            "updated_at": now,
        }
        # UPDATE ... WHERE id = :id AND generation = :seen AND status =
        # 'pending', once per item in one executemany (one pipeline on
        # PostgreSQL): the guard that makes two takers of one record one
        # winner. A loser here rolls the whole call back.
        _guarded_update(
            conn,
            [(rows[i["instance_uuid"]], i["generation"], {}) for i in items],
            values,
            now,
        )
        written = {
            i["instance_uuid"]: _written(rows[i["instance_uuid"]], i["generation"], values)
            for i in items
        }
    return [_to_dict(written[u]) for u in uuids]


def _guarded_update(conn, changes, common, now):
    """Apply ``changes`` [(row, generation seen, own values)] in one
    executemany: each row moves from the generation seen (and pending) to
    the next, with ``common`` and its own values (every item names the same
    keys). When any row was changed meanwhile by another writer, raise
    GenerationConflict for those rows (the caller's transaction rolls back)."""
    if not changes:
        return
    own_keys = sorted(changes[0][2])
    stmt = (
        _T.update()
        .where(
            _T.c.id == sa.bindparam("b_id"),
            _T.c.generation == sa.bindparam("b_seen"),
            _T.c.status == PENDING,
        )
        .values(
            generation=sa.bindparam("b_next"),
            **{k: sa.bindparam(f"b_{k}") for k in own_keys},
            **common,
        )
    )
    params = [
        {
            "b_id": row.id,
            "b_seen": seen,
            "b_next": seen + 1,
            **{f"b_{k}": own[k] for k in own_keys},
        }
        for row, seen, own in changes
    ]
    res = conn.execute(stmt, params)
    if res.rowcount == len(changes):
        return
    # Someone took or finished some of them between the read and this
    # write: only possible when the read did not lock them (the callers
    # here lock). Name the rows that do not carry this write; when another
    # writer's change cannot be told from ours (same generation, same
    # second), every row is refused: the caller reads them again.
    ids = {row.id: (row, seen) for row, seen, _own in changes}
    own_of = {row.id: own for row, _seen, own in changes}
    lost = []
    for chunk in _chunks(list(ids)):
        for cur in conn.execute(sa.select(_T).where(_T.c.id.in_(chunk))):
            row, seen = ids[cur.id]
            ours = {**common, **own_of[cur.id]}
            if cur.generation != seen + 1 or any(getattr(cur, k) != v for k, v in ours.items()):
                lost.append(GenerationConflict(row.instance_uuid, seen, "newer"))
    _refuse(
        lost or [GenerationConflict(r.instance_uuid, seen, "newer") for r, seen in ids.values()]
    )


def _lease_problem(row, item, owner, now):
    """Why ``owner`` cannot take the record ``row`` at the item's generation, or None."""
    if row is None:
        return NotFound(item["instance_uuid"])
    if row.status != PENDING:
        return InvalidTransition(row.instance_uuid, row.status, "leased")
    if row.generation != item["generation"]:
        return GenerationConflict(row.instance_uuid, item["generation"], row.generation)
    if (
        row.owner is not None
        and row.owner != owner
        and row.owner != item.get("holder")
        and row.lease_expires_at is not None
        and row.lease_expires_at > now
    ):
        return Leased(row.instance_uuid, row.owner, row.lease_expires_at)
    return None


def update(db, instance_uuid, status, host_uuid=None, reason=None, owner=None, generation=None):
    """Move one build request to ``status`` (see update_many)."""
    return update_many(
        db,
        [
            {
                "instance_uuid": instance_uuid,
                "status": status,
                "host_uuid": host_uuid,
                "reason": reason,
                "owner": owner,
                "generation": generation,
            }
        ],
    )[0]


def update_many(db, items):
    """Finish build requests, all or none.

    pending -> placed | failed, once. Repeating the same final status with the
    same host is accepted (a conductor that retries after a lost response);
    anything else is an InvalidTransition. An item with ``build_succeeded``
    (placed only) also clears its host's consecutive failed builds, in the
    same transaction. An item naming ``owner`` is only
    finished while that owner holds it (any lease: one that ran out but
    nobody took is still the owner's); one naming ``generation`` only at that
    generation. The status and generation are compared in the UPDATE itself
    so two conductors cannot both finish the same request.

    :raise NotFound: (every unknown instance) nothing was changed.
    :raise Refused: (or, for one item, its own error) every item that cannot
        be finished: InvalidTransition, Leased, GenerationConflict; nothing
        was changed.
    """
    uuids = [i["instance_uuid"] for i in items]
    with db.write() as conn:
        rows = _rows_by_uuid(conn, uuids, lock=True)
        now = db_mod.now(conn, seconds=True)
        missing = [u for u in uuids if u not in rows]
        if missing:
            raise NotFound(missing)
        todo, refused = [], []
        for item in items:
            row = rows[item["instance_uuid"]]
            status, host = item["status"], item.get("host_uuid")
            if row.status == status and status != PENDING and row.host_uuid == host:
                continue  # the same finish again: nothing to do
            owner = item.get("owner")
            if row.status != PENDING or status == PENDING:
                refused.append(InvalidTransition(row.instance_uuid, row.status, status))
            elif item.get("generation") is not None and row.generation != item["generation"]:
                refused.append(
                    GenerationConflict(row.instance_uuid, item["generation"], row.generation)
                )
            elif owner is not None and row.owner != owner:
                refused.append(
                    Leased(row.instance_uuid, row.owner or "nobody", row.lease_expires_at or now)
                )
            else:
                todo.append((row, item))
        if refused:
            _refuse(refused)
        # UPDATE build_requests SET status=:s ... WHERE id=:id AND
        # generation=:g AND status='pending', in one executemany.
        changes = [
            (
                row,
                row.generation,
                {
                    "status": item["status"],
                    "host_uuid": item.get("host_uuid"),
                    "reason": item.get("reason"),
                },
            )
            for row, item in todo
        ]
        common = {"owner": None, "lease_expires_at": None, "updated_at": now}
        _guarded_update(conn, changes, common, now)
        _clear_failed_builds(
            conn,
            now,
            {i["host_uuid"] for _row, i in todo if i.get("build_succeeded") and i["host_uuid"]},
        )
        for row, seen, own in changes:
            rows[row.instance_uuid] = _written(row, seen, {**common, **own})
    return [_to_dict(rows[u]) for u in uuids]


class NotRunningThere(Exception):
    """The instance is not placed on the host that reports its end."""

    def __init__(self, instance_uuid, why):
        super().__init__(f"instance {instance_uuid} {why}")
        self.instance_uuid = instance_uuid


def set_instance_state(db, instance_uuid, state, host_uuid, exit_status=None, reason=None):
    """Record how the placed instance ``instance_uuid`` ended on
    ``host_uuid``: ``state`` one of INSTANCE_ENDS, once. The same end
    again is accepted (a report repeated after a lost answer) and changes
    nothing; another end of an ended instance is an InvalidTransition.
    Bumps the generation, as every write does.

    :raise NotFound: no build request for it.
    :raise NotRunningThere: it is not placed, or placed on another host.
    :raise InvalidTransition: it ended already, otherwise.
    """
    with db.write() as conn:
        row = _rows_by_uuid(conn, [instance_uuid], lock=True).get(instance_uuid)
        if row is None:
            raise NotFound(instance_uuid)
        if row.status != PLACED:
            raise NotRunningThere(instance_uuid, f"is {row.status}, not placed")
        if row.host_uuid != host_uuid:
            raise NotRunningThere(instance_uuid, f"is placed on {row.host_uuid}, not {host_uuid}")
        if row.instance_state is not None:
            same = (row.instance_state, row.exit_status) == (state, exit_status)
            if same:
                return _to_dict(row)
            raise InvalidTransition(
                instance_uuid, f"{row.instance_state} already", f"{state} as well"
            )
        now = db_mod.now(conn, seconds=True)
        conn.execute(
            _T.update()
            .where(_T.c.id == row.id)
            .values(
                instance_state=state,
                exit_status=exit_status,
                state_reason=reason,
                state_updated_at=now,
                updated_at=now,
                generation=row.generation + 1,
            )
        )
        row = _rows_by_uuid(conn, [instance_uuid])[instance_uuid]
    return _to_dict(row)


def _clear_failed_builds(conn, now, host_uuids):
    """What a succeeded build outcome does to each host: its consecutive
    failed builds back to 0 (hosts without any, or unknown, are left alone)."""
    if not host_uuids:
        return
    # UPDATE build_failures SET failed_builds = 0 WHERE failed_builds != 0
    # AND resource_provider_id IN (SELECT id FROM resource_providers WHERE uuid IN (...))
    ids = sa.select(_RP.c.id).where(_RP.c.uuid.in_(sorted(host_uuids)))
    conn.execute(
        _F.update()
        .where(_F.c.resource_provider_id.in_(ids), _F.c.failed_builds != 0)
        .values(failed_builds=0, updated_at=now)
    )


def live_consumers(db, consumer_uuids):
    """The subset of ``consumer_uuids`` whose build request is placed or pending."""
    live = set()
    with db.read() as conn:
        for chunk in _chunks(consumer_uuids):
            live.update(
                conn.execute(
                    sa.select(_T.c.instance_uuid).where(
                        _T.c.instance_uuid.in_(chunk), _T.c.status.in_((PENDING, PLACED))
                    )
                ).scalars()
            )
    return live
