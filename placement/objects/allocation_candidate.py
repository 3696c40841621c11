"""Allocation candidates: the query engine.

Pipeline (one database connection; on PostgreSQL each statement at READ
COMMITTED, as in any transaction there, on SQLite one read transaction):

1. resolve the parsed request (names -> ids; ``candidate_request``);
2. find anchor roots, in root-id order after the page marker (a walk with a
   start point covers the roots from its start up, then wraps to the lowest
   and stops below the start: ``Position``), scanning the
   roots in bounded id-ordered chunks (``candidate_sql.driver_roots``); a
   paged request (or one pinned by in_tree) keeps only roots that pass every
   condition SQL can decide, so a page costs what the page needs; an unpaged
   request takes every root, since it examines each one exactly anyway;
3. load the trees of a window of those roots in four queries, plus the
   sharing providers anchored to them;
4. per root: a tree of one provider under a lone unnumbered group without
   sharing providers (the common case) is decided directly; otherwise
   the options of every request group (a provider for a numbered
   group, a provider per resource class for the unnumbered one), their
   product, then group_policy, same_subtree, the summed capacity and the
   microversion's nesting rule;
5. stop when the page (or ``limit`` / ``max_allocation_candidates``) is full;
6. serialize allocation requests and provider summaries.

A candidate built only from sharing providers can be reached from several
anchors; it is emitted under the smallest valid one, so that a walk over
pages lists it once (upstream deduplicates with an in-memory set instead,
which cannot work across pages).
"""

import itertools
import json
import random

import sqlalchemy as sa

from placement import models as m
from placement.objects import candidate_request
from placement.objects import candidate_sql
from placement.objects import node as node_obj

WINDOW = 1000  # roots loaded at a time when not paging


class Candidate:
    __slots__ = ("root", "amounts", "mappings", "single")

    def __init__(self, root, amounts, mappings, single=False):
        self.root = root  # anchor root id
        self.amounts = amounts  # {(rp id, rc id): amount}, insertion-ordered
        self.mappings = mappings  # {suffix: frozenset(rp ids)}
        self.single = single  # the root alone serves the lone unnumbered group


class Page:
    """What the handler serializes. Allocation requests and provider summaries
    are JSON texts (json.dumps' formatting), joined once by the handler: the
    common shapes are written from templates instead of building thousands of
    small dicts to encode them afterwards."""

    def __init__(self):
        self.allocation_requests = []  # JSON texts, in order
        self.candidate_roots = []  # per request: set of root ids of its providers
        self.candidate_rps = []  # per request: set of rp uuids
        self.summaries = {}  # root id -> {rp uuid: summary}
        self.anchor_roots = []  # roots that produced candidates, in order
        self.next_marker = None  # Position to resume at, or None
        self.provider_summaries = {}  # rp uuid -> JSON text
        self.nodes = {}  # root uuid -> node data (find(with_nodes=True))


class Position:
    """Where a paged walk stands: ``after``, the last root id served (None:
    none yet); ``start``, the root id the walk began at (None: the lowest
    root, no wrap-around); ``wrapped``, whether it has passed the highest root
    and now covers the roots below ``start``."""

    __slots__ = ("after", "start", "wrapped")

    def __init__(self, after=None, start=None, wrapped=False):
        self.after = after
        self.start = start
        self.wrapped = wrapped

    def segments(self):
        """(after id, before id or None, wrapped) ranges of root ids still to
        walk, in order."""
        if self.start is None:
            return [(-1 if self.after is None else self.after, None, False)]
        if self.wrapped:
            return [(-1 if self.after is None else self.after, self.start, True)]
        first = self.start - 1 if self.after is None else self.after
        return [(first, None, False), (-1, self.start, True)]

    def __eq__(self, other):
        return isinstance(other, Position) and (self.after, self.start, self.wrapped) == (
            other.after,
            other.start,
            other.wrapped,
        )

    def __repr__(self):
        return f"Position(after={self.after}, start={self.start}, wrapped={self.wrapped})"


class _Engine:
    def __init__(self, conn, req, version, randomize, max_candidates):
        self.conn = conn
        self.req = req
        self.version = tuple(version)
        self.randomize = randomize
        self.max_candidates = max_candidates
        self.granular = [g for g in req.groups if g.granular]
        self.unnumbered = next((g for g in req.groups if not g.granular), None)
        self._gfit = {}
        self._all_resources = self.version >= (1, 27)
        self._with_traits = self.version >= (1, 17)
        self._nested = self.version >= (1, 29)
        self._requested = req.requested_rc_names
        self._trait_texts = {}  # sorted trait ids -> JSON list text
        self._full_anchors = {}
        self._root_attrs = {}
        self._single_amounts = (
            tuple(self.unnumbered.rc_amounts.items()) if self.unnumbered is not None else ()
        )
        self._summary_heads = {}  # rc id -> '"NAME": {"capacity": ' or None (not shown)

    # -- per provider checks --------------------------------------------
    @staticmethod
    def _aggs_match(aggs, member_of_ids):
        return all(aggs & s for s in member_of_ids)

    def _granular_fits(self, gi, group, rp, data):
        key = (gi, rp)
        found = self._gfit.get(key)
        if found is not None:
            return found
        ok = True
        if group.in_tree_root is not None and data.root[rp] != group.in_tree_root:
            ok = False
        inv = data.inv[rp]
        if ok:
            for rc, amount in group.rc_amounts.items():
                item = inv.get(rc)
                if item is None or not item.fits(amount):
                    ok = False
                    break
        if ok:
            traits = data.traits[rp]
            ok = (
                group.required_ids <= traits
                and all(traits & s for s in group.any_of_ids)
                and not (traits & group.forbidden_ids)
            )
        if ok:
            aggs = data.aggs[rp]
            ok = self._aggs_match(aggs, group.member_of_ids) and not (
                aggs & group.forbidden_agg_ids
            )
        self._gfit[key] = ok
        return ok

    def _unnumbered_agg_ok(self, group, rp, root, rp_root, aggs_of):
        """Upstream's rule for the unnumbered group: the provider or (for a
        provider of the anchor's own tree) the anchor is in the aggregates;
        neither is in a forbidden one."""
        rp_aggs = aggs_of(rp)
        root_aggs = aggs_of(root)
        if group.member_of_ids:
            if not self._aggs_match(rp_aggs, group.member_of_ids):
                if rp_root != root or not self._aggs_match(root_aggs, group.member_of_ids):
                    return False
        if group.forbidden_agg_ids and (
            rp_aggs & group.forbidden_agg_ids or root_aggs & group.forbidden_agg_ids
        ):
            return False
        return True

    # -- options of each group under one anchor -------------------------
    def _options(self, root, avail, data):
        """For each group, its list of (suffix, [(rp, rc, amount)], rp set)."""
        out = []
        for gi, group in enumerate(self.req.groups):
            opts = []
            if group.granular:
                for rp in avail:
                    if self._granular_fits(gi, group, rp, data):
                        res = tuple((rp, rc, amt) for rc, amt in group.rc_amounts.items())
                        opts.append((group.suffix, res, frozenset((rp,))))
            else:
                opts = self._unnumbered_options(group, root, avail, data)
            if not opts:
                return None
            out.append(opts)
        return out

    def _unnumbered_options(self, group, root, avail, data):
        if group.in_tree_root is not None:
            if root != group.in_tree_root:
                return []
            avail = [rp for rp in avail if data.root[rp] == root]
        per_rc = []
        for rc, amount in group.rc_amounts.items():
            choices = []
            for rp in avail:
                item = data.inv[rp].get(rc)
                if item is None or not item.fits(amount):
                    continue
                if data.traits[rp] & group.forbidden_ids:
                    continue
                if not self._unnumbered_agg_ok(
                    group, rp, root, data.root[rp], data.aggs.__getitem__
                ):
                    continue
                choices.append(rp)
            if not choices:
                return []
            per_rc.append([(rp, rc, amount) for rp in choices])
        opts = []
        for combo in itertools.product(*per_rc):
            rps = frozenset(item[0] for item in combo)
            if group.required_ids or group.any_of_ids:
                traits = set()
                for rp in rps:
                    traits |= data.traits[rp]
                if not group.required_ids <= traits:
                    continue
                if not all(traits & s for s in group.any_of_ids):
                    continue
            opts.append(("", combo, rps))
        return opts

    def _single_provider(self, root, data):
        """The candidate of a tree of one provider for the lone unnumbered
        group (no sharing providers): exactly what ``_options`` and
        ``_combine`` decide for it, without the general machinery. Its
        amounts and mappings are implied (``single``): the serializer writes
        them from the group alone."""
        group = self.unnumbered
        if group.in_tree_root is not None and root != group.in_tree_root:
            return None
        inv = data.inv[root]
        for rc, amount in self._single_amounts:
            item = inv.get(rc)
            if (
                item is None
                or item.used + amount > item.capacity
                or amount < item.min_unit
                or amount > item.max_unit
                or amount % item.step_size
            ):
                return None
        traits = data.traits[root]
        if traits & group.forbidden_ids or not group.required_ids <= traits:
            return None
        for anyset in group.any_of_ids:
            if not traits & anyset:
                return None
        aggs = data.aggs[root]
        for aggset in group.member_of_ids:
            if not aggs & aggset:
                return None
        if aggs & group.forbidden_agg_ids:
            return None
        return Candidate(root, None, None, single=True)

    # -- whole-request checks -------------------------------------------
    def _same_subtree_ok(self, parts, data):
        for suffixes in self.req.same_subtrees:
            rps = set()
            for suffix, _res, prov in parts:
                if suffix in suffixes:
                    rps |= prov
            if len(rps) <= 1:
                continue
            common = None
            for rp in rps:
                chain = set()
                cur = rp
                while cur is not None:
                    chain.add(cur)
                    cur = data.parent.get(cur)
                common = chain if common is None else common & chain
            if not (common & rps):
                return False
        return True

    def _combine(self, root, options, data):
        isolate = self.req.group_policy == "isolate"
        n_granular = len(self.granular)
        for parts in itertools.product(*options):
            if isolate and n_granular:
                used = set()
                for suffix, _res, prov in parts:
                    if suffix:
                        used |= prov
                if len(used) != n_granular:
                    continue
            if self.req.same_subtrees and not self._same_subtree_ok(parts, data):
                continue
            amounts = {}
            for _suffix, res, _prov in parts:
                for rp, rc, amt in res:
                    amounts[(rp, rc)] = amounts.get((rp, rc), 0) + amt
            over = False
            for (rp, rc), amt in amounts.items():
                item = data.inv[rp][rc]
                if item.used + amt > item.capacity or amt > item.max_unit:
                    over = True
                    break
            if over:
                continue
            if not self.req.nested_aware:
                rps = {rp for rp, _rc in amounts}
                if len({data.root[rp] for rp in rps}) != len(rps):
                    continue
            mappings = {}
            for suffix, _res, prov in parts:
                mappings[suffix] = mappings.get(suffix, frozenset()) | prov
            yield Candidate(root, amounts, mappings)

    # -- anchors of candidates made only of sharing providers -----------
    def _anchors_of(self, rp, data):
        found = self._full_anchors.get(rp)
        if found is None:
            found = candidate_sql.sharing_anchors(self.conn, [rp], None).get(rp, set())
            found = found | {data.root[rp]}
            self._full_anchors[rp] = found
        return found

    def _attrs_of_root(self, root):
        """(traits, aggregates) of a provider outside the loaded window."""
        found = self._root_attrs.get(root)
        if found is None:
            traits = set(
                self.conn.execute(
                    sa.select(m.resource_provider_traits.c.trait_id).where(
                        m.resource_provider_traits.c.resource_provider_id == root
                    )
                ).scalars()
            )
            aggs = set(
                self.conn.execute(
                    sa.select(m.resource_provider_aggregates.c.aggregate_id).where(
                        m.resource_provider_aggregates.c.resource_provider_id == root
                    )
                ).scalars()
            )
            found = self._root_attrs[root] = (traits, aggs)
        return found

    def _valid_under(self, cand, anchor, data):
        traits, aggs = self._attrs_of_root(anchor)
        if not self.req.root_required_ids <= traits or traits & self.req.root_forbidden_ids:
            return False
        group = self.unnumbered
        if group is None or "" not in cand.mappings:
            return True
        if group.in_tree_root is not None and anchor != group.in_tree_root:
            return False

        def aggs_of(rp):
            return aggs if rp == anchor else data.aggs[rp]

        for rp in cand.mappings[""]:
            if group.in_tree_root is not None and data.root[rp] != anchor:
                return False
            if not self._unnumbered_agg_ok(group, rp, anchor, data.root[rp], aggs_of):
                return False
        return True

    def _owned(self, cand, data):
        """False when a smaller anchor also produces this candidate."""
        rps = set()
        for prov in cand.mappings.values():
            rps |= prov
        if any(rp not in self.req.sharing_ids for rp in rps):
            return True  # a non-sharing provider only serves its own root
        common = None
        for rp in rps:
            anchors = self._anchors_of(rp, data)
            common = set(anchors) if common is None else common & anchors
        for other in sorted(a for a in common if a < cand.root):
            if self._valid_under(cand, other, data):
                return False
        return True

    # -- the walk --------------------------------------------------------
    def run(self, page_size=None, position=None):
        """Steps 2-6 of the module docstring: the page of roots after ``position``.

        Roots come from the driver a window at a time; each window's trees
        are loaded at once, its roots examined in order (``_candidates_of``)
        and its candidates serialized, until the page, ``limit`` or
        ``max_allocation_candidates`` is full or the roots run out. A walk
        with a start root covers the roots from the start up, then wraps
        around to the roots below it, so it still lists each root once.
        """
        req = self.req
        page = Page()
        if req.impossible:
            return page
        position = position or Position()
        sdata = self._load_sharing()
        stop_at = self._stop_at()
        window = page_size + 1 if page_size else WINDOW
        # The common case: one unnumbered group and no sharing provider, so a
        # tree of one provider has at most one candidate (that provider).
        fast = (
            self.unnumbered is not None
            and not self.granular
            and not req.sharing_ids
            and not req.same_subtrees
            and bool(self.unnumbered.rc_amounts)
        )
        # Without paging every root is examined exactly below and the trees of
        # each window's id range are loaded whatever the driver says, so SQL
        # pre-filtering would only repeat that work (it costs the database
        # ~30 us per root). It pays when it bounds a page, or pins in_tree.
        filtered = bool(page_size) or any(g.in_tree_root is not None for g in req.groups)
        served = 0  # candidates found so far
        full = False
        for cursor, before, wrapped in position.segments():
            while not full:
                roots, exhausted = candidate_sql.driver_roots(
                    self.conn, req, cursor, window, filtered, before_id=before
                )
                if not roots:
                    break
                data = candidate_sql.load_trees(self.conn, roots)
                data.merge(sdata)
                req.trait_names.update(data.trait_names)
                by_anchor = self._sharing_by_anchor(roots)
                window_cands = []
                for root in roots:
                    if page_size and len(page.anchor_roots) >= page_size:
                        page.next_marker = Position(cursor, position.start, wrapped)
                        full = True
                        break
                    if stop_at is not None and served >= stop_at:
                        # limit / max_allocation_candidates cap a page, not the
                        # walk: the next page resumes after the last root served.
                        if page_size and page.anchor_roots:
                            page.next_marker = Position(cursor, position.start, wrapped)
                        full = True
                        break
                    cursor = root
                    budget = None if stop_at is None else stop_at - served
                    found = self._candidates_of(root, data, by_anchor, fast, budget)
                    if found:
                        page.anchor_roots.append(root)
                        window_cands.extend(found)
                        served += len(found)
                self._serialize(page, window_cands, data)
                if exhausted:
                    break
            if full:
                break
        self._finish(page)
        return page

    def _load_sharing(self):
        """The sharing providers' trees (loaded once for every window); sets
        the request's ``sharing_ids`` and ``shared_rcs``."""
        req = self.req
        sharing = req.sharing_providers  # listed by candidate_request.resolve
        req.sharing_ids = {sid for sid, _root in sharing}
        req.shared_rcs = candidate_sql.shared_rc_ids(self.conn, req.sharing_ids)
        if not sharing:
            return candidate_sql.TreeData()
        return candidate_sql.load_trees(self.conn, {root for _sid, root in sharing}, exact=True)

    def _stop_at(self):
        """How many candidates to generate at most (None: no bound).

        ``limit`` bounds generation unless the result is randomized (then it
        is applied after shuffling, in ``_finish``).
        """
        stop_at = self.req.limit if self.req.limit and not self.randomize else None
        if self.max_candidates is not None and self.max_candidates >= 0:
            stop_at = self.max_candidates if stop_at is None else min(stop_at, self.max_candidates)
        return stop_at

    def _sharing_by_anchor(self, roots):
        """{root: [sharing provider id]} of the sharing providers anchored to ``roots``."""
        by_anchor = {}
        anchored = candidate_sql.sharing_anchors(self.conn, self.req.sharing_ids, roots)
        for sid, anchor_roots in anchored.items():
            for root in anchor_roots:
                by_anchor.setdefault(root, []).append(sid)
        return by_anchor

    def _candidates_of(self, root, data, by_anchor, fast, budget):
        """Step 4: the candidates anchored at ``root``, at most ``budget`` (None: all)."""
        req = self.req
        if req.root_required_ids or req.root_forbidden_ids:
            traits = data.traits.get(root, set())
            if not req.root_required_ids <= traits or traits & req.root_forbidden_ids:
                return []
        own = data.by_root.get(root, [])
        if fast and len(own) == 1:
            cand = self._single_provider(root, data)
            return [cand] if cand is not None else []
        extra = sorted(s for s in by_anchor.get(root, ()) if data.root[s] != root)
        options = self._options(root, own + extra, data)
        if options is None:
            return []
        found = []
        for cand in self._combine(root, options, data):
            if not self._owned(cand, data):
                continue
            found.append(cand)
            if budget is not None and len(found) >= budget:
                break
        return found

    # -- serialization ---------------------------------------------------
    def _serialize(self, page, cands, data):
        dict_form = self.version >= (1, 12)
        with_mappings = self.version >= (1, 34)
        nested = self._nested
        rc_names = self.req.rc_names
        uuid_of = data.uuid
        root_of = data.root
        summaries = page.summaries
        single_res = None
        if self.unnumbered is not None:
            single_res = json.dumps(
                {rc_names[rc]: amt for rc, amt in self.unnumbered.rc_amounts.items()}
            )
        for cand in cands:
            if cand.single and dict_form:
                u = uuid_of[cand.root]
                text = '{"allocations": {"' + u + '": {"resources": ' + single_res + "}}"
                if with_mappings:
                    text += ', "mappings": {"": ["' + u + '"]}'
                page.allocation_requests.append(text + "}")
                roots = {cand.root}
                page.candidate_roots.append(roots)
                if nested:
                    if cand.root not in summaries:
                        summaries[cand.root] = {
                            uuid_of[rp]: self._summary(rp, data) for rp in data.by_root[cand.root]
                        }
                    continue
                page.candidate_rps.append({u})
                bucket = summaries.setdefault(cand.root, {})
                if u not in bucket:
                    bucket[u] = self._summary(cand.root, data)
                continue
            if cand.single:  # before 1.12: the general shape, from the group
                cand.amounts = {(cand.root, rc): amt for rc, amt in self._single_amounts}
                cand.mappings = {"": frozenset((cand.root,))}
            by_rp = {}
            for (rp, rc), amt in cand.amounts.items():
                u = uuid_of[rp]
                res = by_rp.get(u)
                if res is None:
                    res = by_rp[u] = {}
                res[rc_names[rc]] = amt
            if dict_form:
                body = {"allocations": {u: {"resources": r} for u, r in by_rp.items()}}
                if with_mappings:
                    body["mappings"] = {
                        suffix: sorted(uuid_of[rp] for rp in rps)
                        for suffix, rps in cand.mappings.items()
                    }
            else:
                body = {
                    "allocations": [
                        {"resource_provider": {"uuid": u}, "resources": r} for u, r in by_rp.items()
                    ]
                }
            rps = {rp for rp, _rc in cand.amounts}
            roots = {root_of[rp] for rp in rps}
            page.allocation_requests.append(json.dumps(body))
            page.candidate_roots.append(roots)
            if nested:
                # A root's bucket is filled whole, with every provider of its tree.
                for key in roots:
                    if key not in summaries:
                        summaries[key] = {
                            uuid_of[rp]: self._summary(rp, data) for rp in data.by_root[key]
                        }
                continue
            page.candidate_rps.append({uuid_of[rp] for rp in rps})
            for rp in rps:
                bucket = summaries.setdefault(root_of[rp], {})
                if uuid_of[rp] not in bucket:
                    bucket[uuid_of[rp]] = self._summary(rp, data)

    def _summary_head(self, rc):
        """'"NAME": {"capacity": ' for a class the summaries show, else None
        (before 1.27 only the requested classes are shown)."""
        name = self.req.rc_names.get(rc)
        if name is None:
            if not self._all_resources:
                head = None
            else:
                head = json.dumps(self._rc_name(rc)) + ': {"capacity": '
        elif not self._all_resources and name not in self._requested:
            head = None
        else:
            head = json.dumps(name) + ': {"capacity": '
        self._summary_heads[rc] = head
        return head

    def _summary(self, rp, data):
        """One provider summary as JSON text (names are JSON-quoted once per
        request; numbers are ints; uuids need no escaping)."""
        heads = self._summary_heads
        parts = []
        for rc, item in data.inv[rp].items():
            head = heads.get(rc, False)
            if head is False:
                head = self._summary_head(rc)
            if head is not None:
                parts.append(f'{head}{item.capacity}, "used": {item.used}}}')
        out = '{"resources": {' + ", ".join(parts) + "}"
        if self._with_traits:
            # Trait id order, as upstream's join returns them (clients and gabbits
            # compare the list as it comes).
            traits = data.traits[rp]
            ids = tuple(sorted(traits)) if len(traits) > 1 else tuple(traits)
            ttext = self._trait_texts.get(ids)
            if ttext is None:
                tnames = self.req.trait_names
                try:
                    tlist = [tnames[t] for t in ids]
                except KeyError:
                    tlist = [self._trait_name(t) for t in ids]
                ttext = self._trait_texts[ids] = json.dumps(tlist)
            out += ', "traits": ' + ttext
        if self._nested:
            parent = data.parent[rp]
            parent = '"' + data.uuid[parent] + '"' if parent is not None else "null"
            out += (
                ', "parent_provider_uuid": '
                + parent
                + ', "root_provider_uuid": "'
                + data.uuid[data.root[rp]]
                + '"'
            )
        return out + "}"

    def _rc_name(self, rc):
        return self._name(self.req.rc_names, m.resource_classes, rc)

    def _trait_name(self, trait):
        return self._name(self.req.trait_names, m.traits, trait)

    def _name(self, names, table, ident):
        # Names missing from the request's cache (classes/traits outside the
        # request) are loaded once, all together, on the first miss.
        if ident not in names:
            rows = self.conn.execute(sa.select(table.c.id, table.c.name))
            names.update(dict(tuple(r) for r in rows))
        return names[ident]

    def _finish(self, page):
        """limit / randomize, then keep the summaries of the kept requests."""
        limit = self.req.limit
        idx = list(range(len(page.allocation_requests)))
        if limit and limit < len(idx):
            idx = sorted(random.sample(idx, limit)) if self.randomize else idx[:limit]
            if self.randomize:
                random.shuffle(idx)
        elif self.randomize:
            random.shuffle(idx)
        page.allocation_requests = [page.allocation_requests[i] for i in idx]
        nested = self.version >= (1, 29)
        kept = {}
        if nested:
            roots = set()
            for i in idx:
                roots |= page.candidate_roots[i]
            for root in sorted(roots):
                kept.update(page.summaries.get(root, {}))
        else:
            uuids = set()
            for i in idx:
                uuids |= page.candidate_rps[i]
            for bucket in page.summaries.values():
                for uuid, summary in bucket.items():
                    if uuid in uuids:
                        kept[uuid] = summary
        page.provider_summaries = kept


def find(
    db,
    req,
    version,
    page_size=None,
    position=None,
    randomize=False,
    max_candidates=-1,
    start_fraction=None,
    with_nodes=False,
):
    """Run the pipeline on one connection; return a Page.

    ``with_nodes``: also read the node data of the page's anchor roots
    (``page.nodes``) on the same connection.

    ``position``: where a paged walk resumes (a decoded marker); without it,
    ``start_fraction`` (0 <= f < 1) starts a new walk at that point of the
    root-id range, wrapping around past the highest root.
    """
    # READ COMMITTED: every statement sees its own snapshot, with or without a
    # transaction around them, so none is opened (two round trips fewer).
    with db.read(snapshot=False) as conn:
        candidate_request.resolve(conn, req)
        if position is None and start_fraction is not None:
            start = candidate_sql.root_id_at(conn, start_fraction)
            if start is None:
                return Page()
            position = Position(None, start, False)
        engine = _Engine(conn, req, version, randomize, max_candidates)
        page = engine.run(page_size=page_size, position=position)
        if with_nodes:
            page.nodes = node_obj.node_data(db, page.anchor_roots, conn)
    return page
