"""The claim ledger: read, replace and delete allocations.

How a write stays correct with many API workers on one database
-----------------------------------------------------------------
One attempt is one fresh transaction (``db.write()``):

1. on PostgreSQL, lock the rows of the providers the request touches
   (``SELECT id FROM resource_providers WHERE uuid IN (...) ORDER BY id FOR
   UPDATE``): writers of the same provider queue here, in id order, so two
   never wait on each other in a cycle; writers of other providers never
   wait at all (nothing global is locked);
2. read, in ONE statement started after those locks were granted, the
   generation, the inventory and the committed usage (total, and the part
   held by the consumers being rewritten) of every provider and class the
   request touches, and (one consumer) that consumer's id and generation --
   one statement is one snapshot on PostgreSQL, so the numbers agree with
   each other, and it includes everything the previous lock holder committed;
3. check capacity, min/max/step, and the over-capacity exemption (a change
   that leaves an over-committed provider no worse is let through), all
   computed from that committed snapshot and nothing this transaction wrote;
4. update the consumer rows (``... WHERE generation = :seen``) and then the
   provider rows with the generation guard
   ``UPDATE ... SET generation = generation + 1 WHERE id = :id AND generation = :seen``;
5. replace the consumers' allocation rows; commit.

If a guard in step 4 matches no row, another writer committed a change after
step 2 (with the locks of step 1 that can only be a concurrent writer of the
same consumer, or a provider change that bypassed the lock): the whole
transaction is rolled back and the request is retried from step 1 in a new
transaction, up to ``allocation_conflict_retry_count`` times with a little
jitter, then the client gets 409 ``placement.concurrent_update``. Taking the
locks before reading (rather than reading optimistically and losing at the
guard) matters on a hot provider: an optimistic loser has done a whole
attempt for nothing, and with 16 clients on 4 providers most first attempts
lost. Usage only grows under the provider's lock (every allocation write,
inventory write and reshape takes it); a release may commit without it,
which can only make the snapshot of step 2 conservative. On PostgreSQL (READ
COMMITTED) an UPDATE that waits for another writer's lock re-evaluates its
WHERE against the row that writer committed, so the guard still catches a
writer that did not lock first. On SQLite ``BEGIN IMMEDIATE`` serializes
writers, so step 1 is skipped and the guard never fails there; it costs one
indexed UPDATE.

Ids that never change (projects, users, consumer types, standard resource
classes) are cached per ``Database`` once a transaction that read or created
them has committed (``_IdCache``), so a claim of a known project and user is
four or five statements: lock, read, consumer insert, guard, allocation
insert.

Upstream OpenStack Placement 16.0.0 retries inside the same, never
rolled-back transaction, so its own uncommitted allocations count as
"previous usage" and the exemption admits claims on a full provider. Here no
attempt ever sees its own earlier writes: each starts from a clean transaction.
"""

import collections
import dataclasses
import logging
import random
import threading
import time
import weakref

import os_resource_classes
import sqlalchemy as sa

from joule import vocabulary
from placement import db as db_mod
from placement import models as m
from placement.objects import consumer as consumer_obj
from placement.objects import server_group as server_group_obj

LOG = logging.getLogger(__name__)

# Marks a write whose consumer generation is not checked (before 1.28).
NOT_CHECKED = object()

# PostgreSQL SQLSTATEs worth a fresh attempt: deadlock, serialization failure,
# lock not available.
# Deadlock and serialization failures: the loser retries. Not lock_not_available
# (55P03): it means lock_timeout ran out, and retrying would multiply the wait
# the limit bounds; the API answers 503 with Retry-After instead.
_RETRY_SQLSTATES = {"40P01", "40001"}


class AllocationError(Exception):
    """Base of the errors a handler maps to a 4xx."""


class ProviderNotFound(AllocationError):
    def __init__(self, uuid):
        super().__init__(f"Allocation for resource provider '{uuid}' that does not exist.")
        self.uuid = uuid


class ResourceClassNotFound(AllocationError):
    def __init__(self, name):
        super().__init__(f"No such resource class {name}.")
        self.name = name


class InvalidInventory(AllocationError):
    """The request does not fit the providers' inventory (409)."""

    def __init__(self, resource_class, provider, message=None):
        super().__init__(
            message
            or f"Inventory for '{resource_class}' on resource provider '{provider}' invalid."
        )
        self.resource_class = resource_class
        self.provider = provider


class CapacityExceeded(InvalidInventory):
    def __init__(self, resource_class, provider):
        super().__init__(
            resource_class,
            provider,
            f"Unable to create allocation for '{resource_class}' on resource provider "
            f"'{provider}'. The requested amount would exceed the capacity.",
        )


class ConstraintsViolated(InvalidInventory):
    def __init__(self, resource_class, provider):
        super().__init__(
            resource_class,
            provider,
            f"Unable to create allocation for '{resource_class}' on resource provider "
            f"'{provider}'. The requested amount would violate inventory constraints.",
        )


class ConsumerGenerationConflict(AllocationError):
    def __init__(self, expected, got):
        expected = "null" if expected is None else expected
        super().__init__(f"consumer generation conflict - expected {expected} but got {got}")


class ConcurrentUpdate(AllocationError):
    def __init__(self):
        super().__init__(
            "Another thread concurrently updated the resource provider data. Please retry "
            "your update"
        )


class RootTraitConflict(AllocationError):
    """A claim asked for a provider of a tree whose root carries a trait that
    refuses it (409); each subclass's ``_say`` words why."""

    def __init__(self, consumer, provider, root, trait):
        where = (
            f"resource provider '{provider}'"
            if provider == root
            else f"resource provider '{provider}' (root provider '{root}')"
        )
        self.consumer = consumer
        self.provider = provider
        self.root = root
        self.trait = trait
        super().__init__(self._say(f"allocate from {where}: the root carries {trait}"))

    def _say(self, what):
        raise NotImplementedError


class ProfileConflict(RootTraitConflict):
    """Performance work asked for a provider of a tree whose root is eco (409)."""

    def _say(self, what):
        return (
            f"consumer {self.consumer} has workload_class '{vocabulary.PERFORMANCE}' and may "
            f"not {what}, and performance work must not be placed on an eco node."
        )


class PowerStateConflict(RootTraitConflict):
    """Work asked for a provider of a tree whose root is not on (409)."""

    def _say(self, what):
        return (
            f"consumer {self.consumer} may not {what}, and work is placed only on nodes "
            f"whose power state is '{vocabulary.POWER_ON}'."
        )


class LostRace(Exception):
    """Internal: a generation guard matched no row; roll back and start over."""


@dataclasses.dataclass
class ConsumerWrite:
    """What a request wants one consumer to hold after the write.

    ``allocations`` is ``{rp_uuid: {resource_class: amount}}``; empty means
    "remove every allocation of this consumer". ``generation`` is the
    client's consumer generation (None for a new consumer) or NOT_CHECKED.
    ``consumer_type`` and ``workload_class`` are None when not given (an
    existing consumer keeps its value; a new one gets the default).
    """

    uuid: str
    allocations: dict
    project_id: str
    user_id: str
    generation: object = NOT_CHECKED
    consumer_type: str | None = None
    workload_class: str | None = None
    # Extension: the server group this consumer joins (checked and recorded
    # in the same transaction, objects/server_group.py).
    server_group: str | None = None


# --- ids that never change ---------------------------------------------------


class _IdCache:
    """Ids of rows that, once committed, keep their id for the database's life.

    Project and user rows (by external id), consumer types (by name) and
    standard resource classes (by name) are only ever inserted, never
    updated or deleted by this service, so a claim need not look them up
    every time. Custom resource classes are NOT cached (one can be deleted
    and created again with another id). One cache per ``Database`` object
    (tests truncate and restart identities between databases), filled only
    after the transaction that read or created the rows committed, and
    emptied whenever a write hits an integrity error (a row removed behind
    our back would show up as a foreign key violation, then be re-read).
    """

    def __init__(self):
        self.projects = {}
        self.users = {}
        self.types = {}
        self.classes = {}

    def update(self, other):
        self.projects.update(other.projects)
        self.users.update(other.users)
        self.types.update(other.types)
        self.classes.update(other.classes)

    def clear(self):
        for table in (self.projects, self.users, self.types, self.classes):
            table.clear()


_ID_CACHES = weakref.WeakKeyDictionary()
_ID_CACHES_LOCK = threading.Lock()
_STANDARD_CLASSES = frozenset(os_resource_classes.STANDARDS)


def _id_cache(db):
    cache = _ID_CACHES.get(db)
    if cache is None:
        with _ID_CACHES_LOCK:
            cache = _ID_CACHES.setdefault(db, _IdCache())
    return cache


# --- writes -----------------------------------------------------------------


def replace_all(db, writes, retry_count, before=None, after=None):
    """Atomically replace the allocations of every consumer in ``writes``.

    ``before(conn)`` and ``after(conn)`` run inside each attempt's
    transaction around the allocation write (the reshaper's inventory
    changes); they may raise LostRace to ask for a fresh attempt.

    :raise ConsumerGenerationConflict, ProviderNotFound, ResourceClassNotFound,
        InvalidInventory: the request cannot be applied (nothing is written).
    :raise ConcurrentUpdate: still losing races after ``retry_count`` retries.
    """
    cache = _id_cache(db)
    attempt = 0
    while True:
        learned = _IdCache()
        try:
            with db.write() as conn:
                if before is not None:
                    before(conn)
                _write_attempt(
                    conn,
                    writes,
                    lock_first=db.is_postgres or attempt > 0,
                    cache=cache,
                    learned=learned,
                )
                if after is not None:
                    after(conn)
            # Only ids of committed rows enter the shared cache.
            cache.update(learned)
            return
        except LostRace:
            reason = "provider or consumer generation changed"
        except sa.exc.IntegrityError as exc:
            # A concurrent request created the same consumer (unique uuid) or
            # removed a provider we were writing to (foreign key): the next
            # attempt sees the committed state and answers accordingly. A
            # cached id could be the culprit too: forget them all.
            reason = f"integrity error: {_first_line(exc)}"
            cache.clear()
        except sa.exc.DBAPIError as exc:
            if not _is_transient(exc):
                raise
            reason = f"transient database error: {_first_line(exc)}"
        attempt += 1
        if attempt > retry_count:
            LOG.warning("allocation write gave up after %d retries (%s)", retry_count, reason)
            raise ConcurrentUpdate()
        LOG.debug("allocation write retry %d: %s", attempt, reason)
        # Jitter spreads writers that lost to the same winner.
        time.sleep(random.uniform(0, 0.002 * attempt))


def _first_line(exc):
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else exc.__class__.__name__


def _is_transient(exc):
    # SQLite's "database is locked" is not retried either: busy_timeout has
    # already waited for the other writer.
    orig = getattr(exc, "orig", None)
    code = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    return code in _RETRY_SQLSTATES


def _ordered_unique(items):
    return list(dict.fromkeys(items))


def _build_provider_state_stmt(with_consumer=False):
    rp = m.resource_providers
    inv = m.inventories
    a = m.allocations
    # SELECT rp.id, rp.uuid, rp.generation, inv.resource_class_id, inv.total,
    #        inv.reserved, inv.min_unit, inv.max_unit, inv.step_size,
    #        inv.allocation_ratio,
    #        (SELECT COALESCE(SUM(a.used), 0) FROM allocations a
    #          WHERE a.resource_provider_id = rp.id
    #            AND a.resource_class_id = inv.resource_class_id) AS used,
    #        (SELECT COALESCE(SUM(a.used), 0) FROM allocations a
    #          WHERE ... AND a.consumer_id IN (:consumers)) AS own
    # FROM resource_providers rp
    # LEFT JOIN inventories inv ON inv.resource_provider_id = rp.id
    #      AND inv.resource_class_id IN (:rc_ids)
    # WHERE rp.uuid IN (:rp_uuids)
    same_inv = sa.and_(
        a.c.resource_provider_id == rp.c.id,
        a.c.resource_class_id == inv.c.resource_class_id,
    )
    used = sa.select(sa.func.coalesce(sa.func.sum(a.c.used), 0)).where(same_inv).scalar_subquery()
    own = (
        sa.select(sa.func.coalesce(sa.func.sum(a.c.used), 0))
        .where(same_inv, a.c.consumer_id.in_(sa.bindparam("consumer_uuids", expanding=True)))
        .scalar_subquery()
    )
    join = rp.outerjoin(
        inv,
        sa.and_(
            inv.c.resource_provider_id == rp.c.id,
            inv.c.resource_class_id.in_(sa.bindparam("rc_ids", expanding=True)),
        ),
    )
    columns = [
        rp.c.id,
        rp.c.uuid,
        rp.c.generation,
        inv.c.resource_class_id,
        inv.c.total,
        inv.c.reserved,
        inv.c.min_unit,
        inv.c.max_unit,
        inv.c.step_size,
        inv.c.allocation_ratio,
        used.label("used"),
        own.label("own"),
    ]
    if with_consumer:
        # One consumer (PUT): its id and generation ride along, saving a round
        # trip: (SELECT c.id FROM consumers c WHERE c.uuid = :consumer_uuid), ...
        c = m.consumers
        for col, label in ((c.c.id, "consumer_row_id"), (c.c.generation, "consumer_gen")):
            columns.append(
                sa.select(col)
                .where(c.c.uuid == sa.bindparam("consumer_uuid"))
                .scalar_subquery()
                .label(label)
            )
    return (
        sa.select(*columns)
        .select_from(join)
        .where(rp.c.uuid.in_(sa.bindparam("rp_uuids", expanding=True)))
    )


# Statements of the claim path, built once (building one costs more CPU than
# running it from SQLAlchemy's compiled cache).
_PROVIDER_STATE = _build_provider_state_stmt()
_PROVIDER_STATE_ONE_CONSUMER = _build_provider_state_stmt(with_consumer=True)
_RP = m.resource_providers
# SELECT id FROM resource_providers WHERE uuid IN (...) ORDER BY id FOR UPDATE
_LOCK_PROVIDERS = (
    sa.select(_RP.c.id)
    .where(_RP.c.uuid.in_(sa.bindparam("rp_uuids", expanding=True)))
    .order_by(_RP.c.id)
    .with_for_update()
)
# A request with performance work also locks the roots of its providers (the
# eco check below reads the roots' traits; a twin write flipping a root to eco
# bumps, so locks, that root): one statement, one id order for all of them.
# SELECT id FROM resource_providers WHERE id IN (
#   SELECT id FROM resource_providers WHERE uuid IN (...)
#   UNION SELECT COALESCE(root_provider_id, id) FROM resource_providers WHERE uuid IN (...))
# ORDER BY id FOR UPDATE
# (a UNION of two index lookups rather than ``uuid IN (...) OR id IN (...)``,
# which a planner may answer with a scan of every provider).
_RP_IN = _RP.alias("rp_in")
_LOCK_PROVIDERS_AND_ROOTS = (
    sa.select(_RP.c.id)
    .where(
        _RP.c.id.in_(
            sa.union(
                sa.select(_RP_IN.c.id).where(
                    _RP_IN.c.uuid.in_(sa.bindparam("rp_uuids", expanding=True))
                ),
                sa.select(sa.func.coalesce(_RP_IN.c.root_provider_id, _RP_IN.c.id)).where(
                    _RP_IN.c.uuid.in_(sa.bindparam("rp_uuids", expanding=True))
                ),
            )
        )
    )
    .order_by(_RP.c.id)
    .with_for_update()
)
# The eco and power-state checks (_check_root_traits): which of the
# providers of the claims (sharing providers aside: they are nobody's host)
# have a root carrying one of the traits :names, read after the locks above,
# in the claim's transaction.
# SELECT rp.uuid, root.uuid, t.name FROM resource_providers rp
# JOIN resource_providers root ON root.id = COALESCE(rp.root_provider_id, rp.id)
# JOIN resource_provider_traits rpt ON rpt.resource_provider_id = root.id
# JOIN traits t ON t.id = rpt.trait_id
# WHERE rp.uuid IN (:rp_uuids) AND t.name IN (:names)
#   AND NOT EXISTS (<rp carries MISC_SHARES_VIA_AGGREGATE>)
ECO_TRAIT = vocabulary.PROFILE_TRAITS[vocabulary.ECO]
# The power-state traits of a node that is not on (suspending, off, waking).
SLEEPING_TRAITS = frozenset(vocabulary.POWER_STATE_TRAITS[state] for state in vocabulary.NOT_ON)
_REFUSING_TRAITS = sorted({ECO_TRAIT} | SLEEPING_TRAITS)
_ROOT = _RP.alias("root")
_RPT = m.resource_provider_traits
_ROOTS_CARRYING = (
    sa.select(_RP.c.uuid, _ROOT.c.uuid.label("root_uuid"), m.traits.c.name)
    .select_from(
        _RP.join(_ROOT, _ROOT.c.id == sa.func.coalesce(_RP.c.root_provider_id, _RP.c.id))
        .join(_RPT, _RPT.c.resource_provider_id == _ROOT.c.id)
        .join(m.traits, m.traits.c.id == _RPT.c.trait_id)
    )
    .where(
        _RP.c.uuid.in_(sa.bindparam("rp_uuids", expanding=True)),
        m.traits.c.name.in_(sa.bindparam("names", expanding=True)),
        server_group_obj.is_host_provider(),
    )
)
# UPDATE resource_providers SET generation = generation + 1, updated_at = :now
# WHERE id = :id AND generation = :seen
_GUARD_PROVIDER = (
    _RP.update()
    .where(_RP.c.id == sa.bindparam("g_id"), _RP.c.generation == sa.bindparam("g_seen"))
    .values(generation=_RP.c.generation + 1, updated_at=sa.bindparam("g_now"))
)
_BUMP_PROVIDER = (
    _RP.update()
    .where(_RP.c.id == sa.bindparam("g_id"))
    .values(generation=_RP.c.generation + 1, updated_at=sa.bindparam("g_now"))
)
_INSERT_ALLOCATIONS = m.allocations.insert()


@dataclasses.dataclass
class _ConsumerRow:
    id: int
    generation: int


def _provider_state(conn, rp_uuids, rc_ids, consumer_uuids, with_consumer=False):
    """Generation, inventory and committed usage of providers, in one statement.

    Returns ``{rp_uuid: {"id", "generation", "inventory": {rc_id: row}}}``;
    with ``with_consumer`` (exactly one consumer uuid) also, from the same
    statement, ``{uuid: row}`` of that consumer if it exists (``id``,
    ``generation``), as ``consumer_obj.get_by_uuids`` would answer.
    """
    state = {}
    params = {
        "rp_uuids": list(rp_uuids),
        "rc_ids": list(rc_ids) or [-1],
        "consumer_uuids": list(consumer_uuids),
    }
    stmt = _PROVIDER_STATE
    if with_consumer:
        (params["consumer_uuid"],) = consumer_uuids
        stmt = _PROVIDER_STATE_ONE_CONSUMER
    existing = {}
    for row in conn.execute(stmt, params):
        entry = state.setdefault(
            row.uuid, {"id": row.id, "generation": row.generation, "inventory": {}}
        )
        if row.resource_class_id is not None:
            entry["inventory"][row.resource_class_id] = row
        if with_consumer and row.consumer_row_id is not None:
            existing[consumer_uuids[0]] = _ConsumerRow(row.consumer_row_id, row.consumer_gen)
    return (state, existing) if with_consumer else state


def _resource_class_ids(conn, names, cache=None, learned=None):
    """{name: id} of the existing classes among ``names``.

    Standard classes come from ``cache`` once known (they cannot be deleted);
    custom ones are always read.
    """
    if not names:
        return {}
    found = {}
    missing = []
    for name in names:
        rc_id = cache.classes.get(name) if cache is not None else None
        if rc_id is None:
            missing.append(name)
        else:
            found[name] = rc_id
    if missing:
        rc = m.resource_classes
        for row in conn.execute(sa.select(rc.c.id, rc.c.name).where(rc.c.name.in_(missing))):
            found[row.name] = row.id
            if learned is not None and row.name in _STANDARD_CLASSES:
                learned.classes[row.name] = row.id
    return found


def _check_consumer_generations(writes, existing):
    for w in writes:
        if w.generation is NOT_CHECKED:
            continue
        row = existing.get(w.uuid)
        if row is None:
            if w.generation is not None:
                raise ConsumerGenerationConflict(None, w.generation)
        elif row.generation != w.generation:
            raise ConsumerGenerationConflict(row.generation, w.generation)


def _check_capacity(writes, state, rc_ids):
    """Refuse what does not fit, judged on the committed snapshot only."""
    requested = collections.defaultdict(int)
    for w in writes:
        for rp_uuid, resources in w.allocations.items():
            for rc_name, amount in resources.items():
                requested[(rp_uuid, rc_name)] += amount
    for w in writes:
        for rp_uuid, resources in w.allocations.items():
            inventory = state[rp_uuid]["inventory"]
            if not any(rc_ids[name] in inventory for name in resources):
                raise InvalidInventory(", ".join(resources), rp_uuid)
            for rc_name, amount in resources.items():
                inv = inventory.get(rc_ids[rc_name])
                if inv is None:
                    raise InvalidInventory(rc_name, rp_uuid)
                if amount < inv.min_unit or amount > inv.max_unit or amount % inv.step_size:
                    raise ConstraintsViolated(rc_name, rp_uuid)
                capacity = (inv.total - inv.reserved) * inv.allocation_ratio
                after = inv.used - inv.own + requested[(rp_uuid, rc_name)]
                # Over capacity is allowed only when it is no worse than the
                # committed usage (e.g. a consumer shrinking on a provider
                # whose inventory was reduced under it).
                if after > capacity and after > inv.used:
                    raise CapacityExceeded(rc_name, rp_uuid)


def _write_attempt(conn, writes, lock_first=False, cache=None, learned=None):
    """One attempt in the open transaction ``conn``; raise LostRace to retry.

    The steps of the module docstring, in order: lock (``lock_first``),
    read, check, then write consumers, guard providers and replace the
    allocation rows.

    ``lock_first`` (every attempt on PostgreSQL): take the provider row locks,
    in id order, before reading. Writers of a hot provider then wait their
    turn instead of reading optimistically and losing at the guard; the
    statements after the lock see everything its holder committed (READ
    COMMITTED), and the generation guard below still checks. SQLite ignores
    FOR UPDATE (its writers are serialized by BEGIN IMMEDIATE).

    ``cache`` (an _IdCache) spares the lookups of project, user, consumer type
    and standard class ids; ids this attempt reads or creates go to
    ``learned``, which the caller publishes once the transaction committed.
    """
    ids = _Ids(
        conn,
        cache if cache is not None else _IdCache(),
        learned if learned is not None else _IdCache(),
    )
    now = db_mod.utcnow()
    rp_uuids = _ordered_unique(rp_uuid for w in writes for rp_uuid in w.allocations)
    # The scheduler's claims (they say their workload class): checked
    # against the roots' profile and power state, so their roots are locked.
    classed = [w for w in writes if w.allocations and w.workload_class is not None]
    if lock_first and rp_uuids:
        lock = _LOCK_PROVIDERS_AND_ROOTS if classed else _LOCK_PROVIDERS
        conn.execute(lock, {"rp_uuids": rp_uuids}).all()
    rc_names = _ordered_unique(
        name for w in writes for res in w.allocations.values() for name in res
    )
    rc_ids = _resource_class_ids(conn, rc_names, ids.cache, ids.learned)
    state, existing = _read_state(conn, writes, rp_uuids, rc_ids)
    _check(writes, rp_uuids, rc_names, rc_ids, state, existing)
    if classed:
        _check_root_traits(conn, classed, existing)
    # After the provider locks (one lock order: providers, then groups).
    server_group_obj.check_claims(conn, writes)
    emptied = [w.uuid for w in writes if not w.allocations and w.uuid in existing]
    released = _providers_of(conn, emptied)
    # Consumers first (by id, then new ones by uuid), then providers (by id):
    # one lock order for all writers.
    _write_consumers(conn, writes, existing, ids)
    _guard_providers(
        conn, {state[u]["id"]: state[u]["generation"] for u in rp_uuids}, released, now
    )
    _replace_rows(conn, writes, existing, state, rc_ids, now)
    if emptied:
        conn.execute(m.consumers.delete().where(m.consumers.c.uuid.in_(emptied)))


def _read_state(conn, writes, rp_uuids, rc_ids):
    """Step 2: (provider state, {consumer uuid: existing consumer row}).

    The common claim (one consumer, PUT) reads its consumer in the provider
    statement; otherwise the consumers are one more statement.
    """
    consumer_uuids = [w.uuid for w in writes]
    if len(writes) == 1 and rp_uuids:
        state, existing = _provider_state(
            conn, rp_uuids, list(rc_ids.values()), consumer_uuids, with_consumer=True
        )
        if not state:
            # No provider row to carry it: ask for the consumer on its own
            # (its generation is checked before "no such provider").
            existing = consumer_obj.get_by_uuids(conn, consumer_uuids)
        return state, existing
    existing = consumer_obj.get_by_uuids(conn, consumer_uuids)
    state = (
        _provider_state(conn, rp_uuids, list(rc_ids.values()), consumer_uuids) if rp_uuids else {}
    )
    return state, existing


def _check(writes, rp_uuids, rc_names, rc_ids, state, existing):
    """Step 3, in upstream's order: consumer generations, unknown providers,
    unknown classes, then capacity and unit constraints."""
    _check_consumer_generations(writes, existing)
    for rp_uuid in rp_uuids:
        if rp_uuid not in state:
            raise ProviderNotFound(rp_uuid)
    for name in rc_names:
        if name not in rc_ids:
            raise ResourceClassNotFound(name)
    _check_capacity(writes, state, rc_ids)


def _check_root_traits(conn, classed, existing):
    """Refuse a claim on a tree whose root says it must not take it: one
    query for both checks, read after the provider and root locks.

    - Performance work on a root carrying the eco profile trait
      (ProfileConflict). The trait is read after the locks, so a twin write
      that made the root eco either committed before (and is seen here) or
      waits for this claim to commit (and the power controller's tick then
      counts this consumer, objects/node.py).
    - Any work on a root whose power state is not on: suspending, off or
      waking ([power] suspend_enabled; PowerStateConflict). The scheduler
      leaves such nodes out of its candidates, but a view it keeps between
      batches (scheduler/host_cache.py) can be older than the power
      controller's twin write, and a claim on a node being powered off
      would lose its instance.

    Only writes that say their ``workload_class`` (``classed``: the
    scheduler's claims) are checked; a plain client is never refused here.
    A consumer that already holds allocations in that tree may be rewritten
    there (a node draining its performance work keeps it; the write adds no
    work to it).

    :raise ProfileConflict, PowerStateConflict: nothing may be written.
    """
    rp_uuids = _ordered_unique(rp for w in classed for rp in w.allocations)
    marked = {}  # provider uuid -> (root uuid, {refusing traits of the root})
    for rp, root, trait in conn.execute(
        _ROOTS_CARRYING, {"rp_uuids": rp_uuids, "names": _REFUSING_TRAITS}
    ):
        marked.setdefault(rp, (root, set()))[1].add(trait)
    if not marked:
        return
    already = set()
    rewritten = [w.uuid for w in classed if w.uuid in existing]
    if rewritten:
        # SELECT DISTINCT a.consumer_id, root.uuid FROM allocations a
        # JOIN resource_providers rp ON rp.id = a.resource_provider_id
        # JOIN resource_providers root ON root.id = COALESCE(rp.root_provider_id, rp.id)
        # WHERE a.consumer_id IN (:consumers) AND root.uuid IN (:roots)
        a = m.allocations
        roots = sorted({root for root, _traits in marked.values()})
        already = set(
            conn.execute(
                sa.select(a.c.consumer_id, _ROOT.c.uuid)
                .distinct()
                .select_from(
                    a.join(_RP, _RP.c.id == a.c.resource_provider_id).join(
                        _ROOT, _ROOT.c.id == sa.func.coalesce(_RP.c.root_provider_id, _RP.c.id)
                    )
                )
                .where(a.c.consumer_id.in_(rewritten), _ROOT.c.uuid.in_(roots))
            ).all()
        )
    for w in classed:
        for rp_uuid in w.allocations:
            hit = marked.get(rp_uuid)
            if hit is None or (w.uuid, hit[0]) in already:
                continue
            root, traits = hit
            if w.workload_class == vocabulary.PERFORMANCE and ECO_TRAIT in traits:
                raise ProfileConflict(w.uuid, rp_uuid, root, ECO_TRAIT)
            sleeping = sorted(traits & SLEEPING_TRAITS)
            if sleeping:
                raise PowerStateConflict(w.uuid, rp_uuid, root, sleeping[0])


def _providers_of(conn, consumer_uuids):
    """Ids of the providers holding allocations of ``consumer_uuids``.

    Providers that lose every allocation of an emptied consumer get their
    generation bumped too (as upstream); a removal cannot over-commit, so
    that bump needs no guard.
    """
    if not consumer_uuids:
        return set()
    a = m.allocations
    return set(
        conn.execute(
            sa.select(a.c.resource_provider_id)
            .distinct()
            .where(a.c.consumer_id.in_(consumer_uuids))
        ).scalars()
    )


class _Ids:
    """Project, user and consumer type ids of one attempt, through the cache.

    Their rows are get-or-create and harmless to share between writers.
    """

    def __init__(self, conn, cache, learned):
        self.conn = conn
        self.cache = cache
        self.learned = learned

    def _cached(self, kind, key, lookup):
        value = getattr(self.cache, kind).get(key)
        if value is None:
            value = getattr(self.learned, kind).get(key)
        if value is None:
            value = lookup()
            getattr(self.learned, kind)[key] = value
        return value

    def of(self, w):
        """(project id, user id, consumer type id or None) of one write."""
        conn = self.conn
        project_id = self._cached(
            "projects",
            w.project_id,
            lambda: consumer_obj.ensure_external_id(conn, m.projects, w.project_id),
        )
        user_id = self._cached(
            "users", w.user_id, lambda: consumer_obj.ensure_external_id(conn, m.users, w.user_id)
        )
        type_id = None
        if w.consumer_type is not None:
            type_id = self._cached(
                "types",
                w.consumer_type,
                lambda: consumer_obj.ensure_consumer_type(conn, w.consumer_type),
            )
        return project_id, user_id, type_id


def _write_consumers(conn, writes, existing, ids):
    """Step 4a: move each existing consumer's generation (LostRace when it
    moved since the read), then create the new consumers that get allocations."""
    for w in sorted((w for w in writes if w.uuid in existing), key=lambda w: existing[w.uuid].id):
        row = existing[w.uuid]
        project_id, user_id, type_id = ids.of(w)
        values = {"project_id": project_id, "user_id": user_id}
        if type_id is not None:
            values["consumer_type_id"] = type_id
        if w.workload_class is not None:
            values["workload_class"] = w.workload_class
        if not consumer_obj.bump(conn, row.id, row.generation, values):
            raise LostRace()
    for w in sorted(
        (w for w in writes if w.uuid not in existing and w.allocations), key=lambda w: w.uuid
    ):
        project_id, user_id, type_id = ids.of(w)
        consumer_obj.create(
            conn,
            w.uuid,
            project_id,
            user_id,
            type_id,
            w.workload_class or vocabulary.DEFAULT_WORKLOAD_CLASS,
        )


def _guard_providers(conn, guarded, released, now):
    """Step 4b: move the generation of every provider written to, from the
    one read ({id: seen}; LostRace when it moved), and of every provider only
    released from, unguarded. In id order."""
    for rp_id in sorted(guarded.keys() | released):
        if rp_id in guarded:
            res = conn.execute(
                _GUARD_PROVIDER, {"g_id": rp_id, "g_seen": guarded[rp_id], "g_now": now}
            )
            if res.rowcount != 1:
                raise LostRace()
        else:
            conn.execute(_BUMP_PROVIDER, {"g_id": rp_id, "g_now": now})


def _replace_rows(conn, writes, existing, state, rc_ids, now):
    """Step 5: the consumers' allocation rows become exactly ``writes``."""
    a = m.allocations
    # A consumer without a row holds no allocation (its rows go with it).
    rewritten = [w.uuid for w in writes if w.uuid in existing]
    if rewritten:
        conn.execute(a.delete().where(a.c.consumer_id.in_(rewritten)))
    rows = [
        {
            "resource_provider_id": state[rp_uuid]["id"],
            "consumer_id": w.uuid,
            "resource_class_id": rc_ids[rc_name],
            "used": amount,
            "created_at": now,
        }
        for w in writes
        for rp_uuid, resources in w.allocations.items()
        for rc_name, amount in resources.items()
    ]
    if len(rows) == 1:
        conn.execute(_INSERT_ALLOCATIONS, rows[0])
    elif rows:
        conn.execute(_INSERT_ALLOCATIONS, rows)


def delete_for_consumer(db, consumer_uuid, before=None):
    """Remove every allocation of a consumer, and the consumer.

    Returns False when the consumer holds no allocation (nothing changes).
    Provider generations are left alone, as upstream: a release cannot
    over-commit anything. ``before(conn)`` runs first in the same
    transaction (a guard: what it raises leaves everything as it was).
    """
    try:
        with db.write() as conn:
            if before is not None:
                before(conn)
            # Remove (and so lock) the consumer row first, in the same order as
            # replace_all: a concurrent rewrite of this consumer waits, then
            # finds its generation guard matching nothing and starts over.
            conn.execute(_DELETE_CONSUMER, {"d_uuid": consumer_uuid})
            deleted = conn.execute(_DELETE_ALLOCATIONS, {"d_uuid": consumer_uuid}).rowcount
            if not deleted:
                raise _NothingToDelete()
    except _NothingToDelete:
        return False
    return True


# DELETE FROM consumers WHERE uuid = :uuid; DELETE FROM allocations WHERE consumer_id = :uuid
_DELETE_CONSUMER = m.consumers.delete().where(m.consumers.c.uuid == sa.bindparam("d_uuid"))
_DELETE_ALLOCATIONS = m.allocations.delete().where(
    m.allocations.c.consumer_id == sa.bindparam("d_uuid")
)


class _NothingToDelete(Exception):
    """Internal: roll back the (empty) delete."""


# --- reads ------------------------------------------------------------------


def get_for_consumer(db, consumer_uuid):
    """The consumer's allocations and attributes, or None when it has none.

    Returns ``{"allocations": {rp_uuid: {"generation", "resources"}},
    "project_id", "user_id", "generation", "consumer_type", "workload_class",
    "last_modified"}``.
    """
    a, rp, c = m.allocations, m.resource_providers, m.consumers
    p, u, rc = m.projects, m.users, m.resource_classes
    stmt = (
        sa.select(
            rp.c.uuid.label("rp_uuid"),
            rp.c.generation.label("rp_generation"),
            rc.c.name.label("resource_class"),
            a.c.used,
            a.c.created_at,
            a.c.updated_at,
            c.c.generation,
            c.c.consumer_type_id,
            c.c.workload_class,
            p.c.external_id.label("project_id"),
            u.c.external_id.label("user_id"),
        )
        .select_from(
            a.join(rp, a.c.resource_provider_id == rp.c.id)
            .join(rc, a.c.resource_class_id == rc.c.id)
            .join(c, a.c.consumer_id == c.c.uuid)
            .join(p, c.c.project_id == p.c.id)
            .join(u, c.c.user_id == u.c.id)
        )
        .where(a.c.consumer_id == consumer_uuid)
        .order_by(a.c.id)
    )
    with db.read() as conn:
        rows = conn.execute(stmt).all()
        if not rows:
            return None
        type_names = consumer_obj.type_names(conn)
    allocations = {}
    for row in rows:
        entry = allocations.setdefault(
            row.rp_uuid, {"generation": row.rp_generation, "resources": {}}
        )
        entry["resources"][row.resource_class] = row.used
    first = rows[0]
    return {
        "allocations": allocations,
        "project_id": first.project_id,
        "user_id": first.user_id,
        "generation": first.generation,
        "consumer_type": type_names.get(first.consumer_type_id, consumer_obj.UNKNOWN_CONSUMER_TYPE),
        "workload_class": first.workload_class,
        "last_modified": _latest(rows),
    }


def get_for_provider(db, rp_uuid):
    """Allocations on a provider by consumer, or None when the provider is unknown.

    Returns ``{"generation", "allocations": {consumer_uuid: {"resources",
    "consumer_generation"}}, "last_modified"}``.
    """
    a, rp, c, rc = m.allocations, m.resource_providers, m.consumers, m.resource_classes
    with db.read() as conn:
        provider = conn.execute(
            sa.select(rp.c.id, rp.c.generation).where(rp.c.uuid == rp_uuid)
        ).first()
        if provider is None:
            return None
        rows = conn.execute(
            sa.select(
                a.c.consumer_id,
                rc.c.name.label("resource_class"),
                a.c.used,
                a.c.created_at,
                a.c.updated_at,
                c.c.generation.label("consumer_generation"),
            )
            .select_from(
                a.join(rc, a.c.resource_class_id == rc.c.id).outerjoin(
                    c, a.c.consumer_id == c.c.uuid
                )
            )
            .where(a.c.resource_provider_id == provider.id)
            .order_by(a.c.id)
        ).all()
    allocations = {}
    for row in rows:
        entry = allocations.setdefault(
            row.consumer_id,
            {"resources": {}, "consumer_generation": row.consumer_generation},
        )
        entry["resources"][row.resource_class] = row.used
    return {
        "generation": provider.generation,
        "allocations": allocations,
        "last_modified": _latest(rows),
    }


def _latest(rows):
    stamps = [row.updated_at or row.created_at for row in rows]
    stamps = [s for s in stamps if s is not None]
    return max(stamps) if stamps else None


def workload_usages(db, in_tree=None, limit=None, after=None):
    """(usages, next id): per root provider, how many consumers of each
    workload class hold allocations.

    At most ``limit`` roots, in root provider id order, after the one with
    id ``after``; ``next id`` is the last one's id when more remain, else None.
    ``in_tree`` (a provider uuid) limits the answer to that provider's tree;
    the tree's root is then always listed, with zero counts if idle. An
    unknown ``in_tree`` gives an empty answer.
    """
    a, rp, c = m.allocations, m.resource_providers, m.consumers
    root = rp.alias("root")
    joined = (
        a.join(rp, a.c.resource_provider_id == rp.c.id)
        .join(root, rp.c.root_provider_id == root.c.id)
        .join(c, a.c.consumer_id == c.c.uuid)
    )
    # SELECT root.id, root.uuid, c.workload_class, COUNT(DISTINCT c.uuid)
    # FROM allocations a JOIN resource_providers rp ON a.resource_provider_id = rp.id
    # JOIN resource_providers root ON rp.root_provider_id = root.id
    # JOIN consumers c ON a.consumer_id = c.uuid
    # WHERE rp.root_provider_id = :root_id | (> :after AND <= :last of the page)
    # GROUP BY root.id, root.uuid, c.workload_class
    stmt = (
        sa.select(root.c.id, root.c.uuid, c.c.workload_class, sa.func.count(sa.distinct(c.c.uuid)))
        .select_from(joined)
        .group_by(root.c.id, root.c.uuid, c.c.workload_class)
    )
    result = {}
    next_id = None
    with db.read() as conn:
        if in_tree is not None:
            tree = conn.execute(
                sa.select(root.c.uuid, root.c.id)
                .select_from(rp.join(root, rp.c.root_provider_id == root.c.id))
                .where(rp.c.uuid == in_tree)
            ).first()
            if tree is None or (after is not None and tree.id <= after):
                return {}, None
            result[tree.uuid] = dict.fromkeys(vocabulary.WORKLOAD_CLASSES, 0)
            page = {tree.id}
            stmt = stmt.where(rp.c.root_provider_id == tree.id)
        else:
            # The page's roots: SELECT DISTINCT rp.root_provider_id FROM <joined>
            # [WHERE rp.root_provider_id > :after] ORDER BY 1 [LIMIT :limit + 1]
            roots = sa.select(rp.c.root_provider_id).select_from(joined).distinct()
            if after is not None:
                roots = roots.where(rp.c.root_provider_id > after)
            roots = roots.order_by(rp.c.root_provider_id)
            if limit is not None:
                roots = roots.limit(limit + 1)
            ids = list(conn.execute(roots).scalars())
            if limit is not None and len(ids) > limit:
                ids = ids[:limit]
                next_id = ids[-1]
            if not ids:
                return {}, None
            page = set(ids)
            # A range, not a list of ids: a page may hold 10,000 roots.
            stmt = stmt.where(rp.c.root_provider_id <= ids[-1])
            if after is not None:
                stmt = stmt.where(rp.c.root_provider_id > after)
        for root_id, root_uuid, workload_class, count in conn.execute(stmt.order_by(root.c.id)):
            if root_id not in page:
                continue  # allocated between the two reads: the next walk lists it
            counts = result.setdefault(root_uuid, dict.fromkeys(vocabulary.WORKLOAD_CLASSES, 0))
            counts[workload_class] = counts.get(workload_class, 0) + count
    return result, next_id
