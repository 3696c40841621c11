"""SQL side of the allocation-candidate pipeline.

Two kinds of queries:

* the *driver*: root providers, in id order after a keyset marker, that pass
  every condition the database can decide on its own (capacity of classes no
  sharing provider supplies, traits, aggregates, in_tree, root_required).
  It is a necessary condition only; the combiner decides exactly.
* the *loaders*: everything about the trees of a window of roots (providers,
  inventories with usage, traits, aggregates) in four queries, so building
  candidates and summaries needs no per-provider round trip.
"""

import functools

import sqlalchemy as sa

from placement import models as m

RP = m.resource_providers
INV = m.inventories
ALLOC = m.allocations
RPT = m.resource_provider_traits
RPA = m.resource_provider_aggregates
TR = m.traits


class Inventory:
    __slots__ = ("capacity", "used", "min_unit", "max_unit", "step_size")

    def __init__(self, capacity, used, min_unit, max_unit, step_size):
        self.capacity = capacity
        self.used = used
        self.min_unit = min_unit
        self.max_unit = max_unit
        self.step_size = step_size

    def fits(self, amount):
        """One group's amount alone: capacity, min/max unit and step size."""
        return (
            self.used + amount <= self.capacity
            and self.min_unit <= amount <= self.max_unit
            and amount % self.step_size == 0
        )


class TreeData:
    """Providers of a set of trees, keyed by internal id."""

    def __init__(self):
        self.uuid = {}  # rp id -> uuid
        self.parent = {}  # rp id -> parent id or None
        self.root = {}  # rp id -> root id
        self.inv = {}  # rp id -> {rc id: Inventory}
        self.traits = {}  # rp id -> set of trait ids
        self.aggs = {}  # rp id -> set of aggregate ids
        self.by_root = {}  # root id -> [rp ids], in id order
        self.trait_names = {}  # trait id -> name, of the traits above
        self.loaded_roots = set()

    def merge(self, other):
        for name in ("uuid", "parent", "root", "inv", "traits", "aggs", "by_root", "trait_names"):
            getattr(self, name).update(getattr(other, name))
        self.loaded_roots |= other.loaded_roots


def _exists(table, *conds):
    """SQL truth of "a row of ``table`` meets ``conds``", tested per outer row.

    Written as ``(SELECT 1 ... LIMIT 1) IS NOT NULL`` rather than EXISTS:
    PostgreSQL may turn a correlated EXISTS into one hashed pass over every
    matching row of the cluster, chosen by estimates it cannot make for the
    capacity conditions. At 10,000 roots that pass made the driver's first
    page 29 ms where the page's own 101 roots take 2 (the page cost grew
    with the cluster). A scalar subquery is never hashed: it runs for the
    rows of the page only and stops at the first match.
    """
    return (
        sa.select(sa.literal(1))
        .select_from(table)
        .where(*conds)
        .correlate_except(table)
        .limit(1)
        .scalar_subquery()
        .is_not(None)
    )


def _capacity_clause(rp_id_col, rc_id, amount):
    """SQL truth of "provider rp_id_col has room for amount of rc_id"."""
    used = (
        sa.select(sa.func.coalesce(sa.func.sum(ALLOC.c.used), 0))
        .where(ALLOC.c.resource_provider_id == rp_id_col, ALLOC.c.resource_class_id == rc_id)
        .correlate_except(ALLOC)
        .scalar_subquery()
    )
    amt = sa.literal(amount, sa.BigInteger)
    return _exists(
        INV,
        INV.c.resource_provider_id == rp_id_col,
        INV.c.resource_class_id == rc_id,
        (INV.c.total - INV.c.reserved) * INV.c.allocation_ratio >= amt + used,
        INV.c.min_unit <= amt,
        INV.c.max_unit >= amt,
        (amt % INV.c.step_size) == 0,
    )


def _has_trait(rp_id_col, trait_ids):
    return _exists(
        RPT, RPT.c.resource_provider_id == rp_id_col, RPT.c.trait_id.in_(sorted(trait_ids))
    )


def _in_agg(rp_id_col, agg_ids):
    return _exists(
        RPA, RPA.c.resource_provider_id == rp_id_col, RPA.c.aggregate_id.in_(sorted(agg_ids))
    )


def _tree_exists(p, r, *conds):
    """A provider ``p`` in the tree of root ``r`` meets ``conds``."""
    return _exists(p, p.c.root_provider_id == r.c.id, *conds)


def _provider_filter(p, group, with_aggs=True):
    """Conditions on provider alias ``p`` for a whole granular group."""
    conds = []
    for rc_id, amount in group.rc_amounts.items():
        conds.append(_capacity_clause(p.c.id, rc_id, amount))
    for t in group.required_ids:
        conds.append(_has_trait(p.c.id, {t}))
    for anyset in group.any_of_ids:
        conds.append(_has_trait(p.c.id, anyset))
    if group.forbidden_ids:
        conds.append(~_has_trait(p.c.id, group.forbidden_ids))
    if with_aggs:
        for aggset in group.member_of_ids:
            conds.append(_in_agg(p.c.id, aggset))
        if group.forbidden_agg_ids:
            conds.append(~_in_agg(p.c.id, group.forbidden_agg_ids))
    return conds


MAX_CHUNK = 8192


def driver_roots(conn, req, after_id, limit, filtered=True, before_id=None):
    """(root ids, exhausted): the root ids > after_id (and < before_id, if
    given), in order, that may have candidates (necessary test), and whether
    no root is left past them.

    ``filtered=False``: every root, no condition (the caller examines each
    root exactly anyway and would load its tree regardless).

    Keyset-limited: the roots are scanned in id order in bounded chunks (an
    index range scan with LIMIT), each chunk's roots tested by the conditions
    below, until ``limit`` viable roots are found or the roots run out. The
    cost follows the page, never the cluster; a single filtered query would
    let the planner (which cannot estimate the capacity subqueries) sort
    every viable root of the cluster to keep the first ones.

    :param req: a resolved CandidateRequest.
    :param limit: at most this many ids, or None for all.
    """
    if filtered:
        win = _driver_window(before_id is not None)
        sel = sa.select(
            win.c.id, sa.case((sa.and_(*_driver_conds(win, req)), 1), else_=0)
        ).order_by(win.c.id)
    else:
        sel = _unfiltered_driver(before_id is not None)
    out = []
    cursor = -1 if after_id is None else after_id
    if limit is None:
        chunk = MAX_CHUNK
    elif filtered:
        chunk = max(64, limit)
    else:
        # One more than wanted: whether any root is left is then known
        # without a further (empty) query.
        chunk = limit + 1
    while True:
        params = {"after": cursor, "chunk": chunk}
        if before_id is not None:
            params["before"] = before_id
        rows = _rows(conn, sel, params)
        last = len(rows) - 1
        for i, (root, ok) in enumerate(rows):
            if ok:
                out.append(root)
                if limit is not None and len(out) >= limit:
                    return out, len(rows) < chunk and i == last
        if len(rows) < chunk:
            return out, True
        cursor = rows[-1][0]
        # Sparse matches: widen the scan, still bounded.
        chunk = min(chunk * 2, MAX_CHUNK)


def _driver_window(bounded):
    """Roots after :after (and before :before), in id order, at most :chunk."""
    bounds = [RP.c.id == RP.c.root_provider_id, RP.c.id > sa.bindparam("after", type_=sa.Integer)]
    if bounded:
        bounds.append(RP.c.id < sa.bindparam("before", type_=sa.Integer))
    return (
        sa.select(RP.c.id)
        .where(*bounds)
        .order_by(RP.c.id)
        .limit(sa.bindparam("chunk", type_=sa.Integer))
        .subquery("r")
    )


@functools.cache
def _unfiltered_driver(bounded):
    """The driver without conditions, built once per process (it depends on
    nothing of the request)."""
    win = _driver_window(bounded)
    return sa.select(win.c.id, sa.literal(1)).order_by(win.c.id)


def root_id_at(conn, fraction):
    """The point ``fraction`` (0 <= fraction < 1) of the root-id range: the
    smallest root id plus that share of the distance to the largest, or None
    when there is no root. Ids are handed out in sequence, so a uniform
    fraction starts a walk at a near-uniformly random root."""
    lo, hi = conn.execute(
        sa.select(sa.func.min(RP.c.id), sa.func.max(RP.c.id)).where(
            RP.c.id == RP.c.root_provider_id
        )
    ).one()
    if lo is None:
        return None
    return lo + int(fraction * (hi - lo + 1))


def _driver_conds(r, req):
    conds = [sa.true()]
    if req.root_required_ids:
        for t in req.root_required_ids:
            conds.append(_has_trait(r.c.id, {t}))
    if req.root_forbidden_ids:
        conds.append(~_has_trait(r.c.id, req.root_forbidden_ids))
    for group in req.groups:
        shared = any(rc in req.shared_rcs for rc in group.rc_amounts)
        if group.in_tree_root is not None and not (group.granular and req.sharing_ids):
            # The group's providers all come from that tree, and (without
            # sharing providers to carry them elsewhere) so does the anchor.
            conds.append(r.c.id == group.in_tree_root)
        if group.granular:
            if shared or (not group.rc_amounts and req.sharing_ids):
                continue
            p = RP.alias()
            conds.append(_tree_exists(p, r, *_provider_filter(p, group)))
            continue
        # The unnumbered group may spread over the tree (and sharing providers).
        for rc_id, amount in group.rc_amounts.items():
            if rc_id in req.shared_rcs:
                continue
            p = RP.alias()
            conds.append(_tree_exists(p, r, _capacity_clause(p.c.id, rc_id, amount)))
        if req.sharing_ids:
            continue
        # Without sharing providers every trait and aggregate of a candidate
        # comes from the anchor's own tree: necessary conditions on the tree.
        for t in group.required_ids:
            p = RP.alias()
            conds.append(_tree_exists(p, r, _has_trait(p.c.id, {t})))
        for anyset in group.any_of_ids:
            p = RP.alias()
            conds.append(_tree_exists(p, r, _has_trait(p.c.id, anyset)))
        if group.member_of_ids:
            p = RP.alias()
            root_ok = sa.and_(*[_in_agg(r.c.id, s) for s in group.member_of_ids])
            some_ok = _tree_exists(p, r, *[_in_agg(p.c.id, s) for s in group.member_of_ids])
            conds.append(sa.or_(root_ok, some_ok))
        if group.forbidden_agg_ids:
            conds.append(~_in_agg(r.c.id, group.forbidden_agg_ids))
    return conds


def _root_filter(col, root_ids, exact=False):
    """Trees of ``root_ids`` by id range: the driver hands out ascending ids, and
    two bounds cost the database (and the driver's parameter conversion) far
    less than a thousand-element IN list. Extra trees in the range are
    harmless: only the driver's roots are ever anchored."""
    if root_ids is None:
        return sa.true()
    if exact:
        return col.in_(sa.bindparam("root_ids", expanding=True))
    return col.between(sa.bindparam("lo"), sa.bindparam("hi"))


def _root_params(root_ids, exact=False):
    if root_ids is None:
        return {}
    ids = list(root_ids)
    if exact:
        return {"root_ids": ids}
    return {"lo": min(ids), "hi": max(ids)}


def _rows(conn, sel, params):
    """Plain DBAPI tuples: a window holds thousands of rows, and SQLAlchemy's
    Row objects cost more than the rest of the loading (the selected columns
    need no result processing)."""
    result = conn.execute(sel, params)
    try:
        return result.cursor.fetchall()
    finally:
        result.close()


@functools.cache
def _loader_statements(mode):
    """The four loader selects for ``mode`` ("range", "exact" or "all"),
    built once per process: building and cache-keying them anew per request
    cost more than executing the smallest of them."""
    root_ids = None if mode == "all" else ()
    exact = mode == "exact"

    def trees(col):
        return _root_filter(col, root_ids, exact)

    providers = (
        sa.select(RP.c.id, RP.c.uuid, RP.c.parent_provider_id, RP.c.root_provider_id)
        .where(trees(RP.c.root_provider_id))
        .order_by(RP.c.id)
    )
    usage = (
        sa.select(
            ALLOC.c.resource_provider_id.label("rp"),
            ALLOC.c.resource_class_id.label("rc"),
            sa.func.sum(ALLOC.c.used).label("used"),
        )
        .select_from(ALLOC.join(RP, RP.c.id == ALLOC.c.resource_provider_id))
        .where(trees(RP.c.root_provider_id))
        .group_by(ALLOC.c.resource_provider_id, ALLOC.c.resource_class_id)
        .subquery()
    )
    inventories = (
        sa.select(
            INV.c.resource_provider_id,
            INV.c.resource_class_id,
            INV.c.total,
            INV.c.reserved,
            INV.c.min_unit,
            INV.c.max_unit,
            INV.c.step_size,
            INV.c.allocation_ratio,
            sa.func.coalesce(usage.c.used, 0),
        )
        .select_from(
            INV.join(RP, RP.c.id == INV.c.resource_provider_id).outerjoin(
                usage,
                sa.and_(
                    usage.c.rp == INV.c.resource_provider_id, usage.c.rc == INV.c.resource_class_id
                ),
            )
        )
        .where(trees(RP.c.root_provider_id))
    )
    # With the trait names: the summaries need them, and a name per row is
    # cheaper than a second round trip for the names afterwards.
    traits = (
        sa.select(RPT.c.resource_provider_id, RPT.c.trait_id, TR.c.name)
        .select_from(
            RPT.join(RP, RP.c.id == RPT.c.resource_provider_id).join(TR, TR.c.id == RPT.c.trait_id)
        )
        .where(trees(RP.c.root_provider_id))
    )
    aggregates = (
        sa.select(RPA.c.resource_provider_id, RPA.c.aggregate_id)
        .select_from(RPA.join(RP, RP.c.id == RPA.c.resource_provider_id))
        .where(trees(RP.c.root_provider_id))
    )
    return providers, inventories, traits, aggregates


def load_trees(conn, root_ids, exact=False):
    """Everything about the trees rooted at ``root_ids`` (None: every tree).

    ``exact``: only those trees (for scattered ids such as sharing
    providers'); otherwise every tree in their id range (driver windows)."""
    data = TreeData()
    if root_ids is not None and not root_ids:
        return data
    mode = "all" if root_ids is None else ("exact" if exact else "range")
    providers, inventories, traits, aggregates = _loader_statements(mode)
    params = _root_params(root_ids, exact) if root_ids else {}

    uuids, parents, roots, by_root = data.uuid, data.parent, data.root, data.by_root
    invs, trait_sets, agg_sets = data.inv, data.traits, data.aggs
    for rp_id, uuid, parent, root in _rows(conn, providers, params):
        uuids[rp_id] = uuid
        parents[rp_id] = parent
        roots[rp_id] = root
        members = by_root.get(root)
        if members is None:
            by_root[root] = [rp_id]
        else:
            members.append(rp_id)
        invs[rp_id] = {}
        trait_sets[rp_id] = set()
        agg_sets[rp_id] = set()
    data.loaded_roots = set(by_root)
    if not uuids:
        return data

    for rp_id, rc_id, total, reserved, min_u, max_u, step, ratio, used in _rows(
        conn, inventories, params
    ):
        # Capacity as upstream reports it: int((total - reserved) * ratio).
        invs[rp_id][rc_id] = Inventory(
            int((total - reserved) * ratio), int(used), min_u, max_u, step or 1
        )
    names = data.trait_names
    for rp_id, trait_id, name in _rows(conn, traits, params):
        trait_sets[rp_id].add(trait_id)
        names[trait_id] = name
    for rp_id, agg_id in _rows(conn, aggregates, params):
        agg_sets[rp_id].add(agg_id)
    return data


def sharing_anchors(conn, sharing_ids, root_ids):
    """{sharing id: set of anchor root ids}: roots of trees having a provider in
    an aggregate of the sharing provider (``root_ids`` limits the roots, None:
    all)."""
    if not sharing_ids:
        return {}
    mine = RPA.alias("mine")
    theirs = RPA.alias("theirs")
    other = RP.alias("other")
    sel = (
        sa.select(mine.c.resource_provider_id, other.c.root_provider_id)
        .distinct()
        .select_from(
            mine.join(theirs, theirs.c.aggregate_id == mine.c.aggregate_id).join(
                other, other.c.id == theirs.c.resource_provider_id
            )
        )
        .where(mine.c.resource_provider_id.in_(sa.bindparam("sids", expanding=True)))
    )
    params = {"sids": list(sharing_ids)}
    if root_ids is not None:
        sel = sel.where(_root_filter(other.c.root_provider_id, root_ids))
        params.update(_root_params(root_ids))
    out = {}
    for sid, root in conn.execute(sel, params):
        out.setdefault(sid, set()).add(root)
    return out


def shared_rc_ids(conn, sharing_ids):
    """Resource classes for which some sharing provider has inventory."""
    if not sharing_ids:
        return set()
    return {
        row[0]
        for row in conn.execute(
            sa.select(INV.c.resource_class_id)
            .distinct()
            .where(INV.c.resource_provider_id.in_(sa.bindparam("sids", expanding=True))),
            {"sids": list(sharing_ids)},
        )
    }
