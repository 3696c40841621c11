"""Node records, node hardware and node twins of root providers (extension).

A *node* is a root resource provider with power-policy data attached: a node
record (cell, labels, reserved/unschedulable flags), a hardware record (what
Joulie's NodeHardware holds) and a twin (spec: profile and caps, managed_by;
status: schedulable class). Any of the three may exist without the others;
``GET /nodes`` lists every root provider that has at least one.

Twin writes also set the profile trait of the root provider
(``CUSTOM_POWER_PROFILE_PERFORMANCE`` / ``CUSTOM_POWER_PROFILE_ECO``) in the
same transaction, so a plain placement client filtering on traits never sees
a profile that disagrees with the twin. When the trait set changes, the
provider generation is bumped, as for any trait change, so a concurrent
trait writer holding the old generation gets its 409. Node reads carry the
profile traits the provider holds (``profile_traits``), so the power
controller sees in the same ``GET /nodes`` when someone changed them with
``PUT /resource_providers/{uuid}/traits`` and puts them back.

Node records and twins carry their own generations; an update must name the
generation it read (``None`` when it believes there is no record yet).

Heartbeats (``heartbeat``, the node agent's): the node record's
``heartbeat_at`` is stamped with the database's clock, and reads give its age
by the same clock (``heartbeat_age_seconds``), so no machine's clock skew
makes a node look dead or alive. A heartbeat may carry the twin's status
(what the agent applied and measured); it moves neither the node record's
generation nor the twin's, so it never races the operator or the power
controller.
"""

import functools
import json

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from joule import vocabulary
from placement import db as db_mod
from placement import models as m

HARDWARE_FIELDS = (
    "cpu_model",
    "cpu_sockets",
    "cpu_cores",
    "memory_gib",
    "gpu_vendor",
    "gpu_model",
    "gpu_count",
    "gpu_min_cap_watts",
    "gpu_max_cap_watts",
    "cpu_min_cap_watts",
    "cpu_max_cap_watts",
)
TWIN_FIELDS = (
    "profile",
    "cpu_cap_watts",
    "gpu_cap_watts",
    "managed_by",
    "schedulable_class",
    "power_state",
)

# Keeps IN (...) lists well inside every backend's bound-parameter limit.
_CHUNK = 900

_rp = m.resource_providers
_node = m.nodes
_hw = m.node_hardware
_twin = m.node_twins
_failures = m.build_failures


class ProviderNotFound(Exception):
    def __init__(self, uuids):
        self.uuids = sorted(uuids)
        super().__init__(", ".join(self.uuids))


class NotRoot(Exception):
    def __init__(self, uuids):
        self.uuids = sorted(uuids)
        super().__init__(", ".join(self.uuids))


class NotFound(Exception):
    """The root provider exists but has no such node data."""


class Conflict(Exception):
    """A stale or missing generation; the message says which and why."""


def db_now(conn):
    """An expression for the database's current UTC time (naive, as stored)."""
    return db_mod.clock(conn)


def _now_of(conn):
    return db_mod.now(conn)


def _stamp(value):
    return None if value is None else value.isoformat() + "Z"


def _age(heartbeat_at, now):
    """Seconds since ``heartbeat_at`` by the database's clock ``now`` (None: never)."""
    if heartbeat_at is None or now is None:
        return None
    return round(max(0.0, (now - heartbeat_at).total_seconds()), 3)


def _status(text):
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _chunks(items):
    items = list(items)
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


# --- serialisation ------------------------------------------------------------


def _hardware_dict(row):
    if row.hw_rp is None:
        return None
    return {f: getattr(row, f"hw_{f}") for f in HARDWARE_FIELDS}


def _twin_dict(row):
    if row.tw_rp is None:
        return None
    out = _shown_twin({f: getattr(row, f"tw_{f}") for f in TWIN_FIELDS})
    out["generation"] = row.tw_generation
    out["status"] = _status(row.tw_status)
    out["status_updated_at"] = _stamp(row.tw_status_updated_at)
    return out


def _shown_twin(fields):
    """A twin's fields as the API shows them: ``power_state`` only once it
    has one (a cluster that never suspends a node sees the twins it saw
    before power states existed)."""
    if fields.get("power_state") is None:
        fields.pop("power_state", None)
    return fields


def _node_dict(row, profile_traits, now=None):
    has_node = row.n_rp is not None
    return {
        "uuid": row.uuid,
        "name": row.name,
        "cell": row.n_cell if has_node else None,
        "labels": json.loads(row.n_labels) if has_node and row.n_labels else {},
        "reserved": bool(row.n_reserved) if has_node else False,
        "unschedulable": bool(row.n_unschedulable) if has_node else False,
        # None: no node record yet (what a creating PUT must send).
        "generation": row.n_generation if has_node else None,
        "hardware": _hardware_dict(row),
        "twin": _twin_dict(row),
        "profile_traits": profile_traits,
        "heartbeat_at": _stamp(row.n_heartbeat_at) if has_node else None,
        "heartbeat_age_seconds": _age(row.n_heartbeat_at, now) if has_node else None,
    }


def _profile_traits(conn, rp_id=None, rp_ids=None):
    """{provider uuid: sorted profile trait names it carries} (of one provider,
    of the ids ``rp_ids``, or all).

    Twin writes keep this equal to the trait of the twin's profile; anyone
    holding the provider generation may change it behind their back, and the
    power controller compares the two on every tick.
    """
    rpt, tr = m.resource_provider_traits, m.traits
    # SELECT rp.uuid, t.name FROM resource_provider_traits rpt JOIN resource_providers rp
    #   JOIN traits t WHERE t.name IN (<profile traits>) [AND rp.id = :rp_id]
    query = (
        sa.select(_rp.c.uuid, tr.c.name)
        .select_from(
            rpt.join(_rp, _rp.c.id == rpt.c.resource_provider_id).join(
                tr, tr.c.id == rpt.c.trait_id
            )
        )
        .where(tr.c.name.in_(list(vocabulary.PROFILE_TRAITS.values())))
    )
    if rp_id is not None:
        query = query.where(_rp.c.id == rp_id)
    if rp_ids is not None:
        query = query.where(_rp.c.id.in_(rp_ids))
    out = {}
    for uuid, name in conn.execute(query):
        out.setdefault(uuid, []).append(name)
    return {uuid: sorted(names) for uuid, names in out.items()}


def _page_traits(conn, rows):
    """_profile_traits of the providers of a page of list_nodes (ids last)."""
    ids = [row[-1] for row in rows]
    out = {}
    for start in range(0, len(ids), 900):
        out.update(_profile_traits(conn, rp_ids=ids[start : start + 900]))
    return out


def _stamps(row):
    return [
        s
        for s in (
            row.n_updated,
            row.n_created,
            row.hw_updated,
            row.hw_created,
            row.tw_updated,
            row.tw_created,
        )
        if s is not None
    ]


def _select():
    cols = [
        _rp.c.id,
        _rp.c.uuid,
        _rp.c.name,
        _node.c.resource_provider_id.label("n_rp"),
        _node.c.cell.label("n_cell"),
        _node.c.labels.label("n_labels"),
        _node.c.reserved.label("n_reserved"),
        _node.c.unschedulable.label("n_unschedulable"),
        _node.c.generation.label("n_generation"),
        _node.c.heartbeat_at.label("n_heartbeat_at"),
        _node.c.created_at.label("n_created"),
        _node.c.updated_at.label("n_updated"),
        _hw.c.resource_provider_id.label("hw_rp"),
        _hw.c.created_at.label("hw_created"),
        _hw.c.updated_at.label("hw_updated"),
        _twin.c.resource_provider_id.label("tw_rp"),
        _twin.c.generation.label("tw_generation"),
        _twin.c.status.label("tw_status"),
        _twin.c.status_updated_at.label("tw_status_updated_at"),
        _twin.c.created_at.label("tw_created"),
        _twin.c.updated_at.label("tw_updated"),
        _failures.c.failed_builds.label("bf_failed_builds"),
    ]
    cols += [_hw.c[f].label(f"hw_{f}") for f in HARDWARE_FIELDS]
    cols += [_twin.c[f].label(f"tw_{f}") for f in TWIN_FIELDS]
    joined = (
        _rp.outerjoin(_node, _node.c.resource_provider_id == _rp.c.id)
        .outerjoin(_hw, _hw.c.resource_provider_id == _rp.c.id)
        .outerjoin(_twin, _twin.c.resource_provider_id == _rp.c.id)
        .outerjoin(_failures, _failures.c.resource_provider_id == _rp.c.id)
    )
    return sa.select(*cols).select_from(joined)


# --- reads --------------------------------------------------------------------


def _root(conn, uuid):
    row = conn.execute(
        sa.select(_rp.c.id, _rp.c.root_provider_id).where(_rp.c.uuid == uuid)
    ).first()
    if row is None:
        raise ProviderNotFound([uuid])
    if row.root_provider_id is not None and row.root_provider_id != row.id:
        raise NotRoot([uuid])
    return row.id


_LIST_COLUMNS = (
    [
        _rp.c.uuid,
        _rp.c.name,
        _node.c.resource_provider_id,
        _node.c.cell,
        _node.c.labels,
        _node.c.reserved,
        _node.c.unschedulable,
        _node.c.generation,
        _hw.c.resource_provider_id,
        _twin.c.resource_provider_id,
        _twin.c.generation,
    ]
    + [_hw.c[f] for f in HARDWARE_FIELDS]
    + [_twin.c[f] for f in TWIN_FIELDS]
    + [_node.c.heartbeat_at, _twin.c.status, _twin.c.status_updated_at]
    # Last: the provider id, the paging key.
    + [_rp.c.id]
)
_HW_AT = 11
_TWIN_AT = _HW_AT + len(HARDWARE_FIELDS)
_TWIN_END = _TWIN_AT + len(TWIN_FIELDS)


def list_nodes(db, cell=None, limit=None, after=None):
    """(nodes, last_modified, next id): at most ``limit`` root providers with
    node data (in ``cell``), in provider id order (creation order: a rename
    or a node created during a walk never moves one across the pages),
    after the one with id ``after``; ``next id`` is the last one's id when
    more remain, else None.

    The reconcile tick of the power controller reads 5,000 nodes through
    this, so it works on plain tuples (no timestamp columns, no per-field
    attribute lookups) and finds last-modified with three aggregates.
    """
    joined = (
        _rp.outerjoin(_node, _node.c.resource_provider_id == _rp.c.id)
        .outerjoin(_hw, _hw.c.resource_provider_id == _rp.c.id)
        .outerjoin(_twin, _twin.c.resource_provider_id == _rp.c.id)
    )
    query = (
        sa.select(*_LIST_COLUMNS)
        .select_from(joined)
        .where(
            _rp.c.id == _rp.c.root_provider_id,
            sa.or_(
                _node.c.resource_provider_id.is_not(None),
                _hw.c.resource_provider_id.is_not(None),
                _twin.c.resource_provider_id.is_not(None),
            ),
        )
        .order_by(_rp.c.id)
    )
    if cell is not None:
        query = query.where(_node.c.cell == cell)
    if after is not None:
        query = query.where(_rp.c.id > after)
    if limit is not None:
        query = query.limit(limit + 1)
    with db.read() as conn:
        rows = conn.execute(query).all()
        more = limit is not None and len(rows) > limit
        if more:
            rows = rows[:limit]
        now = _now_of(conn)
        traits = _profile_traits(conn) if limit is None else _page_traits(conn, rows)
        stamps = [
            conn.execute(
                sa.select(
                    sa.func.max(sa.func.coalesce(t.c.updated_at, t.c.created_at), type_=sa.DateTime)
                )
            ).scalar()
            for t in (_node, _hw, _twin)
        ]
    out = []
    for row in rows:
        has_node = row[2] is not None
        out.append(
            {
                "uuid": row[0],
                "name": row[1],
                "cell": row[3],
                "labels": json.loads(row[4]) if has_node and row[4] else {},
                "reserved": bool(row[5]),
                "unschedulable": bool(row[6]),
                "generation": row[7] if has_node else None,
                "hardware": (
                    dict(zip(HARDWARE_FIELDS, row[_HW_AT:_TWIN_AT], strict=True))
                    if row[8] is not None
                    else None
                ),
                "twin": (
                    {
                        **_shown_twin(dict(zip(TWIN_FIELDS, row[_TWIN_AT:_TWIN_END], strict=True))),
                        "generation": row[10],
                        "status": _status(row[_TWIN_END + 1]),
                        "status_updated_at": _stamp(row[_TWIN_END + 2]),
                    }
                    if row[9] is not None
                    else None
                ),
                "profile_traits": traits.get(row[0], []),
                "heartbeat_at": _stamp(row[_TWIN_END]) if has_node else None,
                "heartbeat_age_seconds": _age(row[_TWIN_END], now) if has_node else None,
            }
        )
    stamps = [s for s in stamps if s is not None]
    return out, (max(stamps) if stamps and out else None), (rows[-1][-1] if more else None)


def _read(db, uuid):
    """The joined node/hardware/twin row of a root provider (one query)."""
    with db.read() as conn:
        rp_id = _root(conn, uuid)
        return conn.execute(_select().where(_rp.c.id == rp_id)).one()


def get_node(db, uuid):
    """(node, last_modified) of a root provider; NotFound when it has no node data."""
    with db.read() as conn:
        rp_id = _root(conn, uuid)
        row = conn.execute(_select().where(_rp.c.id == rp_id)).one()
        traits = _profile_traits(conn, rp_id)
        now = _now_of(conn)
    if row.n_rp is None and row.hw_rp is None and row.tw_rp is None:
        raise NotFound(uuid)
    stamps = _stamps(row)
    return _node_dict(row, traits.get(row.uuid, []), now), (max(stamps) if stamps else None)


def get_hardware(db, uuid):
    """(hardware, last_modified); NotFound when the provider has no hardware record."""
    row = _read(db, uuid)
    if row.hw_rp is None:
        raise NotFound(uuid)
    return _hardware_dict(row), row.hw_updated or row.hw_created


def get_twin(db, uuid):
    """(twin, last_modified); NotFound when the provider has no twin."""
    row = _read(db, uuid)
    if row.tw_rp is None:
        raise NotFound(uuid)
    return _twin_dict(row), row.tw_updated or row.tw_created


@functools.cache
def _node_data_select(postgres):
    """Only the columns node data shows, built once per process. On
    PostgreSQL the ids go as one array parameter: an IN list of a thousand
    parameters costs more to render and convert per request than the query
    costs to run."""
    if postgres:
        wanted = _rp.c.id == sa.any_(sa.bindparam("ids", type_=postgresql.ARRAY(sa.Integer)))
    else:
        wanted = _rp.c.id.in_(sa.bindparam("ids", expanding=True))
    joined = (
        _rp.outerjoin(_node, _node.c.resource_provider_id == _rp.c.id)
        .outerjoin(_hw, _hw.c.resource_provider_id == _rp.c.id)
        .outerjoin(_twin, _twin.c.resource_provider_id == _rp.c.id)
        .outerjoin(_failures, _failures.c.resource_provider_id == _rp.c.id)
    )
    return (
        sa.select(
            _rp.c.uuid,
            _rp.c.name,
            _node.c.resource_provider_id,
            _node.c.cell,
            _node.c.labels,
            _node.c.unschedulable,
            _node.c.reserved,
            _hw.c.resource_provider_id,
            _hw.c.gpu_count,
            _hw.c.gpu_model,
            _hw.c.cpu_model,
            _hw.c.cpu_cores,
            _hw.c.cpu_sockets,
            _hw.c.cpu_max_cap_watts,
            _hw.c.gpu_max_cap_watts,
            _twin.c.profile,
            _twin.c.schedulable_class,
            _twin.c.power_state,
            _failures.c.failed_builds,
            _node.c.heartbeat_at,
            (
                sa.func.timezone("UTC", sa.func.clock_timestamp(), type_=sa.DateTime)
                if postgres
                else sa.func.strftime("%Y-%m-%d %H:%M:%f", "now", type_=sa.DateTime)
            ),
        )
        .select_from(joined)
        .where(wanted)
    )


def node_data(db, root_ids, conn=None):
    """{root uuid: what GET /allocation_candidates?node_data=true shows of it}.

    Every root is listed, with None for the parts it has no record of (the
    candidate is a plain provider to a client that knows nothing of nodes).
    ``conn``: read on this connection (the candidates' own) instead of a new
    one from ``db``.
    """
    if not root_ids:
        return {}
    if conn is None:
        with db.read() as own:
            return node_data(db, root_ids, own)
    ids = list(root_ids)
    out = {}
    postgres = conn.dialect.name == "postgresql"
    query = _node_data_select(postgres)
    step = len(ids) if postgres else _CHUNK
    for i in range(0, len(ids), step):
        rows = conn.execute(query, {"ids": ids[i : i + step]}).all()
        for (
            uuid,
            name,
            n_rp,
            cell,
            labels,
            unschedulable,
            reserved,
            hw_rp,
            gpu_count,
            gpu_model,
            cpu_model,
            cpu_cores,
            cpu_sockets,
            cpu_max_watts,
            gpu_max_watts,
            profile,
            schedulable_class,
            power_state,
            failed_builds,
            heartbeat_at,
            now,
        ) in rows:
            has_node = n_rp is not None
            if has_node:
                try:
                    labels = json.loads(labels or "{}")
                except ValueError:
                    labels = {}
            efficiency = vocabulary.cores_per_watt(
                cpu_cores, cpu_sockets, cpu_max_watts, gpu_count, gpu_max_watts
            )
            out[uuid] = {
                "name": name,
                "cell": cell if has_node else None,
                "family": vocabulary.family_key(gpu_count, gpu_model, cpu_model)
                if hw_rp is not None
                else None,
                # Shown only when the hardware record gives it (as power_state).
                **({"cores_per_watt": round(efficiency, 6)} if efficiency is not None else {}),
                "profile": profile,
                "schedulable_class": schedulable_class,
                **({"power_state": power_state} if power_state is not None else {}),
                "labels": labels if has_node else None,
                "unschedulable": bool(unschedulable) if has_node else None,
                "reserved": bool(reserved) if has_node else None,
                "failed_builds": failed_builds or 0,
                # Seconds since the node agent's last heartbeat by the
                # database's clock; None when no agent ever reported.
                "heartbeat_age": _age(heartbeat_at, now),
            }
    return out


def heartbeat(db, uuid, twin_status=None):
    """Stamp the node record of ``uuid`` with the database's clock; store
    ``twin_status`` (a JSON-able dict) on its twin when given and the twin
    exists. Returns {"heartbeat_at", "twin": twin dict or None}.

    Neither generation moves: a heartbeat never makes the operator's or the
    power controller's next write a conflict.

    :raise ProviderNotFound, NotRoot, NotFound: (no node record) nothing is written.
    """
    with db.write() as conn:
        rp_id = _root(conn, uuid)
        done = conn.execute(
            _node.update()
            .where(_node.c.resource_provider_id == rp_id)
            .values(heartbeat_at=db_now(conn))
        ).rowcount
        if done != 1:
            raise NotFound(uuid)
        if twin_status is not None:
            conn.execute(
                _twin.update()
                .where(_twin.c.resource_provider_id == rp_id)
                .values(
                    status=json.dumps(twin_status, sort_keys=True),
                    status_updated_at=db_now(conn),
                )
            )
        row = conn.execute(_select().where(_rp.c.id == rp_id)).one()
    return {"heartbeat_at": _stamp(row.n_heartbeat_at), "twin": _twin_dict(row)}


def record_build_outcome(db, uuid, succeeded):
    """Count a failed build on the host ``uuid`` (a root provider), or clear
    its count after a successful one; return the count now.

    :raise ProviderNotFound, NotRoot.
    """
    return record_build_outcomes(db, [(uuid, succeeded)])[uuid]


def record_build_outcomes(db, outcomes):
    """Record builds on hosts, all or none, in the order given: each failure
    adds one to its host's consecutive failed builds, each success clears
    them. ``outcomes``: (root provider uuid, succeeded) pairs, a host may
    appear several times. Returns {uuid: its count after the last one}.

    :raise ProviderNotFound, NotRoot: (every such uuid) nothing was recorded.
    """
    uuids = sorted({u for u, _ok in outcomes})
    now = db_mod.utcnow()
    with db.write() as conn:
        ids = _roots(conn, uuids)
        # Rows locked in id order, so two bulk reports cannot deadlock.
        current = {
            row.resource_provider_id: row.failed_builds
            for row in conn.execute(
                sa.select(_failures.c.resource_provider_id, _failures.c.failed_builds)
                .where(_failures.c.resource_provider_id.in_(sorted(ids.values())))
                .order_by(_failures.c.resource_provider_id)
                .with_for_update()
            )
        }
        counts = {}
        for uuid, succeeded in outcomes:
            before = counts.get(uuid, current.get(ids[uuid], 0))
            counts[uuid] = 0 if succeeded else before + 1
        for uuid, count in sorted(counts.items()):
            rp_id = ids[uuid]
            if rp_id not in current:
                if count:
                    conn.execute(
                        _failures.insert().values(
                            resource_provider_id=rp_id, failed_builds=count, created_at=now
                        )
                    )
            elif current[rp_id] != count:
                conn.execute(
                    _failures.update()
                    .where(_failures.c.resource_provider_id == rp_id)
                    .values(failed_builds=count, updated_at=now)
                )
    return counts


def _roots(conn, uuids):
    """{uuid: id} of root providers; raise ProviderNotFound / NotRoot for the rest."""
    rows = {}
    for start in range(0, len(uuids), 900):
        chunk = uuids[start : start + 900]
        for row in conn.execute(
            sa.select(_rp.c.uuid, _rp.c.id, _rp.c.root_provider_id).where(_rp.c.uuid.in_(chunk))
        ):
            rows[row.uuid] = row
    missing = [u for u in uuids if u not in rows]
    if missing:
        raise ProviderNotFound(missing)
    not_root = [
        u
        for u, row in rows.items()
        if row.root_provider_id is not None and row.root_provider_id != row.id
    ]
    if not_root:
        raise NotRoot(not_root)
    return {u: row.id for u, row in rows.items()}


# --- writes -------------------------------------------------------------------


def put_node(db, uuid, cell, labels, reserved, unschedulable, generation):
    """Create or replace the node record; return (node, created)."""
    now = db_mod.utcnow()
    values = {
        "cell": cell,
        "labels": json.dumps(labels, sort_keys=True),
        "reserved": bool(reserved),
        "unschedulable": bool(unschedulable),
    }
    with db.write() as conn:
        rp_id = _root(conn, uuid)
        current = conn.execute(
            sa.select(_node.c.generation).where(_node.c.resource_provider_id == rp_id)
        ).scalar_one_or_none()
        if current is None:
            if generation is not None:
                raise Conflict(
                    f"Node {uuid} has no node record; a creating PUT sends "
                    "generation null or leaves it out."
                )
            try:
                with conn.begin_nested():
                    conn.execute(
                        _node.insert().values(
                            resource_provider_id=rp_id, generation=0, created_at=now, **values
                        )
                    )
            except sa.exc.IntegrityError:
                raise Conflict(
                    f"Another writer created the node record of {uuid} first; read it and retry."
                )
            created = True
        else:
            if generation != current:
                raise Conflict(_stale("node record", uuid, generation, current))
            done = conn.execute(
                _node.update()
                .where(_node.c.resource_provider_id == rp_id, _node.c.generation == generation)
                .values(generation=_node.c.generation + 1, updated_at=now, **values)
            ).rowcount
            if done != 1:
                raise Conflict(_stale("node record", uuid, generation, None))
            created = False
        row = conn.execute(_select().where(_rp.c.id == rp_id)).one()
        traits = _profile_traits(conn, rp_id)
        now = _now_of(conn)
    return _node_dict(row, traits.get(row.uuid, []), now), created


def put_hardware(db, uuid, hardware):
    """Create or replace the hardware record; return (hardware, created)."""
    now = db_mod.utcnow()
    values = {f: hardware.get(f) for f in HARDWARE_FIELDS}
    values["gpu_count"] = values["gpu_count"] or 0
    with db.write() as conn:
        rp_id = _root(conn, uuid)
        done = conn.execute(
            _hw.update().where(_hw.c.resource_provider_id == rp_id).values(updated_at=now, **values)
        ).rowcount
        created = done == 0
        if created:
            try:
                with conn.begin_nested():
                    conn.execute(
                        _hw.insert().values(resource_provider_id=rp_id, created_at=now, **values)
                    )
            except sa.exc.IntegrityError:
                # A concurrent first write won; hardware is last-writer-wins.
                conn.execute(
                    _hw.update()
                    .where(_hw.c.resource_provider_id == rp_id)
                    .values(updated_at=now, **values)
                )
                created = False
    return values, created


def delete_node(db, uuid):
    """Remove node record, hardware, twin and the profile trait of a root provider."""
    with db.write() as conn:
        rp_id = _root(conn, uuid)
        removed = 0
        for table in (_node, _hw, _twin):
            removed += conn.execute(
                table.delete().where(table.c.resource_provider_id == rp_id)
            ).rowcount
        if not removed:
            raise NotFound(uuid)
        trait_ids = _profile_trait_ids(conn, create=False)
        if trait_ids:
            rpt = m.resource_provider_traits
            gone = conn.execute(
                rpt.delete().where(
                    rpt.c.resource_provider_id == rp_id,
                    rpt.c.trait_id.in_(list(trait_ids.values())),
                )
            ).rowcount
            if gone:
                _bump_providers(conn, [rp_id])


def set_twins(db, entries):
    """Create or update twins, all or nothing; return [twin dict with "uuid"].

    :param entries: dicts with "uuid", "generation" (what the writer read;
        None for a twin it believes absent), "profile", "schedulable_class",
        "cpu_cap_watts", "gpu_cap_watts", "managed_by".
    :raise ProviderNotFound, NotRoot, Conflict: nothing is written.
    """
    now = db_mod.utcnow()
    entries = list(entries)
    if not entries:
        return []
    with db.write() as conn:
        ids = {}
        for where in _matching(conn, _rp.c.uuid, [e["uuid"] for e in entries]):
            for rp_id, uuid, root_id in conn.execute(
                sa.select(_rp.c.id, _rp.c.uuid, _rp.c.root_provider_id).where(where)
            ):
                if root_id is not None and root_id != rp_id:
                    raise NotRoot([uuid])
                ids[uuid] = rp_id
        missing = {e["uuid"] for e in entries} - set(ids)
        if missing:
            raise ProviderNotFound(missing)

        current = {}
        for where in _matching(conn, _twin.c.resource_provider_id, list(ids.values())):
            query = sa.select(
                _twin.c.resource_provider_id, _twin.c.generation, _twin.c.power_state
            ).where(where)
            if db.is_postgres:
                # Lock the twins we compare against, so the check and the
                # update are one step for concurrent writers.
                query = query.with_for_update()
            current.update((rp_id, (gen, ps)) for rp_id, gen, ps in conn.execute(query))

        updates, inserts, out = [], [], []
        for entry in entries:
            rp_id = ids[entry["uuid"]]
            seen = entry.get("generation")
            have, power_state = current.get(rp_id, (None, None))
            values = {f: entry.get(f) for f in TWIN_FIELDS}
            if "power_state" not in entry:
                # A writer that does not know power states (the controller
                # with suspend off, an operator's PUT of the profile) keeps
                # the one stored: an off node stays off, not on by omission.
                values["power_state"] = power_state
            if have is None:
                if seen is not None:
                    raise Conflict(
                        f"Node {entry['uuid']} has no twin; a creating write sends "
                        "generation null or leaves it out."
                    )
                inserts.append({"resource_provider_id": rp_id, "generation": 0, **values})
                new_gen = 0
            else:
                if seen != have:
                    raise Conflict(_stale("twin", entry["uuid"], seen, have))
                updates.append({"resource_provider_id": rp_id, "generation": have + 1, **values})
                new_gen = have + 1
            out.append({"uuid": entry["uuid"], **values, "generation": new_gen})

        # Providers whose profile trait changes are bumped first: the row
        # locks are then ours before the foreign-key checks of the inserts
        # below visit the same rows, which PostgreSQL then finds locked by us.
        traits = _plan_profile_traits(
            conn, {ids[e["uuid"]]: _traits_of(twin) for e, twin in zip(entries, out, strict=True)}
        )
        _bump_providers(conn, traits[1])
        if updates:
            _update_twins(conn, updates, now)
        if inserts:
            try:
                with conn.begin_nested():
                    _insert_rows(conn, _twin, inserts, {"created_at": now})
            except sa.exc.IntegrityError:
                raise Conflict(
                    "Another writer created one of these twins first; read the "
                    "nodes again and retry."
                )
        _write_profile_traits(conn, *traits)
        # After the bumps above (the row locks of the roots whose trait
        # changes): a performance claim on such a root either committed
        # before them, and is counted here, or waits for this transaction and
        # then finds the eco trait (objects/allocation.py).
        _check_no_performance_work(
            conn,
            {
                ids[e["uuid"]]: e["uuid"]
                for e in entries
                if e.get("schedulable_class") == vocabulary.ECO
            },
        )
        # A node asked to power off must hold nothing: a claim that landed
        # since the controller saw it idle makes this write a 409 instead.
        _check_idle(
            conn,
            {
                ids[t["uuid"]]: t["uuid"]
                for t, e in zip(out, entries, strict=True)
                if t["power_state"] in (vocabulary.POWER_SUSPENDING, vocabulary.POWER_OFF)
                and current.get(ids[e["uuid"]], (None, None))[1] != t["power_state"]
            },
        )
    return [_shown_twin(dict(twin)) for twin in out]


def _traits_of(twin):
    """The managed traits a node with ``twin`` carries: its profile's, and
    its power state's when it has one."""
    names = {vocabulary.PROFILE_TRAITS[twin["profile"]]}
    if twin.get("power_state") is not None:
        names.add(vocabulary.POWER_STATE_TRAITS[twin["power_state"]])
    return frozenset(names)


def _check_idle(conn, sleeping):
    """Refuse to power off a node whose tree holds allocations.

    :param sleeping: {root provider id: uuid} of the twins written
        suspending or off from another state.
    :raise Conflict: nothing is written.
    """
    if not sleeping:
        return
    busy = _busy_roots(conn, sleeping)
    if busy:
        names = ", ".join(sorted(sleeping[i] for i in busy))
        raise Conflict(
            f"Node(s) {names} hold allocations: their power_state may not be "
            f"'{vocabulary.POWER_SUSPENDING}' or '{vocabulary.POWER_OFF}' while work runs "
            "there; read the usages again and retry."
        )


def _busy_roots(conn, roots, workload_class=None):
    """The ids of ``roots`` whose trees hold allocations (of consumers of
    ``workload_class``, or of any)."""
    a, rp, c = m.allocations, m.resource_providers, m.consumers
    # SELECT DISTINCT rp.root_provider_id FROM allocations a
    # JOIN resource_providers rp ON rp.id = a.resource_provider_id
    # [JOIN consumers c ON c.uuid = a.consumer_id AND c.workload_class = :class]
    # WHERE rp.root_provider_id IN (...)
    joined = a.join(rp, rp.c.id == a.c.resource_provider_id)
    wanted = []
    if workload_class is not None:
        joined = joined.join(c, c.c.uuid == a.c.consumer_id)
        wanted.append(c.c.workload_class == workload_class)
    busy = set()
    for where in _matching(conn, rp.c.root_provider_id, list(roots)):
        busy.update(
            conn.execute(
                sa.select(rp.c.root_provider_id)
                .distinct()
                .select_from(joined)
                .where(where, *wanted)
            ).scalars()
        )
    return busy


def _check_no_performance_work(conn, eco):
    """Refuse an eco twin for a node whose tree holds performance work.

    The power controller writes ``eco`` (eco caps) only for a node where it
    counted no performance consumer, and ``draining`` otherwise; a claim
    that landed between its count and this write would otherwise run under
    eco caps until the next tick. This makes that write a 409 instead, and
    the next tick counts the claim and writes ``draining``.

    :param eco: {root provider id: uuid} of the twins written as eco.
    :raise Conflict: nothing is written.
    """
    if not eco:
        return
    busy = _busy_roots(conn, eco, workload_class=vocabulary.PERFORMANCE)
    if busy:
        names = ", ".join(sorted(eco[i] for i in busy))
        raise Conflict(
            f"Node(s) {names} run performance work: their twin may not be "
            f"schedulable_class '{vocabulary.ECO}' (write '{vocabulary.DRAINING}' until the "
            "performance consumers are gone); read the workload usages again and retry."
        )


_MANAGED_TRAITS = {
    **{name: name for name in vocabulary.PROFILE_TRAITS.values()},
    **{name: name for name in vocabulary.POWER_STATE_TRAITS.values()},
}


def _profile_trait_ids(conn, create=True):
    """{trait name: trait id} of the traits twins manage (profile and power
    state), created when missing."""
    tr = m.traits
    names = list(_MANAGED_TRAITS)
    found = dict(conn.execute(sa.select(tr.c.name, tr.c.id).where(tr.c.name.in_(names))).all())
    if create and len(found) < len(names):
        now = db_mod.utcnow()
        for name in names:
            if name in found:
                continue
            try:
                with conn.begin_nested():
                    conn.execute(tr.insert().values(name=name, created_at=now))
            except sa.exc.IntegrityError:
                pass  # created by a concurrent writer: fine, read it below
        found = dict(conn.execute(sa.select(tr.c.name, tr.c.id).where(tr.c.name.in_(names))).all())
    return {name: found[name] for name in names if name in found}


def _plan_profile_traits(conn, profiles):
    """(rows to insert, providers whose trait set changes, of those the ones
    holding a managed trait now, managed trait ids) so that each provider
    carries exactly the managed traits ``profiles`` names for it
    ({provider id: frozenset of trait names}: its profile's, its power
    state's)."""
    trait_ids = _profile_trait_ids(conn)
    profile_trait_ids = list(trait_ids.values())
    rpt = m.resource_provider_traits
    have = {}
    for where in _matching(conn, rpt.c.resource_provider_id, list(profiles)):
        for rp_id, trait_id in conn.execute(
            sa.select(rpt.c.resource_provider_id, rpt.c.trait_id).where(
                where, rpt.c.trait_id.in_(profile_trait_ids)
            )
        ):
            have.setdefault(rp_id, set()).add(trait_id)
    wanted = {rp_id: {trait_ids[name] for name in names} for rp_id, names in profiles.items()}
    changed = [rp_id for rp_id, ids in wanted.items() if have.get(rp_id, set()) != ids]
    rows = [
        {"resource_provider_id": rp_id, "trait_id": trait_id}
        for rp_id in changed
        for trait_id in sorted(wanted[rp_id])
    ]
    return rows, changed, [rp_id for rp_id in changed if rp_id in have], profile_trait_ids


def _write_profile_traits(conn, rows, changed, stale, profile_trait_ids):
    """Apply a plan of ``_plan_profile_traits`` (the generations are bumped apart)."""
    rpt = m.resource_provider_traits
    for where in _matching(conn, rpt.c.resource_provider_id, stale):
        conn.execute(rpt.delete().where(where, rpt.c.trait_id.in_(profile_trait_ids)))
    _insert_rows(conn, rpt, rows)


def _bump_providers(conn, rp_ids):
    now = db_mod.utcnow()
    for where in _matching(conn, _rp.c.id, list(rp_ids)):
        conn.execute(
            _rp.update().where(where).values(generation=_rp.c.generation + 1, updated_at=now)
        )


# --- bulk statements ----------------------------------------------------------
#
# The first reconcile tick writes 5,000 twins, 5,000 trait rows and 5,000
# provider generations in one transaction. On PostgreSQL each set of ids, and
# each batch of rows to insert or update, is ONE JSON text parameter
# (``IN (SELECT jsonb_array_elements_text(..))``, ``jsonb_to_recordset``):
# one statement per step, json.dumps in C instead of thousands of bound
# parameters the driver adapts one by one. SQLite (in-process, no round trips)
# keeps IN chunks and executemany, which its driver runs in C.

_PG_TYPES = (
    (sa.Integer, "integer"),
    (sa.Float, "double precision"),
    (sa.String, "text"),
    (sa.Boolean, "boolean"),
)


def _pg(conn):
    return conn.dialect.name == "postgresql"


def _pg_type(column):
    for kind, name in _PG_TYPES:
        if isinstance(column.type, kind):
            return name
    raise TypeError(f"no JSON record type for column {column}")


def _json_param(values):
    return sa.cast(sa.bindparam(None, json.dumps(values), type_=sa.Text), postgresql.JSONB)


def _matching(conn, column, values):
    """WHERE clauses that together select ``column`` in ``values`` (none when empty)."""
    if not values:
        return []
    if _pg(conn):
        return [
            column.in_(
                sa.select(
                    sa.cast(
                        sa.func.jsonb_array_elements_text(_json_param(list(values))), column.type
                    )
                )
            )
        ]
    return [column.in_(chunk) for chunk in _chunks(values)]


def _records(table, names, rows):
    """(FROM clause text, bound parameters) of ``rows`` as a PostgreSQL record set."""
    spec = ", ".join(f'"{n}" {_pg_type(table.c[n])}' for n in names)
    return (
        f"jsonb_to_recordset(CAST(:rows AS jsonb)) AS u({spec})",
        {"rows": json.dumps([{n: row[n] for n in names} for row in rows])},
    )


def _insert_rows(conn, table, rows, constants=None):
    """INSERT many rows (dicts with the same keys; ``constants`` the same for
    every row, such as a timestamp) in one statement on PostgreSQL."""
    if not rows:
        return
    constants = constants or {}
    if not _pg(conn):
        conn.execute(table.insert(), [{**row, **constants} for row in rows])
        return
    names = list(rows[0])
    source, params = _records(table, names, rows)
    columns = ", ".join(f'"{n}"' for n in [*names, *constants])
    values = ", ".join([*(f'u."{n}"' for n in names), *(f":c_{n}" for n in constants)])
    conn.execute(
        sa.text(f'INSERT INTO "{table.name}" ({columns}) SELECT {values} FROM {source}'),
        {**params, **{f"c_{n}": v for n, v in constants.items()}},
    )


def _update_twins(conn, rows, now):
    """Set generation and TWIN_FIELDS of many twins (rows keyed by resource_provider_id)."""
    names = ["resource_provider_id", "generation", *TWIN_FIELDS]
    if not _pg(conn):
        stmt = (
            _twin.update()
            .where(_twin.c.resource_provider_id == sa.bindparam("b_resource_provider_id"))
            .values(updated_at=now, **{f: sa.bindparam(f"b_{f}") for f in names[1:]})
        )
        conn.execute(stmt, [{f"b_{k}": v for k, v in row.items()} for row in rows])
        return
    source, params = _records(_twin, names, rows)
    sets = ", ".join(f'"{n}" = u."{n}"' for n in names[1:])
    conn.execute(
        sa.text(
            f'UPDATE "{_twin.name}" AS t SET {sets}, updated_at = :now FROM {source} '
            "WHERE t.resource_provider_id = u.resource_provider_id"
        ),
        {"now": now, **params},
    )


def _stale(what, uuid, seen, have):
    now = f" (current generation {have})" if have is not None else ""
    return (
        f"The {what} of node {uuid} changed since generation {seen} was read{now}; "
        "read it again and retry."
    )
