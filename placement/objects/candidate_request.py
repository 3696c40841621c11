"""The parsed and resolved form of a GET /allocation_candidates request.

The handler fills ``CandidateRequest`` from the query string (names and
UUIDs); ``resolve`` turns names into internal ids in one round trip and
raises the upstream 400s for unknown resource classes and traits.
"""

import dataclasses
import functools

import os_traits
import sqlalchemy as sa

from placement import errors
from placement import models as m


@dataclasses.dataclass
class Group:
    suffix: str
    resources: dict = dataclasses.field(default_factory=dict)  # rc name -> amount
    required: set = dataclasses.field(default_factory=set)
    any_of: list = dataclasses.field(default_factory=list)
    forbidden: set = dataclasses.field(default_factory=set)
    member_of: list = dataclasses.field(default_factory=list)  # [set of agg uuids]
    forbidden_aggs: set = dataclasses.field(default_factory=set)
    in_tree: str = None
    # Filled by resolve():
    rc_amounts: dict = dataclasses.field(default_factory=dict)  # rc id -> amount
    required_ids: set = dataclasses.field(default_factory=set)
    any_of_ids: list = dataclasses.field(default_factory=list)
    forbidden_ids: set = dataclasses.field(default_factory=set)
    member_of_ids: list = dataclasses.field(default_factory=list)
    forbidden_agg_ids: set = dataclasses.field(default_factory=set)
    in_tree_root: int = None

    @property
    def granular(self):
        """Numbered/named groups are satisfied by one provider each."""
        return self.suffix != ""


@dataclasses.dataclass
class CandidateRequest:
    groups: list
    group_policy: str = None
    limit: int = None
    root_required: set = dataclasses.field(default_factory=set)
    root_forbidden: set = dataclasses.field(default_factory=set)
    same_subtrees: list = dataclasses.field(default_factory=list)
    nested_aware: bool = True
    # Filled by resolve():
    rc_names: dict = dataclasses.field(default_factory=dict)  # id -> name
    trait_names: dict = dataclasses.field(default_factory=dict)  # id -> name
    root_required_ids: set = dataclasses.field(default_factory=set)
    root_forbidden_ids: set = dataclasses.field(default_factory=set)
    sharing_trait_id: int = None
    sharing_providers: list = dataclasses.field(default_factory=list)  # [(id, root id)]
    sharing_ids: set = dataclasses.field(default_factory=set)
    shared_rcs: set = dataclasses.field(default_factory=set)
    # True when the request cannot match anything (unknown aggregate or
    # in_tree provider): an empty answer, not an error, as upstream.
    impossible: bool = False

    @property
    def requested_rc_names(self):
        return {name for g in self.groups for name in g.resources}


@functools.cache
def _lookup_statement():
    """Resource class, trait and aggregate ids by name/uuid, and the sharing
    providers (id, root id), in one round trip: (kind, key, id, root id)."""
    rc, tr, agg = m.resource_classes, m.traits, m.placement_aggregates
    rp, rpt = m.resource_providers, m.resource_provider_traits
    no_int = sa.cast(sa.null(), sa.Integer)
    no_text = sa.cast(sa.null(), sa.String)
    return sa.union_all(
        sa.select(sa.literal(0), rc.c.name, rc.c.id, no_int).where(
            rc.c.name.in_(sa.bindparam("rc_names", expanding=True))
        ),
        sa.select(sa.literal(1), tr.c.name, tr.c.id, no_int).where(
            tr.c.name.in_(sa.bindparam("trait_names", expanding=True))
        ),
        sa.select(sa.literal(2), agg.c.uuid, agg.c.id, no_int).where(
            agg.c.uuid.in_(sa.bindparam("agg_uuids", expanding=True))
        ),
        # By the trait's id, not a join on its name: PostgreSQL cannot know
        # which id the name has, estimates the join from the commonest
        # trait (on a cluster where every node has HW_CPU_X86_AVX2, all of
        # them) and reads every provider's traits (10 ms at 100,000
        # roots); given the id, it looks the few sharing providers up.
        sa.select(sa.literal(3), no_text, rpt.c.resource_provider_id, rp.c.root_provider_id)
        .select_from(rpt.join(rp, rp.c.id == rpt.c.resource_provider_id))
        .where(rpt.c.trait_id == sa.bindparam("sharing_trait_id", type_=sa.Integer)),
    )


# Where a pooled database connection keeps the id of MISC_SHARES_VIA_AGGREGATE.
_SHARING_TRAIT_KEY = "placement.sharing_trait_id"


def _lookup(conn, params):
    """({rc names: id}, {trait names: id}, {aggregate uuids: id}) and the
    sharing providers, from one run of the lookup statement."""
    found = ({}, {}, {})
    sharing = []
    for kind, key, ident, root in conn.execute(_lookup_statement(), params):
        if kind == 3:
            sharing.append((ident, root))
        else:
            found[kind][key] = ident
    return found, sharing


def resolve(conn, req):
    """Map names and UUIDs to internal ids; list the sharing providers
    (``req.sharing_providers``: (id, root id), in id order).

    :raise ApiError 400: an unknown resource class or trait (upstream's messages).
    """
    names = set(req.root_required) | set(req.root_forbidden) | {os_traits.MISC_SHARES_VIA_AGGREGATE}
    for group in req.groups:
        names |= group.required | group.forbidden
        for anyset in group.any_of:
            names |= anyset
    agg_uuids = set()
    for group in req.groups:
        agg_uuids |= group.forbidden_aggs
        for s in group.member_of:
            agg_uuids |= s
    params = {
        "rc_names": sorted(req.requested_rc_names),
        "trait_names": sorted(names),
        "agg_uuids": sorted(agg_uuids),
    }
    # The sharing providers are read by the id of MISC_SHARES_VIA_AGGREGATE,
    # which the same statement also reports: kept on the pooled connection,
    # it costs nothing; the first time (or if the trait was ever created
    # again under another id) the statement runs a second time with the id
    # it reported.
    info = conn.connection.info
    for _attempt in range(2):
        params["sharing_trait_id"] = used = info.get(_SHARING_TRAIT_KEY, -1)
        found, sharing = _lookup(conn, params)
        actual = found[1].get(os_traits.MISC_SHARES_VIA_AGGREGATE, -1)
        if actual == used:
            break
        info[_SHARING_TRAIT_KEY] = actual
    rc_ids, trait_ids, agg_ids = found
    req.sharing_providers = sorted(sharing)

    for group in req.groups:
        for name in group.resources:
            if name not in rc_ids:
                raise errors.bad_request(
                    f"Invalid resource class in resources parameter: No such resource class {name}."
                )
        group.rc_amounts = {rc_ids[name]: amount for name, amount in group.resources.items()}
    req.rc_names = {v: k for k, v in rc_ids.items()}

    req.sharing_trait_id = trait_ids.get(os_traits.MISC_SHARES_VIA_AGGREGATE)
    missing = sorted(n for n in names - set(trait_ids) if n != os_traits.MISC_SHARES_VIA_AGGREGATE)
    if missing:
        raise errors.bad_request(f"No such trait(s): {', '.join(missing)}.")
    req.trait_names = {v: k for k, v in trait_ids.items()}
    req.root_required_ids = {trait_ids[n] for n in req.root_required}
    req.root_forbidden_ids = {trait_ids[n] for n in req.root_forbidden}
    for group in req.groups:
        group.required_ids = {trait_ids[n] for n in group.required}
        group.any_of_ids = [{trait_ids[n] for n in s} for s in group.any_of]
        group.forbidden_ids = {trait_ids[n] for n in group.forbidden}

    rp = m.resource_providers
    for group in req.groups:
        group.member_of_ids = []
        for s in group.member_of:
            ids = {agg_ids[u] for u in s if u in agg_ids}
            if not ids:
                # No provider can be in an aggregate nobody ever used.
                req.impossible = True
            group.member_of_ids.append(ids)
        group.forbidden_agg_ids = {agg_ids[u] for u in group.forbidden_aggs if u in agg_ids}
        if group.in_tree is not None:
            root = conn.execute(
                sa.select(rp.c.root_provider_id).where(rp.c.uuid == group.in_tree)
            ).scalar_one_or_none()
            if root is None:
                req.impossible = True
            group.in_tree_root = root
    return req
